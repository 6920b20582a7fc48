//! A sweep: workloads × runs (a policy with one setting of its parameters) × seeds, each
//! combination a *cell* made by one [`crate::run_offline`], and the figures over seeds.
//!
//! It owns the plan (which cells, in which order, and their numbering, so a cell run on
//! another machine by its index is the same cell), one cell's run, and the summary of
//! many cells: per workload and run, the mean of each figure over seeds with its
//! Student-t interval, and the change against a baseline run paired by seed
//! ([`switchyard_control::mean_interval`]). Running cells in parallel, progress and printing are
//! the caller's; it keeps nothing between calls.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::offline::{Records, run_offline};
use crate::report::Summary;
use crate::workload::{InputLimits, Workload};
use switchyard_control::PolicySlot;
use switchyard_control::{Estimate, mean_interval};
use switchyard_runtime::Runtime;

/// One policy with one setting of its parameters: a row of the sweep's table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepRun {
    /// Its name in the table: the policy's name, with the swept parameters' values.
    pub name: String,
    /// The policy: a built-in name or a `.wasm` file.
    pub policy: String,
    /// Its parameters.
    pub settings: BTreeMap<String, String>,
}

/// What a sweep runs: every workload under every run on every seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPlan {
    /// Workload files, as given.
    pub workloads: Vec<String>,
    /// The runs, in command-line order.
    pub runs: Vec<SweepRun>,
    /// The seeds.
    pub seeds: Vec<u64>,
    /// The run the others are compared with, by name.
    pub baseline: String,
    /// The policy that decides a round when a run's policy fails.
    pub fallback: String,
    /// The bounds every cell reads its workload within (the defaults in a plan written
    /// without them).
    #[serde(default)]
    pub limits: InputLimits,
}

/// One cell: a workload, a run and a seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepCell {
    /// Its number: the position in [`SweepPlan::cells`] (a Kubernetes Job's completion index).
    pub index: usize,
    /// The workload file.
    pub workload: String,
    /// The run's name.
    pub run: String,
    /// The seed.
    pub seed: u64,
}

impl SweepPlan {
    /// Every cell, numbered: workload by workload, run by run, seed by seed.
    pub fn cells(&self) -> Vec<SweepCell> {
        let mut cells = Vec::new();
        for workload in &self.workloads {
            for run in &self.runs {
                for &seed in &self.seeds {
                    cells.push(SweepCell {
                        index: cells.len(),
                        workload: workload.clone(),
                        run: run.name.clone(),
                        seed,
                    });
                }
            }
        }
        cells
    }

    /// The run named `name`.
    pub fn run(&self, name: &str) -> Option<&SweepRun> {
        self.runs.iter().find(|r| r.name == name)
    }
}

/// What became of a cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum CellOutcome {
    /// The run was made (whether or not its jobs all finished: the summary says).
    Done {
        /// Its figures, as `simulate` reports them.
        summary: Box<Summary>,
    },
    /// The run could not be made.
    Failed {
        /// Why, as a sentence.
        error: String,
    },
}

/// A cell and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// The cell.
    #[serde(flatten)]
    pub cell: SweepCell,
    /// Its outcome.
    #[serde(flatten)]
    pub outcome: CellOutcome,
    /// Wall-clock seconds the cell took on its machine (loading the workload, the run).
    pub seconds: f64,
}

