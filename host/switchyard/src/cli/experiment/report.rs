//! An experiment's report as text: who decides what, and the shadow or split figures
//! (counts, censoring-aware completion times with intervals, the difference between
//! arms, the imbalance warning). Shared by the offline experiment (`simulate --split`)
//! and `ctl experiment`, which print the same report; it must not run anything.

use switchyard_control::{
    ArmReport, Estimate, ExperimentMode, ExperimentReport, JobAssignment, ShadowReport, SplitReport,
};
use switchyard_core::Operation;

use crate::cli::simulate::{TimeUnit, layout};
use crate::cli::terminal::escaped;

/// Differing shadow rounds the text shows (the JSON has every one kept).
const DIFFERENCES_SHOWN: usize = 5;

/// The figures under the one-line description: the shadow's agreement or the split's
/// table, with what the columns mean.
pub(crate) fn figures(report: &ExperimentReport) -> String {
    let mut blocks = Vec::new();
    if let Some(shadow) = &report.shadow {
        blocks.push(shadow_text(report, shadow));
    }
    if let Some(split) = &report.split {
        blocks.push(split_text(split));
    }
    if blocks.is_empty() {
        blocks.push(format!("rounds: {}", report.rounds));
    }
    blocks.join("\n\n")
}

/// Who decides what, in one line.
pub(crate) fn describe(report: &ExperimentReport) -> String {
    match &report.mode {
        ExperimentMode::Shadow => format!(
            "{} decides, {} decides the same rounds without being applied",
            escaped(&report.policy_a),
            escaped(&report.policy_b)
        ),
        ExperimentMode::Split { jobs, .. } => {
            let rule = match jobs {
                JobAssignment::Hash { ratio_b } => format!("{ratio_b} of the jobs by a hash"),
                JobAssignment::Balanced { ratio_b } => {
                    format!("{ratio_b} of the jobs by a balanced hash")
                }
                JobAssignment::Label { selector } => {
                    format!("jobs labelled {}", escaped(&selector.to_string()))
                }
            };
            format!(
                "arm A {} and arm B {}; B gets {rule}",
                escaped(&report.policy_a),
                escaped(&report.policy_b)
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
        report.rounds,
        shadow.compared,
        shadow.agreed,
        escaped(&report.policy_b),
        report.b_failures
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
pub(crate) fn with_interval(unit: TimeUnit, estimate: &Estimate) -> String {
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
