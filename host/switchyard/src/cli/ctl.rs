//! `switchyard ctl`: an operator's commands against a running controller's HTTP API
//! (status, policies, upload, activate, parameters, experiments, decisions), so nobody
//! hand-crafts curl. The address and the token come from flags or the environment; the
//! answers print as short text, or as the controller's JSON with `--json`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use reqwest::Method;
use serde_json::{Value, json};
use switchyard_controller::{Body, Client};

/// Arguments of `ctl`.
#[derive(Debug, clap::Args)]
pub(crate) struct CtlArgs {
    /// The controller's address.
    #[arg(
        long,
        env = "SWITCHYARD_URL",
        default_value = "http://127.0.0.1:8080",
        value_name = "http://HOST:PORT"
    )]
    url: String,
    /// A file holding the API token (the controller's --token-file); needed for changes.
    #[arg(long, env = "SWITCHYARD_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The API token itself (prefer --token-file: a flag shows in the process list).
    #[arg(
        long,
        env = "SWITCHYARD_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file",
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// Print the controller's JSON answer instead of text.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    command: CtlCommand,
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
    /// Upload a policy component (a .wasm file); it replaces a loaded one of its name.
    Upload {
        /// The component.
        file: PathBuf,
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
    /// The most recent decisions with their reasons, oldest first.
    Decisions {
        /// How many (1 to 1000).
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
}

#[derive(Debug, clap::Subcommand)]
enum ExperimentCommand {
    /// Shadow: POLICY_B decides on every snapshot the active policy sees; only the
    /// active policy's decisions apply.
    Shadow {
        /// Arm B's policy.
        policy_b: String,
    },
    /// Split: the jobs (and optionally the nodes) are divided between the active policy
    /// and POLICY_B.
    Split {
        /// Arm B's policy.
        policy_b: String,
        /// Share of jobs for B, by a hash of the job id, in [0, 1].
        #[arg(long, required_unless_present = "job_selector")]
        ratio: Option<f64>,
        /// Jobs with this label (`key=value`) go to B instead.
        #[arg(long, conflicts_with = "ratio", value_name = "KEY=VALUE")]
        job_selector: Option<String>,
        /// Nodes with this label (`key=value`) belong to B, the others to the active policy.
        #[arg(long, value_name = "KEY=VALUE")]
        node_selector: Option<String>,
    },
    /// The running experiment's figures.
    Show,
    /// Stop the experiment; prints its final figures.
    Stop,
}

pub(super) fn run(args: CtlArgs) -> anyhow::Result<ExitCode> {
    let token = match (&args.token_file, &args.token) {
        (Some(file), _) => Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("reading the token file {}", file.display()))?
                .trim()
                .to_string(),
        ),
        (None, token) => token.clone(),
    };
    let client = Client::new(&args.url, token)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the HTTP client")?;
    let answer = runtime.block_on(request(&client, &args.command))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        print!("{}", text(&args.command, &answer));
    }
    Ok(ExitCode::SUCCESS)
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
        CtlCommand::Upload { file } => {
            let bytes =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            client
                .send(Method::POST, "/v1/policies", Body::Wasm(bytes))
                .await?
        }
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
        CtlCommand::Experiment(ExperimentCommand::Shadow { policy_b }) => {
            let body = json!({"mode": "shadow", "policy_b": policy_b});
            client
                .send(Method::POST, "/v1/experiment", Body::Json(body))
                .await?
        }
        CtlCommand::Experiment(ExperimentCommand::Split {
            policy_b,
            ratio,
            job_selector,
            node_selector,
        }) => {
            let body = json!({
                "mode": "split",
                "policy_b": policy_b,
                "ratio": ratio,
                "job_selector": job_selector,
                "node_selector": node_selector,
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
        CtlCommand::Decisions { limit } => {
            client.get(&format!("/v1/decisions?limit={limit}")).await?
        }
    };
    Ok(answer)
}

/// A JSON value as a short cell: strings bare, the rest as JSON.
fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The answer as text for a person.
fn text(command: &CtlCommand, answer: &Value) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    match command {
        CtlCommand::Status => {
            let s = &answer["snapshot"];
            line(format!("active:     {}", cell(&answer["active"])));
            line(format!(
                "rounds:     {} ({} decided by the fallback)",
                answer["rounds"], answer["failures"]
            ));
            line(format!(
                "cluster:    t={:.0}s, {} nodes, {} jobs ({} waiting, {} running, {} restarting), {} finished",
                s["time"].as_f64().unwrap_or(0.0),
                s["nodes"],
                s["jobs"],
                s["waiting"],
                s["running"],
                s["restarting"],
                s["finished"]
            ));
            line(format!(
                "experiment: {}",
                if answer["experiment_running"] == true {
                    "running (switchyard ctl experiment show)"
                } else {
                    "none"
                }
            ));
            line(format!(
                "replica:    {} ({}; leader: {})",
                cell(&answer["identity"]),
                if answer["leading"] == true {
                    "leading"
                } else {
                    "following"
                },
                cell(&answer["leader"])
            ));
            if let Some(ended) = answer["ended"].as_str() {
                line(format!("ended:      {ended}"));
            }
            if let Some(error) = answer["state_error"].as_str() {
                line(format!("state:      not persisted: {error}"));
            }
            for failure in answer["load_errors"].as_array().into_iter().flatten() {
                line(format!(
                    "refused:    {}: {}",
                    cell(&failure["source"]),
                    cell(&failure["error"])
                ));
            }
        }
        CtlCommand::WaitReady { .. } => line("ready".into()),
        CtlCommand::Policies => {
            let active = &answer["active"];
            for p in answer["policies"].as_array().into_iter().flatten() {
                let mark = if &p["name"] == active { "*" } else { " " };
                line(format!(
                    "{mark} {:<16} {:<8} {:<28} {}",
                    cell(&p["name"]),
                    cell(&p["version"]),
                    cell(&p["source"]),
                    cell(&p["summary"])
                ));
            }
            for failure in answer["load_errors"].as_array().into_iter().flatten() {
                line(format!(
                    "refused: {}: {}",
                    cell(&failure["source"]),
                    cell(&failure["error"])
                ));
            }
        }
        CtlCommand::Upload { .. } => {
            let p = &answer["policy"];
            line(format!(
                "loaded {} {} ({})",
                cell(&p["name"]),
                cell(&p["version"]),
                cell(&p["digest"])
            ));
            if let Some(round) = answer["applied"]["from_round"].as_u64() {
                line(format!("it is the active policy from round {round}"));
            }
            line(format!("kept: {}", cell(&answer["persistence"])));
        }
        CtlCommand::Activate { .. } => line(format!(
            "active: {} from round {}",
            cell(&answer["active"]),
            answer["from_round"]
        )),
        CtlCommand::Parameters { .. } => {
            let p = &answer["policy"];
            line(format!("{}: {}", cell(&p["name"]), cell(&p["settings"])));
            if let Some(round) = answer["applied"]["from_round"].as_u64() {
                line(format!("applies from round {round}"));
            }
        }
        CtlCommand::Experiment(_) => {
            line(serde_json::to_string_pretty(answer).unwrap_or_default());
        }
        CtlCommand::Decisions { .. } => {
            for d in answer["decisions"].as_array().into_iter().flatten() {
                line(format!(
                    "round {} t={:.1}s {}{}",
                    d["round"],
                    d["time"].as_f64().unwrap_or(0.0),
                    cell(&d["policy"]),
                    d["failure"]
                        .as_str()
                        .map_or(String::new(), |f| format!(" FAILED: {f}"))
                ));
                for a in d["accepted"].as_array().into_iter().flatten() {
                    line(format!(
                        "  {} {}: {}",
                        cell(&a["op"]),
                        cell(&a["job"]),
                        cell(&a["reason"])
                    ));
                }
                for r in d["rejected"].as_array().into_iter().flatten() {
                    line(format!("  rejected: {}", cell(r)));
                }
            }
        }
    }
    out
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
}