/// Runs one cell: loads its workload, builds the scenario for its seed and runs it, as
/// `simulate --seed SEED --policy POLICY` does. A failure is the cell's outcome, not an
/// error: the other cells go on.
pub fn run_cell(
    runtime: &Runtime,
    plan: &SweepPlan,
    fallback: &PolicySlot,
    cell: &SweepCell,
) -> CellResult {
    let started = Instant::now();
    let outcome = match try_cell(runtime, plan, fallback, cell) {
        Ok(summary) => CellOutcome::Done {
            summary: Box::new(summary),
        },
        Err(error) => CellOutcome::Failed { error },
    };
    CellResult {
        cell: cell.clone(),
        outcome,
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn try_cell(
    runtime: &Runtime,
    plan: &SweepPlan,
    fallback: &PolicySlot,
    cell: &SweepCell,
) -> Result<Summary, String> {
    let run = plan.run(&cell.run).ok_or_else(|| {
        format!(
            "cell {}: no run named `{}` in the plan",
            cell.index, cell.run
        )
    })?;
    let workload =
        Workload::load_with(cell.workload.as_ref(), plan.limits).map_err(|e| e.to_string())?;
    let scenario = workload.scenario(cell.seed).map_err(|e| e.to_string())?;
    // A fallback instance of the cell's own: a kept instance shared with other cells
    // would make a cell's result depend on which cells ran before it.
    let fallback = PolicySlot::new(Arc::clone(&fallback.module), fallback.settings.clone());
    let made = run_offline(
        runtime,
        &run.policy,
        &run.settings,
        &fallback,
        scenario,
        cell.seed,
        Records::Stream,
        |_, _| {},
    )
    .map_err(|e| e.to_string())?;
    Ok(made.result.summary)
}

/// One workload's run over its seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The workload file.
    pub workload: String,
    /// The run's name.
    pub run: String,
    /// Seeds whose cell ran.
    pub done: usize,
    /// Seeds whose cell failed.
    pub failed: usize,
    /// Of the cells that ran, those in which every job finished.
    pub all_finished: usize,
    /// Mean completion time per cell, over the seeds whose cell finished every job,
    /// seconds.
    pub mean_completion: Option<Estimate>,
    /// Makespan over the seeds whose cell finished every job, seconds.
    pub makespan: Option<Estimate>,
    /// Mean wait over seeds, seconds.
    pub avg_wait: Option<Estimate>,
    /// Against the baseline run on the same seeds; `None` for the baseline itself.
    pub against_baseline: Option<PairedChange>,
}

/// A run's change against the baseline, seed by seed, in per cent of the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedChange {
    /// Seeds on which both cells ran.
    pub seeds: usize,
    /// Change of the mean completion time, per cent.
    pub mean_completion: Option<Estimate>,
    /// Change of the makespan, per cent.
    pub makespan: Option<Estimate>,
}

/// A cell's mean completion time, when every job finished. A run that left jobs
/// unfinished has no mean to compare: its restricted mean stops at its own end (a
/// deadlock at 12 s would read as the fastest run), so it counts in `all_finished` only.
fn mean_completion(s: &Summary) -> Option<f64> {
    (s.finished == s.jobs).then_some(s.avg_completion)
}

/// A cell's makespan, when every job finished (as the `simulate` table shows it).
fn makespan(s: &Summary) -> Option<f64> {
    (s.finished == s.jobs).then_some(s.makespan)
}

/// Differences between two times below this share of the baseline count as none: two
/// runs that end at the same instant can differ in the last bits of a sum taken in
/// another order, and a change made of rounding alone, the same sign on every seed,
/// would read as significant.
const SAME_TIME: f64 = 1e-12;

/// `this` against `base`, in per cent of `base`; 0 when they differ by rounding only.
fn relative_change(base: f64, this: f64) -> f64 {
    if (this - base).abs() <= SAME_TIME * base {
        0.0
    } else {
        (this - base) / base * 100.0
    }
}

