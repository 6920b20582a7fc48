//! `switchyard replay`: a recording made by `run --record` decided again by other
//! policies (decision replay), or exported with its names anonymised. The work is in
//! `switchyard_control::replay` and `switchyard_control::recording`; this module reads
//! the flags and prints the report.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use switchyard_control::PolicySlot;
use switchyard_control::recording::{Recording, anonymise};
use switchyard_control::replay::{self, Agreement, ReplayPolicy, ReplayReport};
use switchyard_core::model::{Action, Operation};
use switchyard_runtime::registry::PolicyRef;

use super::SandboxArgs;

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
    /// Anonymise the exported recording, with the salt from SWITCHYARD_ANONYMISE_SALT
    /// (the same salt gives the same hashes) or a random one.
    #[arg(long)]
    pub anonymise: bool,
}

pub(super) fn run(args: ReplayArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let recording = Recording::open(&args.recording)?;
    if let Some(out) = &args.export_recording {
        let salt = match std::env::var("SWITCHYARD_ANONYMISE_SALT") {
            Ok(salt) if !salt.is_empty() => salt,
            _ => random_salt()?,
        };
        let written = anonymise::export(&recording, out, &salt)?;
        eprintln!("wrote {written} anonymised segment(s) to {}", out.display());
        if args.policies.is_empty() {
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
    let report = replay::replay(&recording, &policies)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&args.recording, &report, args.show));
    }
    Ok(ExitCode::SUCCESS)
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
        .map(|(p, n)| format!("{p} ({n})"))
        .collect();
    let _ = writeln!(
        out,
        "{}: {} rounds, decided by {}",
        path.display(),
        report.rounds,
        decided.join(", ")
    );
    for cut in &report.cut_short {
        let _ = writeln!(
            out,
            "note: {} ends early after {} records: {}",
            cut.segment, cut.records, cut.reason
        );
    }
    let width = report
        .policies
        .iter()
        .map(|p| p.policy.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        out,
        "\n{:<width$}  {:>8}  {:>8}  {:>9}  {:>8}  {:>6}  {:>6}",
        "policy", "compared", "agreed", "agreement", "fallback", "split", "failed"
    );
    for p in &report.policies {
        let _ = writeln!(
            out,
            "{:<width$}  {:>8}  {:>8}  {:>8.1}%  {:>8}  {:>6}  {:>6}",
            p.policy,
            p.compared,
            p.agreed,
            p.agreement_percent,
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
        p.policy,
        show.min(p.differences.len())
    );
    for d in p.differences.iter().take(show) {
        let _ = writeln!(
            out,
            "  round {} at {:.1} s (recorded: {}){}",
            d.round,
            d.time,
            d.recorded_policy,
            d.failure
                .as_ref()
                .map(|f| format!(": {} failed: {f}", p.policy))
                .unwrap_or_default()
        );
        for job in &d.jobs {
            let _ = writeln!(out, "    job {}", job.job);
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
        .map(|a| format!("{} — {}", operation(&a.op), a.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

fn operation(op: &Operation) -> String {
    match op {
        Operation::Place { assignments, .. } => format!(
            "place {}",
            assignments
                .iter()
                .map(|a| format!("{}→{}", a.task, a.node))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Operation::Migrate { task, node, .. } => {
            format!("migrate {}→{node}", task.as_deref().unwrap_or("all tasks"))
        }
        Operation::SetCpuWeight { task, weight, .. } => {
            format!("set-cpu-weight {task}={weight}")
        }
        Operation::Scale {
            replicas, nodes, ..
        } => format!("scale to {replicas} (+{})", nodes.join(" ")),
        Operation::Wait { .. } => "wait".into(),
        Operation::Preempt { .. } => "preempt".into(),
    }
}
