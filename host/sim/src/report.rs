//! What a simulation run measured: per-job outcomes, the summary the `simulate` table
//! shows, and `results.json`. Plots are drawn by the `switchyard` command from these
//! figures. Nothing here depends on wall time, so the same workload and seed give the
//! same bytes.

use serde::{Deserialize, Serialize};

use crate::simulator::{JobOutcome, Simulator, UtilPoint};
use switchyard_control::{CompletionStats, Observation};
use switchyard_control::{ControlLoop, RunEnd};

/// Most points kept of the utilisation series in results and plots.
pub(crate) const SERIES_POINTS: usize = 500;

/// The figures of one run, as the table shows them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Jobs in the workload.
    pub jobs: usize,
    /// Jobs that finished.
    pub finished: usize,
    /// Mean completion time (finish - submit) of finished jobs, seconds.
    pub avg_completion: f64,
    /// Median completion time.
    pub p50_completion: f64,
    /// 95th percentile completion time.
    pub p95_completion: f64,
    /// Time the last job finished (or the run stopped).
    pub makespan: f64,
    /// Mean wait (start - submit) of started jobs.
    pub avg_wait: f64,
    /// Mean CPU utilisation over the makespan.
    pub cpu_utilisation: f64,
    /// Mean GPU utilisation over the makespan.
    pub gpu_utilisation: f64,
    /// Migrations applied.
    pub migrations: u64,
    /// Re-scales applied.
    pub rescales: u64,
    /// Preemptions applied.
    pub preemptions: u64,
    /// Unfinished jobs holding resources at the end (stranded gangs).
    pub deadlocked: usize,
    /// Unfinished jobs that never got resources.
    pub never_started: usize,
    /// Policy rounds.
    pub rounds: u64,
    /// Rounds where the policy failed and the fallback decided.
    pub policy_failures: u64,
    /// Why the run ended.
    pub ended: RunEnd,
    /// Whether every job finished, and if not, why not.
    pub outcome: RunOutcome,
    /// Completion times with unfinished jobs censored at the run's end: the Kaplan-Meier
    /// median and the restricted mean with their intervals (the restricted mean is
    /// `avg_completion` when every job finished).
    pub completion: CompletionStats,
}

/// How a run came out, as the table's `end` column and the plots' titles say it: a run
/// whose jobs did not all finish has no makespan worth comparing, so it is named as such.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunOutcome {
    /// Every job finished.
    Finished,
    /// Nothing more could happen while some jobs held resources without finishing (a
    /// stranded partial gang).
    Deadlocked,
    /// Nothing more could happen while some jobs waited for resources that never came
    /// (bigger than any node, or held by nobody the policy would move).
    Stuck,
    /// The workload's `simulator.max_time` passed before every job finished.
    TimeLimit,
}

impl RunOutcome {
    /// The outcome of a run with these figures.
    pub fn of(jobs: usize, finished: usize, deadlocked: usize, ended: RunEnd) -> Self {
        match (finished == jobs, ended, deadlocked > 0) {
            (true, _, _) => RunOutcome::Finished,
            (false, RunEnd::TimeLimit, _) => RunOutcome::TimeLimit,
            (false, RunEnd::Idle, true) => RunOutcome::Deadlocked,
            (false, RunEnd::Idle, false) => RunOutcome::Stuck,
        }
    }

    /// A short word for tables and titles.
    pub fn word(self) -> &'static str {
        match self {
            RunOutcome::Finished => "done",
            RunOutcome::Deadlocked => "deadlocked",
            RunOutcome::Stuck => "stuck",
            RunOutcome::TimeLimit => "time limit",
        }
    }
}

/// One policy's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// The run's name: the policy's own name, or the alias given with `--policy
    /// NAME=POLICY`.
    pub policy: String,
    /// The policy as given: a built-in name or a `.wasm` file.
    pub source: String,
    /// Effective settings.
    pub settings: std::collections::BTreeMap<String, String>,
    /// The figures.
    pub summary: Summary,
    /// Every job, in submission order.
    pub jobs: Vec<JobOutcome>,
    /// Utilisation over time, thinned to a bounded number of points.
    pub utilisation: Vec<UtilPoint>,
}