/// Per workload and run, the figures over seeds and the change against
/// `plan.baseline`, from `cells` (in any order; a cell missing from them counts as
/// neither done nor failed).
pub fn sweep_rows(plan: &SweepPlan, cells: &[CellResult]) -> Vec<SweepRow> {
    let summary_of = |workload: &str, run: &str, seed: u64| {
        cells
            .iter()
            .find(|c| c.cell.workload == workload && c.cell.run == run && c.cell.seed == seed)
            .and_then(|c| match &c.outcome {
                CellOutcome::Done { summary } => Some(summary.as_ref()),
                CellOutcome::Failed { .. } => None,
            })
    };
    let mut rows = Vec::new();
    for workload in &plan.workloads {
        for run in &plan.runs {
            let mine: Vec<&CellResult> = cells
                .iter()
                .filter(|c| &c.cell.workload == workload && c.cell.run == run.name)
                .collect();
            let summaries: Vec<&Summary> = mine
                .iter()
                .filter_map(|c| match &c.outcome {
                    CellOutcome::Done { summary } => Some(summary.as_ref()),
                    CellOutcome::Failed { .. } => None,
                })
                .collect();
            let over = |f: &dyn Fn(&Summary) -> Option<f64>| {
                let values: Vec<f64> = summaries.iter().filter_map(|s| f(s)).collect();
                mean_interval(&values)
            };
            let against_baseline = (run.name != plan.baseline).then(|| {
                let pairs: Vec<(&Summary, &Summary)> = plan
                    .seeds
                    .iter()
                    .filter_map(|&seed| {
                        Some((
                            summary_of(workload, &plan.baseline, seed)?,
                            summary_of(workload, &run.name, seed)?,
                        ))
                    })
                    .collect();
                let change = |f: &dyn Fn(&Summary) -> Option<f64>| {
                    let changes: Vec<f64> = pairs
                        .iter()
                        .filter_map(|(base, this)| {
                            let (base, this) = (f(base)?, f(this)?);
                            (base > 0.0).then(|| relative_change(base, this))
                        })
                        .collect();
                    mean_interval(&changes)
                };
                PairedChange {
                    seeds: pairs.len(),
                    mean_completion: change(&mean_completion),
                    makespan: change(&makespan),
                }
            });
            rows.push(SweepRow {
                workload: workload.clone(),
                run: run.name.clone(),
                done: summaries.len(),
                failed: mine.len() - summaries.len(),
                all_finished: summaries.iter().filter(|s| s.finished == s.jobs).count(),
                mean_completion: over(&mean_completion),
                makespan: over(&makespan),
                avg_wait: over(&|s| (s.jobs > s.never_started).then_some(s.avg_wait)),
                against_baseline,
            });
        }
    }
    rows
}

/// `results.json` of a sweep: the plan, every cell, and the rows of its table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResults {
    /// What was run.
    pub plan: SweepPlan,
    /// Every cell, by index.
    pub cells: Vec<CellResult>,
    /// The table.
    pub rows: Vec<SweepRow>,
}

impl SweepResults {
    /// The results of `cells` (sorted here by index).
    pub fn of(plan: SweepPlan, mut cells: Vec<CellResult>) -> Self {
        cells.sort_by_key(|c| c.cell.index);
        let rows = sweep_rows(&plan, &cells);
        Self { plan, cells, rows }
    }
}

/// One cell's result file, as a cell run alone writes it (`cells/cell-NNNNN.json`): the
/// plan travels with it, so the files alone rebuild the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellFile {
    /// The sweep's plan.
    pub plan: SweepPlan,
    /// The cell's result.
    pub result: CellResult,
}

