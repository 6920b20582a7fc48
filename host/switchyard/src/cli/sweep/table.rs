//! The table `sweep` prints: per workload, a row per run with the means over seeds and
//! their intervals, and the change against the baseline paired by seed, marked `*` when
//! its interval excludes zero; then the failed cells and a legend.

use switchyard_control::Estimate;
use switchyard_sim::{CellOutcome as Outcome, SweepResults, SweepRow as Row};

use crate::cli::experiment::with_interval;
use crate::cli::simulate::{TimeUnit, layout};

/// What the columns mean.
const LEGEND: &str = "\
mean JCT: each run's mean job completion time (finish - submit), averaged over the seeds
  whose run finished every job; makespan likewise; avg wait over every seed. A run that
  left jobs unfinished counts in `all done` only (its times stop at its own end).
[low, high]: 95 % confidence interval of the mean over seeds (Student t); `..`: one seed.
vs BASELINE: change against the baseline on the same seed, averaged over seeds, with its
  interval; `*`: the interval excludes 0 (significant at 5 %), `~`: it does not.
cells: seeds that ran (and failed); all done: of those, runs in which every job finished.";

/// A change in per cent with its interval and significance mark.
fn change(estimate: Option<&Estimate>) -> String {
    let Some(e) = estimate else {
        return "n/a".into();
    };
    // A change too small for one decimal keeps three, so `*` never stands beside -0.0.
    let decimals = if e.value.abs().max(e.low.unwrap_or(0.0).abs()) < 0.05 {
        3
    } else {
        1
    };
    let bound = |b: Option<f64>| b.map_or("..".into(), |b| format!("{b:+.decimals$}"));
    format!(
        "{:+.decimals$} % [{}, {}] {}",
        e.value,
        bound(e.low),
        bound(e.high),
        if e.excludes_zero() { "*" } else { "~" }
    )
}

/// Seeds as the command line writes them: runs of consecutive seeds as `FROM..TO`.
pub(super) fn seeds_text(seeds: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seeds.len() {
        let mut j = i;
        while j + 1 < seeds.len() && seeds[j + 1] == seeds[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}..{}", seeds[i], seeds[j])
        } else {
            (i..=j)
                .map(|k| seeds[k].to_string())
                .collect::<Vec<_>>()
                .join(",")
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The whole text: a table per workload, the failed cells, the legend.
pub(super) fn text(results: &SweepResults) -> String {
    let plan = &results.plan;
    let base = &plan.baseline;
    let mut out = Vec::new();
    for workload in &plan.workloads {
        let rows: Vec<&Row> = results
            .rows
            .iter()
            .filter(|r| &r.workload == workload)
            .collect();
        let largest = rows
            .iter()
            .flat_map(|r| [r.mean_completion, r.makespan, r.avg_wait])
            .flatten()
            .map(|e| e.high.unwrap_or(e.value))
            .fold(0.0, f64::max);
        let unit = TimeUnit::for_largest(largest);
        let u = unit.symbol();
        let header: Vec<String> = vec![
            "run".into(),
            "cells".into(),
            "all done".into(),
            format!("mean JCT [{u}]"),
            format!("makespan [{u}]"),
            format!("avg wait [{u}]"),
            format!("mean JCT vs {base}"),
            format!("makespan vs {base}"),
        ];
        let time = |e: Option<Estimate>| e.map_or("n/a".into(), |e| with_interval(unit, &e));
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let (jct, makespan) = match &r.against_baseline {
                    None => ("baseline".to_string(), "baseline".to_string()),
                    Some(p) => (
                        change(p.mean_completion.as_ref()),
                        change(p.makespan.as_ref()),
                    ),
                };
                vec![
                    r.run.clone(),
                    if r.failed > 0 {
                        format!("{} ({} failed)", r.done, r.failed)
                    } else {
                        r.done.to_string()
                    },
                    r.all_finished.to_string(),
                    time(r.mean_completion),
                    time(r.makespan),
                    time(r.avg_wait),
                    jct,
                    makespan,
                ]
            })
            .collect();
        out.push(format!(
            "{workload}: seeds {} ({}), mean over seeds [95 % CI]\n{}",
            seeds_text(&plan.seeds),
            plan.seeds.len(),
            layout(&header, &body)
        ));
    }
    let failures: Vec<String> = results
        .cells
        .iter()
        .filter_map(|c| match &c.outcome {
            Outcome::Failed { error } => Some(format!(
                "  cell {}: {} on {}, seed {}: {error}",
                c.cell.index, c.cell.run, c.cell.workload, c.cell.seed
            )),
            Outcome::Done { .. } => None,
        })
        .collect();
    if !failures.is_empty() {
        out.push(format!("failed cells:\n{}", failures.join("\n")));
    }
    out.push(LEGEND.replace("BASELINE", base));
    out.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_seeds_read_as_ranges() {
        assert_eq!(seeds_text(&[1, 2, 3, 4, 7, 9, 10]), "1..4,7,9,10");
        assert_eq!(seeds_text(&[5]), "5");
    }
}
