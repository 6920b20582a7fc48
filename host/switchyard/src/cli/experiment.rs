//! `switchyard simulate --shadow B` / `--split A:B:RATIO`: one offline run of the
//! workload with an A/B experiment in the control loop, and its report (the same figures
//! `GET /v1/experiment` gives on a live controller) as tables, or as JSON with `--json`.
//! `experiment.json` is written before anything is printed, so a reader that stops
//! early (`| head`) does not cost the file.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use switchyard_control::{
    ArmReport, ControlLoop, Estimate, Experiment, ExperimentMode, ExperimentReport, JobAssignment,
    PolicySlot, ShadowReport, SplitReport,
};
use switchyard_core::Operation;
use switchyard_runtime::{PolicyRef, Runtime};
use switchyard_sim::{Simulator, Workload};

use super::SandboxArgs;
use super::simulate::{SimulateArgs, TimeUnit, layout};

/// Differing shadow rounds the text shows (the JSON has every one kept).
const DIFFERENCES_SHOWN: usize = 5;

fn slot(runtime: &Runtime, name: &str) -> anyhow::Result<PolicySlot> {
    let module = PolicyRef::parse(name)?.load(runtime)?;
    PolicySlot::configure(module, &Default::default())
        .with_context(|| format!("configuring {name}"))
}