/// What only the run knows, beside its jobs' outcomes.
pub(crate) struct RunFacts {
    /// The run's clock when it stopped (the makespan of a run that left jobs unfinished).
    pub(crate) end: f64,
    /// Rounds decided.
    pub(crate) rounds: u64,
    /// Rounds in which the policy failed.
    pub(crate) policy_failures: u64,
    /// Why it stopped.
    pub(crate) ended: RunEnd,
}

impl Summary {
    /// The figures of a run whose jobs ended as `jobs` say; `shares(makespan)` gives the
    /// mean CPU and GPU shares up to the makespan. A job neither finished nor deadlocked
    /// counts as never started.
    pub(crate) fn of(
        jobs: &[JobOutcome],
        facts: RunFacts,
        shares: impl FnOnce(f64) -> (f64, f64),
    ) -> Self {
        let mut completions: Vec<f64> = jobs
            .iter()
            .filter_map(|j| Some(j.finish_time? - j.submit_time))
            .collect();
        completions.sort_by(f64::total_cmp);
        let waits: Vec<f64> = jobs
            .iter()
            .filter_map(|j| Some(j.start_time? - j.submit_time))
            .collect();
        let last_finish = jobs
            .iter()
            .filter_map(|j| j.finish_time)
            .fold(0.0, f64::max);
        let finished = completions.len();
        let makespan = if finished == jobs.len() {
            last_finish
        } else {
            facts.end.max(last_finish)
        };
        let (cpu, gpu) = shares(makespan);
        let observed: Vec<Observation> = jobs
            .iter()
            .map(|j| Observation::of(j.submit_time, j.finish_time, makespan))
            .collect();
        let unfinished = jobs.iter().filter(|j| j.finish_time.is_none());
        let deadlocked = unfinished.clone().filter(|j| j.deadlocked).count();
        Summary {
            jobs: jobs.len(),
            finished,
            avg_completion: mean(&completions),
            p50_completion: percentile(&completions, 0.50),
            p95_completion: percentile(&completions, 0.95),
            makespan,
            avg_wait: mean(&waits),
            cpu_utilisation: cpu,
            gpu_utilisation: gpu,
            migrations: jobs.iter().map(|j| u64::from(j.migrations)).sum(),
            rescales: jobs.iter().map(|j| u64::from(j.rescales)).sum(),
            preemptions: jobs.iter().map(|j| u64::from(j.preemptions)).sum(),
            deadlocked,
            never_started: unfinished.filter(|j| !j.deadlocked).count(),
            rounds: facts.rounds,
            policy_failures: facts.policy_failures,
            ended: facts.ended,
            outcome: RunOutcome::of(jobs.len(), finished, deadlocked, facts.ended),
            completion: CompletionStats::of(&observed),
        }
    }
}

impl RunResult {
    /// Gathers a finished run.
    pub fn collect(
        policy: String,
        control: &ControlLoop,
        sim: &Simulator,
        ended: RunEnd,
        settings: std::collections::BTreeMap<String, String>,
    ) -> Self {
        let jobs = sim.outcomes();
        let facts = RunFacts {
            end: sim_now(sim),
            rounds: control.rounds(),
            policy_failures: control.failures(),
            ended,
        };
        let summary = Summary::of(&jobs, facts, |makespan| sim.mean_utilisation(makespan));
        Self {
            source: policy.clone(),
            policy,
            settings,
            summary,
            jobs,
            utilisation: downsample(sim.utilisation_series(), SERIES_POINTS),
        }
    }
}

fn sim_now(sim: &Simulator) -> f64 {
    use switchyard_control::Cluster;
    sim.now()
}

/// `results.json`: the workload, the seed and every run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Results {
    /// The workload file as given.
    pub workload: String,
    /// The seed used.
    pub seed: u64,
    /// One entry per policy, in command-line order.
    pub runs: Vec<RunResult>,
}

/// Mean of `values` (0 when empty).
pub(crate) fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Nearest-rank percentile `q` in [0, 1] of sorted `values` (0 when empty).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// At most `n` points of `series`, evenly picked, always keeping the last.
pub(crate) fn downsample(series: &[UtilPoint], n: usize) -> Vec<UtilPoint> {
    if series.len() <= n || n < 2 {
        return series.to_vec();
    }
    let step = (series.len() - 1) as f64 / (n - 1) as f64;
    (0..n)
        .map(|i| series[((i as f64 * step).round() as usize).min(series.len() - 1)])
        .collect()
}
