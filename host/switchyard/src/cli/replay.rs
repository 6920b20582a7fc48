//! `switchyard replay`: a recording made by `run --record` decided again by other
//! policies (decision replay), run as a simulator workload under other policies
//! (counterfactual replay, `--simulate`) or exported as that workload or with its names
//! anonymised. The work is in [`switchyard_control::replay()`],
//! [`switchyard_control::Recording`] and [`switchyard_sim::estimate_counterfactual`]; this
//! module reads the flags and prints the report.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use switchyard_control::{
    Agreement, PolicySlot, Recording, ReplayPolicy, ReplayReport, export_anonymised, replay,
};
use switchyard_core::Action;
use switchyard_runtime::PolicyRef;
use switchyard_sim::{Workload, estimate_counterfactual};

use super::SandboxArgs;
use super::action_text::operation;
use super::input_limits::InputLimitArgs;
use super::terminal::escaped;

/// Arguments of `replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The recording: a directory written by `run --record DIR`, or one of its segment
    /// files.
    pub recording: PathBuf,
    /// A policy to decide the recorded rounds: a built-in name or a `.wasm` file, named
    /// in the report by its own name or by NAME with `NAME=POLICY`; repeat to compare.
    #[arg(long = "policy", value_name = "[NAME=]POLICY")]
    pub policies: Vec<String>,
    /// A policy parameter of one replayed policy, `NAME.key=value`.
    #[arg(long = "set", value_name = "NAME.KEY=VALUE")]
    pub sets: Vec<String>,
    /// Print the whole report as JSON (every kept difference) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Differing rounds shown per policy in the text report.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub show: usize,
    /// Write the recording to this directory with job, task and node names and labels
    /// replaced by salted hashes (needs --anonymise).
    #[arg(long, value_name = "DIR", requires = "anonymise")]
    pub export_recording: Option<PathBuf>,
    /// Counterfactual replay: run the recorded load (its arrivals, nodes, and each
    /// job's speed, work and loss curve estimated from what it did) in the simulator
    /// under each --policy, and compare with the recorded run, as `simulate` does.
    #[arg(long, conflicts_with = "json")]
    pub simulate: bool,
    /// Write the recorded load as a workload file (YAML, see docs/workloads.md) to
    /// edit and run with `simulate`.
    #[arg(long, value_name = "FILE")]
    pub export_workload: Option<PathBuf>,
    /// With --simulate: directory for results.json, decision traces and plots.
    #[arg(long, value_name = "DIR", requires = "simulate")]
    pub out: Option<PathBuf>,
    /// With --simulate: KiB of decision records each run's trace holds; the rounds past
    /// it are summarised in the trace's last line.
    #[arg(long, default_value_t = super::simulate::DEFAULT_TRACE_LIMIT_KIB, value_name = "KIB")]
    pub trace_limit_kib: u64,
    /// With --simulate: the seed of the simulated runs (default: the recording's).
    #[arg(long, requires = "simulate")]
    pub seed: Option<u64>,
    /// With --simulate: the policy that decides a round when the tested one fails.
    #[arg(
        long,
        default_value = "default",
        value_name = "NAME|FILE.wasm",
        requires = "simulate"
    )]
    pub fallback: String,
    /// Anonymise the exported recording, with the salt from SWITCHYARD_ANONYMISE_SALT
    /// (the same salt gives the same hashes) or a random one.
    #[arg(long)]
    pub anonymise: bool,
    /// With --simulate: the bounds the estimated workload is read back within.
    #[command(flatten)]
    pub input_limits: InputLimitArgs,
}

