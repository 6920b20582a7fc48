//! `switchyard simulate --shadow B` / `--split A:B:RATIO`: one offline run of the
//! workload with an A/B experiment in the control loop, and its report (the same figures
//! `GET /v1/experiment` gives on a live controller) as tables, or as JSON with `--json`.
//! `experiment.json` is written before anything is printed, so a reader that stops
//! early (`| head`) does not cost the file.

use std::path::Path;
use std::process::ExitCode;

mod report;

pub(super) use report::{describe, figures, with_interval};

use anyhow::{Context as _, bail};
use switchyard_control::{ControlLoop, Experiment, ExperimentMode, JobAssignment, PolicySlot};
use switchyard_runtime::{PolicyRef, Runtime};
use switchyard_sim::{InputLimits, Simulator, Workload};

use super::SandboxArgs;

/// What `simulate --shadow` or `--split` asked for, read from its flags by `simulate`.
pub(super) struct ExperimentArgs<'a> {
    /// The workload file.
    pub workload: &'a Path,
    /// The bounds the workload is read within.
    pub input_limits: InputLimits,
    /// Seed (overrides the workload's).
    pub seed: Option<u64>,
    /// Policy that decides a round when the tested one fails.
    pub fallback: &'a str,
    /// Directory for `experiment.json`.
    pub out: Option<&'a Path>,
    /// The policy the first `--policy` loads, arm A of a shadow experiment.
    pub first_policy: Option<&'a str>,
    /// `--shadow B`.
    pub shadow: Option<&'a str>,
    /// `--split A:B:RATIO`.
    pub split: Option<&'a str>,
    /// `--split-assign`: how the split assigns jobs.
    pub split_assign: &'a str,
    /// `--json`: the report as JSON instead of tables.
    pub json: bool,
}

fn slot(runtime: &Runtime, name: &str) -> anyhow::Result<PolicySlot> {
    let module = PolicyRef::parse(name)?.load(runtime)?;
    PolicySlot::configure(module, &Default::default())
        .with_context(|| format!("configuring {name}"))
}

pub(super) fn run(args: &ExperimentArgs<'_>, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let (a, b, mode) = match (args.shadow, args.split) {
        (Some(b), _) => (
            args.first_policy.unwrap_or("default").to_string(),
            b.to_string(),
            ExperimentMode::Shadow,
        ),
        (None, Some(split)) => {
            let parts: Vec<&str> = split.rsplitn(3, ':').collect();
            let [ratio, b, a] = parts[..] else {
                bail!("--split {split}: expected A:B:RATIO, e.g. default:even:0.5");
            };
            let ratio: f64 = ratio
                .parse()
                .with_context(|| format!("--split {split}: RATIO `{ratio}` is not a number"))?;
            let jobs = JobAssignment::by_name(args.split_assign, ratio)
                .with_context(|| format!("--split {split} --split-assign {}", args.split_assign))?;
            (
                a.to_string(),
                b.to_string(),
                ExperimentMode::Split {
                    jobs,
                    nodes_b: None,
                },
            )
        }
        (None, None) => unreachable!("called only for an experiment"),
    };
    let workload = Workload::load_with(args.workload, args.input_limits)?;
    let seed = args.seed.unwrap_or(workload.seed());
    let runtime = sandbox.offline_runtime()?;
    let fallback = slot(&runtime, args.fallback)?;
    let mut sim = Simulator::new(workload.scenario(seed)?);
    let mut control = ControlLoop::new(slot(&runtime, &a)?, fallback, seed)
        .with_disruption_budget(sandbox.disruption.budget()?)
        .keep_records(false);
    control.start_experiment(Experiment::new(slot(&runtime, &b)?, mode));
    let ended = control.run(&mut sim, |_, _| {});
    let report = control
        .experiment_report()
        .context("the experiment report is missing")?;
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "workload": args.workload.display().to_string(),
        "seed": seed,
        "ended": ended,
        "rounds": control.rounds(),
        "experiment": report,
    }))?;
    let written = match args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let file = dir.join("experiment.json");
            std::fs::write(&file, &json).with_context(|| format!("writing {}", file.display()))?;
            Some(file)
        }
        None => None,
    };
    if args.json {
        println!("{json}");
    } else {
        println!(
            "{} of {}, seed {seed}: {}",
            match report.mode {
                ExperimentMode::Shadow => "shadow",
                ExperimentMode::Split { .. } => "split",
            },
            args.workload.display(),
            describe(&report)
        );
        println!("\n{}", figures(&report));
    }
    if let Some(file) = written {
        eprintln!("wrote {}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}
