//! `switchyard ctl`: an operator's commands against a running controller's HTTP API
//! (status, policies, jobs, upload, activate, parameters, experiments, decisions), so
//! nobody hand-crafts curl. It parses its own flags (only the client's: the address,
//! the token, the output format), picks the token as kubectl does (a flag over the
//! environment, an empty variable as unset), sends the requests and hands the answers to
//! [`text`] or prints them as JSON. It must not interpret the controller's figures.

mod text;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use clap::Parser as _;
use reqwest::Method;
use serde_json::{Value, json};
use switchyard_control::{DecisionRecord, PolicyFromRound};
use switchyard_controller::{Body, Client};

use super::terminal::escaped;

/// The address used when neither `--url` nor SWITCHYARD_URL gives one.
const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// What `ctl --help` says about the environment.
const ENVIRONMENT_HELP: &str = "Environment: SWITCHYARD_URL (the address), SWITCHYARD_TOKEN \
(the token) and SWITCHYARD_TOKEN_FILE (a file holding it). A flag overrides its variable and \
an empty variable counts as unset, as in kubectl; of the two token variables, \
SWITCHYARD_TOKEN wins, as --token would.";

/// `switchyard ctl` with what follows it, parsed by [`CtlArgs`]: the controller's own
/// flags (sandbox limits, caches) mean nothing here and stay out of `ctl --help`.
#[derive(Debug, clap::Args)]
pub(crate) struct CtlCommandLine {
    /// The ctl command and its flags.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// Arguments of `ctl`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "switchyard ctl",
    about = "Operate a running controller over its HTTP API",
    after_help = ENVIRONMENT_HELP
)]
struct CtlArgs {
    /// The controller's address [env: SWITCHYARD_URL] [default: http://127.0.0.1:8080].
    #[arg(long, global = true, value_name = "http://HOST:PORT")]
    url: Option<String>,
    /// A file holding the API token (the controller's --token-file); needed for changes
    /// [env: SWITCHYARD_TOKEN_FILE].
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// The API token itself (prefer --token-file: a flag shows in the process list)
    /// [env: SWITCHYARD_TOKEN].
    #[arg(long, global = true, value_name = "TOKEN")]
    token: Option<String>,
    /// `text` for people, `json` (the controller's answer) for scripts.
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// The same as `-o json`.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: CtlCommand,
}

/// How answers are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    /// Short text for a person, every foreign string escaped.
    Text,
    /// The controller's JSON (`decisions --follow`: one record per line).
    Json,
}

#[derive(Debug, clap::Subcommand)]
enum CtlCommand {
    /// The active policy, rounds, the cluster, load errors, leadership.
    Status,
    /// Wait until the controller answers /readyz (after a start, before other commands).
    WaitReady {
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 600, value_name = "SECONDS")]
        timeout: u64,
    },
    /// The loaded policies: name, version, source, the active one marked.
    Policies,
    /// The active jobs: phase, nodes, arm in a split, and the labels policies put on
    /// them with the policy that did.
    Jobs {
        /// Only jobs in this phase.
        #[arg(long, value_name = "waiting|running|restarting")]
        phase: Option<String>,
        /// At most this many (1 to 500).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Upload a policy component (a .wasm file), or have the controller pull one from a
    /// registry (oci://REGISTRY/REPOSITORY:TAG, ...@sha256:DIGEST); it replaces a loaded
    /// one of its name. A policy from a registry is kept as its reference pinned to the
    /// digest, however large it is.
    Upload {
        /// The component: a regular file of at most --max-upload-mib, or its registry
        /// reference.
        file: PathBuf,
        /// The largest file sent, MiB: the controller's own --max-upload-mib (a larger
        /// file is refused before it is read).
        #[arg(long, default_value_t = switchyard_controller::DEFAULT_MAX_UPLOAD_BYTES >> 20, value_name = "MIB")]
        max_upload_mib: usize,
    },
    /// Make a loaded policy the active one (from the next round).
    Activate {
        /// The policy's name.
        name: String,
    },
    /// Set a policy's parameters, `KEY=VALUE ...` (the policy checks them).
    Parameters {
        /// The policy's name.
        name: String,
        /// The parameters.
        #[arg(required = true, value_name = "KEY=VALUE")]
        settings: Vec<String>,
    },
    /// Start, show or stop an A/B experiment.
    #[command(subcommand)]
    Experiment(ExperimentCommand),
    /// Recent rounds that did something, oldest first: every arm's actions with their
    /// tasks, values and reasons, what was rejected or failed, and policy failures.
    Decisions {
        /// How many recent rounds to read (1 to 1000); rounds without actions are read
        /// but not shown.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Only actions on this job.
        #[arg(long, value_name = "ID")]
        job: Option<String>,
        /// Only what this policy decided (either arm).
        #[arg(long, value_name = "NAME")]
        policy: Option<String>,
        /// Keep printing new rounds as they come, until interrupted.
        #[arg(long, short)]
        follow: bool,
    },
}