pub(super) fn run(args: ReplayArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let recording = Recording::open(&args.recording)?;
    if let Some(out) = &args.export_recording {
        let salt = match std::env::var("SWITCHYARD_ANONYMISE_SALT") {
            Ok(salt) if !salt.is_empty() => salt,
            _ => random_salt()?,
        };
        let written = export_anonymised(&recording, out, &salt)?;
        eprintln!("wrote {written} anonymised segment(s) to {}", out.display());
        if args.policies.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    if args.simulate || args.export_workload.is_some() {
        counterfactual(&args, &recording, sandbox)?;
        // An export alone may go with a decision replay; a simulation is the report.
        if args.simulate || args.policies.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    if args.policies.is_empty() {
        bail!(
            "name the policies to replay with --policy NAME|FILE.wasm (repeat to compare); \
             the recorded policy's name is in the recording's policy records"
        );
    }
    let runtime = sandbox.offline_runtime()?;
    let specs = super::simulate::plan(&args.policies, &args.sets, |policy| {
        Ok(PolicyRef::parse(policy)?.load(&runtime)?.name().to_string())
    })?;
    let mut policies = Vec::new();
    for spec in specs {
        let module = PolicyRef::parse(&spec.policy)?.load(&runtime)?;
        let slot = PolicySlot::configure(module, &spec.settings)
            .with_context(|| format!("configuring {}", spec.name))?;
        policies.push(ReplayPolicy {
            label: spec.name,
            slot,
        });
    }
    let report = replay(&recording, &policies)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&args.recording, &report, args.show));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--export-workload` and `--simulate`: the recording as a workload, written out or run
/// under the policies beside the recorded run.
fn counterfactual(
    args: &ReplayArgs,
    recording: &Recording,
    sandbox: &SandboxArgs,
) -> anyhow::Result<()> {
    if args.simulate && args.policies.is_empty() {
        bail!(
            "name the policies to run the recorded load under with --policy NAME|FILE.wasm \
             (repeat to compare); the recorded run is the table's first row"
        );
    }
    let estimated = estimate_counterfactual(recording)?;
    let source = args.recording.display().to_string();
    let yaml = estimated
        .to_yaml(&source)
        .context("writing the estimated workload as YAML")?;
    for note in &estimated.notes {
        eprintln!("note: {}", escaped(note));
    }
    list_some(
        "left out (cannot be estimated)",
        estimated
            .left_out
            .iter()
            .map(|(job, why)| format!("{}: {}", escaped(job), escaped(why))),
    );
    list_some(
        "assumed",
        estimated.assumed.iter().flat_map(|(job, what)| {
            what.iter()
                .map(move |w| format!("{}: {}", escaped(job), escaped(w)))
        }),
    );
    let jobs = estimated.workload.jobs.len();
    let label = match &args.export_workload {
        Some(file) => {
            std::fs::write(file, &yaml).with_context(|| format!("writing {}", file.display()))?;
            eprintln!(
                "wrote the recorded load ({jobs} jobs, {} node groups) to {}",
                estimated.workload.cluster.nodes.len(),
                file.display()
            );
            file.clone()
        }
        None => PathBuf::from(format!("{source} (estimated workload)")),
    };
    if !args.simulate {
        return Ok(());
    }
    if jobs == 0 {
        bail!("{source}: no job of the recording could be estimated, so there is nothing to run");
    }
    // Read back from the text written, so a run here and `simulate` of the exported
    // file are the same run.
    let workload = Workload::parse_with(&yaml, &label, args.input_limits.limits())?;
    let seed = args.seed.unwrap_or(workload.seed());
    super::simulate::compare(
        super::simulate::Comparison {
            workload: &workload,
            label: &label,
            policies: args.policies.clone(),
            sets: &args.sets,
            seed,
            out: args.out.as_deref(),
            fallback: &args.fallback,
            pulled: &[],
            baseline: Some(estimated.recorded),
            json: false,
            trace_limit_kib: args.trace_limit_kib,
        },
        sandbox,
    )
}

/// Prints the first few items under `title` on stderr, and how many more there are.
fn list_some(title: &str, items: impl Iterator<Item = String>) {
    const SHOWN: usize = 5;
    let items: Vec<String> = items.collect();
    for item in items.iter().take(SHOWN) {
        eprintln!("{title}: {item}");
    }
    if items.len() > SHOWN {
        eprintln!(
            "{title}: ... {} more (all are listed at the top of --export-workload FILE)",
            items.len() - SHOWN
        );
    }
}

/// A salt nobody can guess, from the system's random source.
fn random_salt() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .context("reading /dev/urandom for a salt (or set SWITCHYARD_ANONYMISE_SALT)")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The report for a person: one line per policy, then where each differs, both sides'
/// reasons side by side.
fn text(path: &std::path::Path, report: &ReplayReport, show: usize) -> String {
    let mut out = String::new();
    let decided: Vec<String> = report
        .recorded_policies
        .iter()
        .map(|(p, n)| format!("{} ({n})", escaped(p)))
        .collect();
    let _ = writeln!(
        out,
        "{}: {} rounds, decided by {}",
        escaped(&path.display().to_string()),
        report.rounds,
        decided.join(", ")
    );
    for p in &report.policies {
        for recorded in &p.recorded_with_other_bytes {
            let _ = writeln!(
                out,
                "note: the recording's `{}` ({} rounds) is version {} {}; the `{}` replayed \
                 is {}, other bytes, so its figures are another build's",
                escaped(&recorded.policy.name),
                recorded.rounds,
                escaped(&recorded.policy.version),
                escaped(&recorded.policy.digest),
                escaped(&p.policy),
                p.digest
            );
        }
    }
    for cut in &report.cut_short {
        let _ = writeln!(
            out,
            "note: {} ends early after {} records: {}",
            escaped(&cut.segment),
            cut.records,
            escaped(&cut.reason)
        );
    }
    let width = report
        .policies
        .iter()
        .map(|p| escaped(&p.policy).chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        out,
        "\n{:<width$}  {:>8}  {:>8}  {:>9}  {:>8}  {:>6}  {:>6}",
        "policy", "compared", "agreed", "agreement", "fallback", "split", "failed"
    );
    for p in &report.policies {
        // No round compared: no agreement to claim.
        let agreement = p
            .agreement_percent
            .map_or_else(|| "-".to_string(), |percent| format!("{percent:.1}%"));
        let _ = writeln!(
            out,
            "{:<width$}  {:>8}  {:>8}  {:>9}  {:>8}  {:>6}  {:>6}",
            escaped(&p.policy),
            p.compared,
            p.agreed,
            agreement,
            p.skipped_fallback,
            p.skipped_split,
            p.failed
        );
    }
    let _ = writeln!(
        out,
        "\ncompared: rounds the recorded policy decided itself; agreed: the same operations \
         (order and reasons aside); fallback, split: rounds not compared (the recorded \
         policy's fallback decided; a split experiment ran)"
    );
    for p in &report.policies {
        differences(&mut out, p, show);
    }
    out
}

fn differences(out: &mut String, p: &Agreement, show: usize) {
    let differing = p.compared - p.agreed;
    if differing == 0 || show == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} differs in {differing} round(s); the first {}:",
        escaped(&p.policy),
        show.min(p.differences.len())
    );
    for d in p.differences.iter().take(show) {
        let _ = writeln!(
            out,
            "  round {} at {:.1} s (recorded: {}){}",
            d.round,
            d.time,
            escaped(&d.recorded_policy),
            d.failure
                .as_ref()
                .map(|f| format!(": {} failed: {}", escaped(&p.policy), escaped(f)))
                .unwrap_or_default()
        );
        for job in &d.jobs {
            let _ = writeln!(out, "    job {}", escaped(&job.job));
            let _ = writeln!(out, "      recorded: {}", actions(&job.recorded));
            let _ = writeln!(out, "      replayed: {}", actions(&job.replayed));
        }
    }
}

/// Actions in a line each: the operation and, after it, the policy's reason.
fn actions(actions: &[Action]) -> String {
    if actions.is_empty() {
        return "(nothing)".into();
    }
    actions
        .iter()
        .map(|a| format!("{} — {}", operation(&a.op), escaped(&a.reason)))
        .collect::<Vec<_>>()
        .join("; ")
}
