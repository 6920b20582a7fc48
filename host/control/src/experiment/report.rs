//! What an experiment measured: the report and the figures computed from the tallies the
//! running experiment keeps (each job's arm and times, each arm's allocation over time
//! and failed actions). It owns the arithmetic of the figures (the censoring-aware
//! statistics come from `crate::stats`); it must not observe snapshots or call policies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::assignment::{Arm, ExperimentMode};
use crate::outcome::FailureReason;
use crate::stats::{self, CompletionStats, Observation};
use switchyard_core::Operation;

/// One job of a split as the running experiment tallies it: its arm once assigned and
/// the cluster times of its submission, start and finish.
#[derive(Clone, Debug, Default)]
pub(super) struct JobTrack {
    pub(super) arm: Option<Arm>,
    pub(super) submit: f64,
    pub(super) start: Option<f64>,
    pub(super) finish: Option<f64>,
}

/// A split's tallies so far, borrowed from the running experiment to compute its
/// [`SplitReport`].
pub(super) struct SplitTallies<'a> {
    /// Arm A's and arm B's policies.
    pub(super) policies: [&'a str; 2],
    /// Every job seen, by id.
    pub(super) jobs: &'a BTreeMap<String, JobTrack>,
    /// Jobs assigned so far to A and to B.
    pub(super) assigned: [u64; 2],
    /// The share of jobs meant for B, when the rule has one.
    pub(super) ratio_b: Option<f64>,
    /// Cluster time of the experiment's first round.
    pub(super) started_at: Option<f64>,
    /// Cluster time of its latest round.
    pub(super) last_time: Option<f64>,
    /// Per arm: integral over time of (cpu millis, gpus) requested by its placed tasks.
    pub(super) area: [(f64, f64); 2],
    /// Per arm: capacity of its nodes (cpu millis, gpus).
    pub(super) capacity: [(f64, f64); 2],
    /// Per arm: accepted actions the cluster failed to carry out, by reason.
    pub(super) failed_actions: &'a [BTreeMap<FailureReason, u64>; 2],
}

impl SplitTallies<'_> {
    /// The per-arm figures, their difference and the arms' balance.
    pub(super) fn report(&self) -> SplitReport {
        let now = self.last_time.unwrap_or(0.0);
        let observed = |arm: Arm| -> Vec<Observation> {
            self.jobs
                .values()
                .filter(|t| t.arm == Some(arm))
                .map(|t| Observation::of(t.submit, t.finish, now))
                .collect()
        };
        let (a, b, difference) = stats::compare_arms(&observed(Arm::A), &observed(Arm::B));
        let imbalance = self
            .ratio_b
            .map(|ratio_b| Imbalance::of(self.assigned, ratio_b));
        SplitReport {
            arms: vec![self.arm_report(Arm::A, a), self.arm_report(Arm::B, b)],
            difference,
            imbalance,
        }
    }

    fn arm_report(&self, arm: Arm, completion: CompletionStats) -> ArmReport {
        let tracks: Vec<&JobTrack> = self.jobs.values().filter(|t| t.arm == Some(arm)).collect();
        let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
        let completions: Vec<f64> = tracks
            .iter()
            .filter_map(|t| Some(t.finish? - t.submit))
            .collect();
        let waits: Vec<f64> = tracks
            .iter()
            .filter_map(|t| Some(t.start? - t.submit))
            .collect();
        let first_submit = tracks.iter().map(|t| t.submit).reduce(f64::min);
        let last_finish = tracks.iter().filter_map(|t| t.finish).reduce(f64::max);
        let elapsed = match (self.started_at, self.last_time) {
            (Some(s), Some(l)) if l > s => l - s,
            _ => 0.0,
        };
        let i = arm as usize;
        let share = |area: f64, cap: f64| {
            if elapsed > 0.0 && cap > 0.0 {
                Some(area / (cap * elapsed))
            } else {
                None
            }
        };
        ArmReport {
            arm,
            policy: self.policies[i].to_string(),
            jobs: tracks.len(),
            started: waits.len(),
            finished: completions.len(),
            avg_completion: mean(&completions),
            avg_wait: mean(&waits),
            makespan: match (first_submit, last_finish) {
                (Some(s), Some(f)) => Some(f - s),
                _ => None,
            },
            failed_actions: self.failed_actions[i].values().sum(),
            cpu_allocated: share(self.area[i].0, self.capacity[i].0),
            gpu_allocated: share(self.area[i].1, self.capacity[i].1),
            completion,
        }
    }
}

/// A round in which the shadow policy asked for something else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShadowDifference {
    /// Round number.
    pub round: u64,
    /// Cluster time.
    pub time: f64,
    /// What A asked for (sorted).
    pub a: Vec<Operation>,
    /// What B asked for (sorted).
    pub b: Vec<Operation>,
}