pub(super) fn run(args: &SimulateArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let (a, b, mode) = match (&args.shadow, &args.split) {
        (Some(b), _) => {
            let a = match args.policies.first() {
                Some(first) => super::simulate::policy_of(first)?.to_string(),
                None => "default".into(),
            };
            (a, b.clone(), ExperimentMode::Shadow)
        }
        (None, Some(split)) => {
            let parts: Vec<&str> = split.rsplitn(3, ':').collect();
            let [ratio, b, a] = parts[..] else {
                bail!("--split {split}: expected A:B:RATIO, e.g. default:even:0.5");
            };
            let ratio: f64 = ratio
                .parse()
                .with_context(|| format!("--split {split}: RATIO `{ratio}` is not a number"))?;
            let jobs = JobAssignment::by_name(&args.split_assign, ratio)
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
    let workload = Workload::load(&args.workload)?;
    let seed = args.seed.unwrap_or(workload.seed());
    let runtime = sandbox.offline_runtime()?;
    let fallback = slot(&runtime, &args.fallback)?;
    let mut sim = Simulator::new(workload.scenario(seed)?);
    let mut control = ControlLoop::new(slot(&runtime, &a)?, fallback, seed).keep_records(false);
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
    let written = match &args.out {
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
        if let Some(shadow) = &report.shadow {
            println!("\n{}", shadow_text(&report, shadow));
        }
        if let Some(split) = &report.split {
            println!("\n{}", split_text(split));
        }
    }
    if let Some(file) = written {
        eprintln!("wrote {}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Who decides what, in one line.
fn describe(report: &ExperimentReport) -> String {
    match &report.mode {
        ExperimentMode::Shadow => format!(
            "{} decides, {} decides the same rounds without being applied",
            report.policy_a, report.policy_b
        ),
        ExperimentMode::Split { jobs, .. } => {
            let rule = match jobs {
                JobAssignment::Hash { ratio_b } => format!("{ratio_b} of the jobs by a hash"),
                JobAssignment::Balanced { ratio_b } => {
                    format!("{ratio_b} of the jobs by a balanced hash")
                }
                JobAssignment::Label { selector } => format!("jobs labelled {selector}"),
            };
            format!(
                "arm A {} and arm B {}; B gets {rule}",
                report.policy_a, report.policy_b
            )
        }
    }
}

fn shadow_text(report: &ExperimentReport, shadow: &ShadowReport) -> String {
    let rate = shadow
        .agreement_rate
        .map_or("n/a".into(), |r| format!("{:.1} %", r * 100.0));
    let mut text = format!(
        "rounds: {}; both decided: {}; same operations: {} ({rate}); {} failed in {} rounds",
        report.rounds, shadow.compared, shadow.agreed, report.policy_b, report.b_failures
    );
    if shadow.differing.is_empty() {
        return text;
    }
    let shown = &shadow.differing[shadow.differing.len().saturating_sub(DIFFERENCES_SHOWN)..];
    let unit = TimeUnit::for_largest(shown.iter().map(|d| d.time).fold(0.0, f64::max));
    let header = [
        "round".to_string(),
        format!("time [{}]", unit.symbol()),
        format!("{} asked", report.policy_a),
        format!("{} asked", report.policy_b),
    ];
    let rows: Vec<Vec<String>> = shown
        .iter()
        .map(|d| {
            vec![
                d.round.to_string(),
                unit.format(d.time),
                operations(&d.a),
                operations(&d.b),
            ]
        })
        .collect();
    text.push_str(&format!(
        "\n\nthe last {} of the rounds in which they differed (--json lists the last {}):\n{}",
        shown.len(),
        shadow.differing.len(),
        layout(&header, &rows)
    ));
    text
}

/// Operations by name and job: `place resnet-1, migrate vae-2`; nothing is `-`.
fn operations(ops: &[Operation]) -> String {
    const MOST: usize = 4;
    if ops.is_empty() {
        return "-".into();
    }
    let mut text: Vec<String> = ops
        .iter()
        .take(MOST)
        .map(|op| format!("{} {}", op.name(), op.job()))
        .collect();
    if ops.len() > MOST {
        text.push(format!("{} more", ops.len() - MOST));
    }
    text.join(", ")
}

/// An estimate with its interval: `312 [250, 400]`, an open end as `..`.
pub(super) fn with_interval(unit: TimeUnit, estimate: &Estimate) -> String {
    let bound = |b: Option<f64>| b.map_or("..".into(), |b| unit.format(b));
    format!(
        "{} [{}, {}]",
        unit.format(estimate.value),
        bound(estimate.low),
        bound(estimate.high)
    )
}

fn split_text(split: &SplitReport) -> String {
    let largest = split
        .arms
        .iter()
        .flat_map(|a| {
            let c = &a.completion;
            [
                c.restricted_mean.and_then(|m| m.high),
                c.median.and_then(|m| m.high.or(Some(m.value))),
                a.avg_wait,
            ]
        })
        .flatten()
        .fold(0.0, f64::max);
    let unit = TimeUnit::for_largest(largest);
    let u = unit.symbol();
    let header: Vec<String> = [
        "arm".to_string(),
        "policy".into(),
        "jobs".into(),
        "done".into(),
        "unfinished".into(),
        format!("median JCT [{u}] (95 % CI)"),
        format!("restricted mean JCT [{u}] (95 % CI)"),
        format!("avg wait [{u}]"),
        "CPU".into(),
        "GPU".into(),
        "failed".into(),
    ]
    .into();
    let rows: Vec<Vec<String>> = split.arms.iter().map(|arm| arm_row(unit, arm)).collect();
    let mut text = layout(&header, &rows);
    if let Some(d) = &split.difference {
        text.push_str(&format!(
            "\n\nB - A, restricted mean up to {} {u}: {} {u} ({})",
            unit.format(d.horizon),
            with_interval(unit, &d.b_minus_a),
            if d.significant {
                "significant at 5 %: the interval excludes 0"
            } else {
                "not significant at 5 %: the interval includes 0"
            }
        ));
    }
    if let Some(balance) = &split.imbalance {
        text.push_str(&format!(
            "\narms: {} of {} jobs went to B where the ratio expects {:.1} (binomial p = {:.3}){}",
            balance.jobs_b,
            balance.jobs,
            balance.expected_b,
            balance.p_value,
            if balance.unbalanced {
                "\nwarning: the arms differ in size beyond chance; --split-assign balanced holds them to the ratio"
            } else {
                ""
            }
        ));
    }
    text.push_str(
        "\n\nmedian: Kaplan-Meier, counting unfinished jobs at their age; restricted mean: mean \
         completion time with each job's time capped at the horizon both arms were observed to; \
         intervals: Greenwood (docs/statistics.md). CPU, GPU: share of the arm's nodes \
         requested by its running tasks; failed: accepted actions the cluster did not carry out.",
    );
    text
}

fn arm_row(unit: TimeUnit, arm: &ArmReport) -> Vec<String> {
    let c = &arm.completion;
    let share = |s: Option<f64>| s.map_or("n/a".into(), |s| format!("{:.0} %", s * 100.0));
    vec![
        format!("{:?}", arm.arm),
        arm.policy.clone(),
        c.jobs.to_string(),
        c.finished.to_string(),
        c.unfinished.to_string(),
        c.median
            .map_or("not reached".into(), |m| with_interval(unit, &m)),
        c.restricted_mean
            .map_or("n/a".into(), |m| with_interval(unit, &m)),
        arm.avg_wait.map_or("n/a".into(), |w| unit.format(w)),
        share(arm.cpu_allocated),
        share(arm.gpu_allocated),
        arm.failed_actions.to_string(),
    ]
}