impl CellFile {
    /// The file name of cell `index` inside the results' `cells/` directory.
    pub fn name(index: usize) -> String {
        format!("cell-{index:05}.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_control::{CompletionStats, RunEnd};

    fn plan() -> SweepPlan {
        let run = |name: &str| SweepRun {
            name: name.into(),
            policy: name.into(),
            settings: BTreeMap::new(),
        };
        SweepPlan {
            workloads: vec!["w.yaml".into()],
            runs: vec![run("even"), run("specon")],
            seeds: vec![1, 2, 3],
            baseline: "even".into(),
            fallback: "default".into(),
            limits: InputLimits::default(),
        }
    }

    fn done(cell: &SweepCell, completion: f64, makespan: f64) -> CellResult {
        let observed = [switchyard_control::Observation {
            duration: completion,
            finished: true,
        }];
        CellResult {
            cell: cell.clone(),
            outcome: CellOutcome::Done {
                summary: Box::new(Summary {
                    jobs: 1,
                    finished: 1,
                    avg_completion: completion,
                    p50_completion: completion,
                    p95_completion: completion,
                    makespan,
                    avg_wait: 0.0,
                    cpu_utilisation: 0.5,
                    gpu_utilisation: 0.0,
                    migrations: 0,
                    rescales: 0,
                    preemptions: 0,
                    deadlocked: 0,
                    never_started: 0,
                    rounds: 1,
                    policy_failures: 0,
                    ended: RunEnd::Idle,
                    outcome: crate::report::RunOutcome::Finished,
                    completion: CompletionStats::of(&observed),
                }),
            },
            seconds: 0.0,
        }
    }

    #[test]
    fn cells_are_numbered_workload_then_run_then_seed() {
        let cells = plan().cells();
        assert_eq!(cells.len(), 6);
        assert_eq!(
            (cells[4].run.as_str(), cells[4].seed, cells[4].index),
            ("specon", 2, 4)
        );
    }

    /// even: 100, 200, 300 s; specon 90, 180, 270 s (-10 % on every seed, so the
    /// paired interval is exactly -10 % wide 0), and its third seed failed in a second
    /// variant below.
    #[test]
    fn rows_pair_each_run_with_the_baseline_seed_by_seed_and_count_failures() {
        let plan = plan();
        let cells = plan.cells();
        let mut results: Vec<CellResult> = [100.0, 200.0, 300.0, 90.0, 180.0, 270.0]
            .iter()
            .zip(&cells)
            .map(|(t, c)| done(c, *t, 2.0 * t))
            .collect();
        let rows = sweep_rows(&plan, &results);
        let specon = &rows[1];
        assert_eq!(specon.done, 3);
        let change = specon.against_baseline.as_ref().unwrap();
        assert_eq!(change.seeds, 3);
        let jct = change.mean_completion.unwrap();
        assert!(
            (jct.value + 10.0).abs() < 1e-9 && jct.excludes_zero(),
            "{jct:?}"
        );
        assert!((specon.mean_completion.unwrap().value - 180.0).abs() < 1e-9);
        assert!(rows[0].against_baseline.is_none());

        results[5].outcome = CellOutcome::Failed {
            error: "configuring specon: bad alpha".into(),
        };
        let rows = super::sweep_rows(&plan, &results);
        assert_eq!((rows[1].done, rows[1].failed), (2, 1));
        assert_eq!(rows[1].against_baseline.as_ref().unwrap().seeds, 2);
    }

    /// specon's makespans are even's but for the last bits (a sum taken in another
    /// order), on every seed: the same sign each time, which a t interval would call
    /// significant; its mean completion times are 10 % shorter.
    #[test]
    fn makespans_that_differ_by_rounding_alone_are_no_change() {
        let plan = plan();
        let cells = plan.cells();
        let results: Vec<CellResult> = [100.0, 200.0, 300.0]
            .iter()
            .map(|t| (*t, 2.0 * t))
            .chain(
                [100.0, 200.0, 300.0]
                    .iter()
                    .map(|t| (0.9 * t, 2.0 * t * (1.0 - 2.0 * f64::EPSILON))),
            )
            .zip(&cells)
            .map(|((completion, makespan), c)| done(c, completion, makespan))
            .collect();
        let change = sweep_rows(&plan, &results)[1]
            .against_baseline
            .clone()
            .unwrap();
        let makespan = change.makespan.unwrap();
        assert_eq!(
            (makespan.value, makespan.low, makespan.high),
            (0.0, Some(0.0), Some(0.0))
        );
        assert!(!makespan.excludes_zero());
        assert!(change.mean_completion.unwrap().excludes_zero());
    }

    #[test]
    fn a_cell_file_reads_back_as_written() {
        let plan = plan();
        let file = CellFile {
            result: done(&plan.cells()[2], 123.5, 400.0),
            plan,
        };
        let text = serde_json::to_string(&file).unwrap();
        assert_eq!(serde_json::from_str::<CellFile>(&text).unwrap(), file);
    }
}