#[derive(Debug, clap::Subcommand)]
enum ExperimentCommand {
    /// Shadow: POLICY_B decides on every snapshot the active policy sees; only the
    /// active policy's decisions apply.
    Shadow {
        /// Arm B's policy.
        policy_b: String,
        /// Replace a running experiment (without it, one running is a refusal).
        #[arg(long)]
        replace: bool,
    },
    /// Split: the jobs (and optionally the nodes) are divided between the active policy
    /// and POLICY_B.
    Split {
        /// Arm B's policy.
        policy_b: String,
        /// Share of jobs for B, in [0, 1].
        #[arg(long, required_unless_present = "job_selector")]
        ratio: Option<f64>,
        /// How --ratio assigns jobs: `hash` (by a hash of the job id) or `balanced` (the
        /// hash held to the ratio as jobs arrive: 20 jobs at 0.5 are 10 and 10).
        #[arg(long, requires = "ratio", value_name = "hash|balanced")]
        assign: Option<String>,
        /// Jobs with this label (`key=value`) go to B instead.
        #[arg(long, conflicts_with = "ratio", value_name = "KEY=VALUE")]
        job_selector: Option<String>,
        /// Nodes with this label (`key=value`) belong to B, the others to the active policy.
        #[arg(long, value_name = "KEY=VALUE")]
        node_selector: Option<String>,
        /// Replace a running experiment (without it, one running is a refusal).
        #[arg(long)]
        replace: bool,
    },
    /// The running experiment's figures.
    Show,
    /// Stop the experiment; prints its final figures.
    Stop,
}

/// Parses `ctl`'s own arguments and runs the command.
pub(super) fn run(line: CtlCommandLine) -> anyhow::Result<ExitCode> {
    let args = CtlArgs::parse_from(std::iter::once("switchyard ctl".to_string()).chain(line.rest));
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let url = args
        .url
        .clone()
        .or_else(|| env("SWITCHYARD_URL"))
        .unwrap_or_else(|| DEFAULT_URL.into());
    let token = match token_source(&args, env) {
        Some(TokenSource::Given(token)) => Some(token),
        Some(TokenSource::File(file)) => Some(switchyard_controller::read_token_file(&file)?),
        None => None,
    };
    let output = if args.json { Output::Json } else { args.output };
    let client = Client::new(&url, token)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the HTTP client")?;
    runtime
        .block_on(execute(&client, &args.command, output))
        // The controller's messages quote what it was sent: escaped like any answer.
        .map_err(|error| anyhow!("{}", escaped(&format!("{error:#}"))))?;
    Ok(ExitCode::SUCCESS)
}

/// Where the token comes from.
#[derive(Debug, PartialEq)]
enum TokenSource {
    /// The token itself.
    Given(String),
    /// A file holding it.
    File(PathBuf),
}

/// kubectl's order: `--token`, `--token-file`, then SWITCHYARD_TOKEN, then
/// SWITCHYARD_TOKEN_FILE (`env` gives a variable's value, none when unset or empty).
/// A flag of either kind overrides both variables, so a token file named in the
/// environment never clashes with `--token` on the command line.
fn token_source(args: &CtlArgs, env: impl Fn(&str) -> Option<String>) -> Option<TokenSource> {
    if let Some(token) = &args.token {
        return Some(TokenSource::Given(token.clone()));
    }
    if let Some(file) = &args.token_file {
        return Some(TokenSource::File(file.clone()));
    }
    env("SWITCHYARD_TOKEN")
        .map(TokenSource::Given)
        .or_else(|| env("SWITCHYARD_TOKEN_FILE").map(|f| TokenSource::File(f.into())))
}

async fn execute(client: &Client, command: &CtlCommand, output: Output) -> anyhow::Result<()> {
    if let CtlCommand::Decisions {
        limit,
        job,
        policy,
        follow,
    } = command
    {
        let filter = text::DecisionFilter {
            job: job.as_deref(),
            policy: policy.as_deref(),
        };
        return decisions(client, *limit, &filter, *follow, output).await;
    }
    let answer = request(client, command).await?;
    if output == Output::Json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let printed = match command {
        CtlCommand::Status => text::status_text(&answer),
        CtlCommand::WaitReady { .. } => "ready\n".into(),
        CtlCommand::Policies => text::policies(&answer),
        CtlCommand::Jobs { .. } => text::jobs(&answer) + "\n",
        CtlCommand::Upload { .. } => text::upload(&answer),
        CtlCommand::Activate { .. } => text::activated(&answer),
        CtlCommand::Parameters { .. } => text::parameters(&answer),
        CtlCommand::Experiment(which) => text::experiment(
            &answer,
            match which {
                ExperimentCommand::Shadow { .. } | ExperimentCommand::Split { .. } => {
                    "started, from the next round"
                }
                ExperimentCommand::Show => "running",
                ExperimentCommand::Stop => "stopped; its final figures",
            },
        )?,
        CtlCommand::Decisions { .. } => unreachable!("decisions are printed by `decisions`"),
    };
    print!("{printed}");
    Ok(())
}