/// What an experiment measured so far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentReport {
    /// Shadow or split, with the split rule.
    pub mode: ExperimentMode,
    /// Arm A's policy (the active one).
    pub policy_a: String,
    /// Arm B's policy.
    pub policy_b: String,
    /// Cluster time of the first round of the experiment.
    pub started_at: Option<f64>,
    /// Rounds run under the experiment.
    pub rounds: u64,
    /// Rounds in which arm B's policy failed (A was not affected).
    pub b_failures: u64,
    /// Accepted actions the cluster failed to carry out, per arm and reason (a shadow
    /// arm B is never applied, so only A's can fail there).
    pub failed_actions: FailedActions,
    /// Shadow figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowReport>,
    /// Split figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitReport>,
}

/// Accepted actions that failed, per arm, by [`FailureReason`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FailedActions {
    /// Arm A's (the active policy's, or the fallback's standing in for it).
    pub a: BTreeMap<FailureReason, u64>,
    /// Arm B's in a split.
    pub b: BTreeMap<FailureReason, u64>,
}

/// Agreement between the applied and the shadow policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShadowReport {
    /// Rounds in which both decided.
    pub compared: u64,
    /// Rounds in which they asked for the same operations.
    pub agreed: u64,
    /// `agreed / compared`.
    pub agreement_rate: Option<f64>,
    /// The most recent rounds in which they differed.
    pub differing: Vec<ShadowDifference>,
}

/// Per-arm figures of a split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitReport {
    /// Arm A then arm B.
    pub arms: Vec<ArmReport>,
    /// B's restricted mean completion time minus A's at their common horizon, with its
    /// interval; `None` while an arm has no job.
    pub difference: Option<stats::Difference>,
    /// Whether the arms' sizes differ from the ratio beyond chance (hash and balanced
    /// splits; a label split has no ratio to test).
    pub imbalance: Option<Imbalance>,
}

/// The arms' sizes against the split's ratio: the exact binomial test of B's count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Imbalance {
    /// Jobs assigned.
    pub jobs: u64,
    /// Of those, jobs assigned to B.
    pub jobs_b: u64,
    /// The ratio's share of `jobs`: what B should have.
    pub expected_b: f64,
    /// The probability of a count of B this far from `expected_b` by chance.
    pub p_value: f64,
    /// `p_value` below [`stats::IMBALANCE_P_VALUE`]: the arms' figures compare
    /// different numbers of jobs than the ratio meant, and the console and `ctl` say so.
    pub unbalanced: bool,
}

impl Imbalance {
    fn of(assigned: [u64; 2], ratio_b: f64) -> Self {
        let jobs = assigned[0] + assigned[1];
        let p_value = stats::binomial_p_value(assigned[1], jobs, ratio_b);
        Self {
            jobs,
            jobs_b: assigned[1],
            expected_b: ratio_b * jobs as f64,
            p_value,
            unbalanced: p_value < stats::IMBALANCE_P_VALUE,
        }
    }
}

/// One arm's figures, with the job counts behind them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArmReport {
    /// Which arm.
    pub arm: Arm,
    /// Its policy.
    pub policy: String,
    /// Jobs assigned to it.
    pub jobs: usize,
    /// Of those, jobs that started (behind `avg_wait`).
    pub started: usize,
    /// Of those, jobs that finished (behind `avg_completion` and `makespan`).
    pub finished: usize,
    /// Accepted actions of the arm that the cluster failed to carry out.
    pub failed_actions: u64,
    /// Mean completion time (finish - submit) of its finished jobs only, seconds:
    /// biased low while jobs are unfinished (see `completion`).
    pub avg_completion: Option<f64>,
    /// Mean wait (start - submit) of its started jobs, seconds.
    pub avg_wait: Option<f64>,
    /// Last finish - first submit of its jobs, seconds.
    pub makespan: Option<f64>,
    /// Share of its nodes' CPU requested by its running tasks, averaged over the
    /// experiment.
    pub cpu_allocated: Option<f64>,
    /// Share of its nodes' GPUs requested by its running tasks, averaged likewise.
    pub gpu_allocated: Option<f64>,
    /// Completion times counting its unfinished jobs as censored at their age: the
    /// Kaplan-Meier median and the restricted mean (at the horizon common to both arms)
    /// with their intervals. Read these rather than `avg_completion`, which leaves the
    /// unfinished (slow) jobs out.
    pub completion: CompletionStats,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_of_13_and_7_at_one_half_are_within_chance_and_18_and_2_are_not() {
        let chance = Imbalance::of([13, 7], 0.5);
        assert_eq!((chance.jobs, chance.jobs_b), (20, 7));
        assert!(!chance.unbalanced, "{chance:?}");
        assert!(Imbalance::of([18, 2], 0.5).unbalanced);
    }
}