/// A path segment with everything but unreserved characters percent-encoded, so a name
/// cannot reach another path (`.` and `..` are refused: URLs resolve them even encoded).
fn segment(name: &str) -> anyhow::Result<String> {
    if name.is_empty() || name == "." || name == ".." {
        bail!("`{name}` cannot name a policy");
    }
    Ok(name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect())
}

async fn request(client: &Client, command: &CtlCommand) -> anyhow::Result<Value> {
    let answer = match command {
        CtlCommand::Status => client.get("/v1/status").await?,
        CtlCommand::WaitReady { timeout } => {
            client.wait_ready(Duration::from_secs(*timeout)).await?;
            json!({"ready": true})
        }
        CtlCommand::Policies => client.get("/v1/policies").await?,
        CtlCommand::Jobs { phase, limit } => {
            let mut path = format!("/v1/jobs?limit={limit}");
            if let Some(phase) = phase {
                path.push_str(&format!("&phase={}", segment(phase)?));
            }
            client.get(&path).await?
        }
        CtlCommand::Upload {
            file,
            max_upload_mib,
        } => match file.to_str() {
            Some(reference) if switchyard_registry::Reference::is_reference(reference) => {
                let body = json!({ "reference": reference });
                client
                    .send(Method::POST, "/v1/policies", Body::Json(body))
                    .await?
            }
            _ => {
                let limit = u64::try_from(*max_upload_mib)
                    .unwrap_or(u64::MAX)
                    .saturating_mul(1 << 20);
                let bytes =
                    switchyard_control::read_regular_file(file, limit).with_context(|| {
                        format!(
                            "reading {} (a regular file of at most {max_upload_mib} MiB, \
                             --max-upload-mib)",
                            file.display()
                        )
                    })?;
                client
                    .send(Method::POST, "/v1/policies", Body::Wasm(bytes))
                    .await?
            }
        },
        CtlCommand::Activate { name } => {
            let path = format!("/v1/policies/{}/activate", segment(name)?);
            client.send(Method::POST, &path, Body::Empty).await?
        }
        CtlCommand::Parameters { name, settings } => {
            let mut body = serde_json::Map::new();
            for setting in settings {
                let Some((key, value)) = setting.split_once('=') else {
                    bail!("parameter `{setting}`: expected KEY=VALUE");
                };
                body.insert(key.to_string(), Value::String(value.to_string()));
            }
            let path = format!("/v1/policies/{}/parameters", segment(name)?);
            client
                .send(Method::PUT, &path, Body::Json(Value::Object(body)))
                .await?
        }
        CtlCommand::Experiment(ExperimentCommand::Shadow { policy_b, replace }) => {
            let body = json!({"mode": "shadow", "policy_b": policy_b, "replace": replace});
            client
                .send(Method::POST, "/v1/experiment", Body::Json(body))
                .await?
        }
        CtlCommand::Experiment(ExperimentCommand::Split {
            policy_b,
            ratio,
            assign,
            job_selector,
            node_selector,
            replace,
        }) => {
            let body = json!({
                "mode": "split",
                "policy_b": policy_b,
                "ratio": ratio,
                "assign": assign,
                "job_selector": job_selector,
                "node_selector": node_selector,
                "replace": replace,
            });
            client
                .send(Method::POST, "/v1/experiment", Body::Json(body))
                .await?
        }
        CtlCommand::Experiment(ExperimentCommand::Show) => client.get("/v1/experiment").await?,
        CtlCommand::Experiment(ExperimentCommand::Stop) => {
            client
                .send(Method::DELETE, "/v1/experiment", Body::Empty)
                .await?
        }
        CtlCommand::Decisions { .. } => unreachable!("decisions are read by `decisions`"),
    };
    Ok(answer)
}

/// How often `decisions --follow` asks for new rounds.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// `ctl decisions`: the last `limit` rounds, then with `follow` every newer round as it
/// comes, each kept when `filter` leaves something of it.
async fn decisions(
    client: &Client,
    limit: usize,
    filter: &text::DecisionFilter<'_>,
    follow: bool,
    output: Output,
) -> anyhow::Result<()> {
    let page = client.get(&format!("/v1/decisions?limit={limit}")).await?;
    // Each component a policy name stands for is named once, before the first round it
    // is shown for, however many pages follow.
    let mut named = BTreeSet::new();
    let mut new_deciders = |page: &Value| -> Vec<PolicyFromRound> {
        let policies: Vec<PolicyFromRound> =
            serde_json::from_value(page["policies"].clone()).unwrap_or_default();
        policies
            .into_iter()
            .filter(|p| filter.policy.is_none_or(|name| name == p.policy.name))
            .filter(|p| {
                named.insert((p.policy.name.clone(), p.policy.digest.clone(), p.from_round))
            })
            .collect()
    };
    // `first`: the page asked for, whose rounds without actions are counted in a line; a
    // followed round is printed only when it did something.
    let print = |records: &[DecisionRecord],
                 deciders: &[PolicyFromRound],
                 first: bool|
     -> anyhow::Result<()> {
        let kept: Vec<DecisionRecord> = records.iter().filter_map(|r| filter.apply(r)).collect();
        match output {
            // Without --follow the JSON is the controller's page, its records filtered.
            Output::Json if !follow => {
                let mut page = page.clone();
                page["decisions"] = serde_json::to_value(&kept)?;
                println!("{}", serde_json::to_string_pretty(&page)?);
            }
            Output::Json => {
                for policy in deciders {
                    println!("{}", serde_json::json!({ "policy": policy }));
                }
                for record in &kept {
                    println!("{}", serde_json::to_string(record)?);
                }
            }
            Output::Text => {
                let read = if first { records.len() } else { kept.len() };
                print!("{}", text::decider_lines(deciders));
                print!("{}", text::decisions(&kept, read, filter));
            }
        }
        Ok(())
    };
    let records = records_of(&page)?;
    print(&records, &new_deciders(&page), true)?;
    if !follow {
        return Ok(());
    }
    let mut last = records.last().map(|r| r.round);
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        let path = match last {
            Some(round) => format!("/v1/decisions?since={round}&limit=1000"),
            None => "/v1/decisions?limit=1000".into(),
        };
        let page = client.get(&path).await?;
        let records = records_of(&page)?;
        if let Some(newest) = records.last() {
            last = Some(newest.round);
            print(&records, &new_deciders(&page), false)?;
        }
    }
}

fn records_of(page: &Value) -> anyhow::Result<Vec<DecisionRecord>> {
    serde_json::from_value(page["decisions"].clone())
        .context("reading the controller's decisions (is it a different version?)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_policy_name_stays_one_path_segment() {
        assert_eq!(segment("../admin?x=1").unwrap(), "..%2Fadmin%3Fx%3D1");
        assert_eq!(segment("specon").unwrap(), "specon");
        assert!(segment("..").is_err());
        assert!(segment("").is_err());
    }

    fn parsed(args: &[&str]) -> CtlArgs {
        CtlArgs::try_parse_from(["switchyard ctl"].iter().chain(args)).unwrap()
    }

    #[test]
    fn a_token_flag_overrides_a_token_file_from_the_environment() {
        let env = |name: &str| (name == "SWITCHYARD_TOKEN_FILE").then(|| "/run/token".into());
        assert_eq!(
            token_source(&parsed(&["--token", "t", "status"]), env),
            Some(TokenSource::Given("t".into()))
        );
        assert_eq!(
            token_source(&parsed(&["status"]), env),
            Some(TokenSource::File("/run/token".into()))
        );
    }

    #[test]
    fn a_token_file_flag_overrides_a_token_from_the_environment() {
        let env = |name: &str| (name == "SWITCHYARD_TOKEN").then(|| "from-env".into());
        assert_eq!(
            token_source(&parsed(&["--token-file", "f", "status"]), env),
            Some(TokenSource::File("f".into()))
        );
    }

    #[test]
    fn without_flags_the_token_variable_wins_over_the_file_variable() {
        let env = |name: &str| Some(format!("{name}-value"));
        assert_eq!(
            token_source(&parsed(&["status"]), env),
            Some(TokenSource::Given("SWITCHYARD_TOKEN-value".into()))
        );
        assert_eq!(token_source(&parsed(&["status"]), |_: &str| None), None);
    }

    #[test]
    fn both_token_flags_at_once_are_refused() {
        let both = [
            "switchyard ctl",
            "--token",
            "t",
            "--token-file",
            "f",
            "status",
        ];
        assert!(CtlArgs::try_parse_from(both).is_err());
    }

    #[test]
    fn json_output_is_asked_for_with_either_flag_anywhere_after_ctl() {
        assert_eq!(parsed(&["jobs", "-o", "json"]).output, Output::Json);
        assert!(parsed(&["jobs", "--json"]).json);
        assert_eq!(parsed(&["-o", "json", "status"]).output, Output::Json);
    }
}
