//! A/B experiments run by the control loop: what each arm sees and what is tallied.
//!
//! - *Shadow*: arm A (the active policy) decides and is applied; arm B sees the same
//!   snapshot with its own state history, and its decision is compared, never applied.
//! - *Split*: every job is assigned to one arm when it is first seen (a deterministic
//!   hash of its id against a ratio, that hash held to a running balance, or a label
//!   selector) and keeps it; nodes are
//!   optionally partitioned by a label. Each arm's policy sees a snapshot filtered to its
//!   jobs (and nodes) and decides only for them.
//!
//! This module owns the assignment, the filtered views and the per-arm figures (their
//! censoring-aware statistics come from [`crate::stats`]); calling the policies,
//! validating and applying stays in the loop ([`crate::ControlLoop`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::outcome::{ActionOutcome, FailureReason};
use crate::slot::PolicySlot;
use crate::stats::{self, CompletionStats, Observation};
use switchyard_core::{
    Action, NodeSet, Operation, Snapshot, Trigger, check_label_key, check_label_value,
};

/// Differing shadow decisions kept for the report (the most recent ones).
pub(crate) const DIFFERENCES_KEPT: usize = 50;

/// An experiment description that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExperimentError {
    /// A selector that is not `key=value` with a valid label key and value.
    #[error("label selector `{selector}`: {reason}")]
    BadSelector {
        /// The selector as written (control characters escaped).
        selector: String,
        /// What is wrong.
        reason: String,
    },
    /// A node selector of a split that leaves one arm without nodes.
    #[error(
        "node selector `{selector}` matches {matching} of the cluster's {nodes} nodes: each arm \
         of a split needs at least one node, or its jobs wait forever"
    )]
    ArmWithoutNodes {
        /// The selector.
        selector: String,
        /// Nodes it matches (arm B's).
        matching: usize,
        /// Nodes in the cluster.
        nodes: usize,
    },
    /// A split ratio outside [0, 1].
    #[error("split ratio {0} must be between 0 and 1 (the share of jobs that go to arm B)")]
    BadRatio(f64),
    /// A split assignment that is neither `hash` nor `balanced`.
    #[error(
        "split assignment `{0}` is neither `hash` (each job by a hash of its id) nor \
         `balanced` (the hash held to the ratio as jobs arrive)"
    )]
    BadAssignment(String),
}

/// `key=value`: matches objects carrying that label. Read back from its JSON form
/// through [`LabelSelector::parse`], so a selector read from a report is checked like
/// one an operator typed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SelectorFields")]
pub struct LabelSelector {
    /// Label key.
    pub key: String,
    /// Label value.
    pub value: String,
}

impl LabelSelector {
    /// Reads `key=value`: one `=`, a Kubernetes label key and value (so `a=b,c`, a set
    /// selector the controller does not take, is refused rather than read as `a` equal to
    /// `b,c`).
    pub fn parse(text: &str) -> Result<Self, ExperimentError> {
        let bad = |reason: String| ExperimentError::BadSelector {
            selector: text.escape_debug().to_string(),
            reason,
        };
        let Some((key, value)) = text.split_once('=') else {
            return Err(bad("must be `key=value`".into()));
        };
        let (key, value) = (key.trim(), value.trim());
        if value.contains('=') {
            return Err(bad("has more than one `=`; write one `key=value`".into()));
        }
        check_label_key(key).map_err(bad)?;
        check_label_value(value).map_err(bad)?;
        Ok(Self {
            key: key.to_string(),
            value: value.to_string(),
        })
    }

    /// Whether `labels` carry this label.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.get(&self.key) == Some(&self.value)
    }
}

/// A [`LabelSelector`]'s JSON fields before they are checked.
#[derive(Deserialize)]
struct SelectorFields {
    key: String,
    value: String,
}

impl TryFrom<SelectorFields> for LabelSelector {
    type Error = ExperimentError;

    fn try_from(fields: SelectorFields) -> Result<Self, Self::Error> {
        Self::parse(&format!("{}={}", fields.key, fields.value))
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// How split jobs are assigned to arms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "by")]
pub enum JobAssignment {
    /// A job goes to B when the hash of its id, as a fraction of the hash range, is
    /// below `ratio_b`.
    Hash {
        /// Share of jobs that go to arm B, in [0, 1].
        ratio_b: f64,
    },
    /// The hash, held to a running balance: after `n` jobs arm B has `ratio_b * n`
    /// jobs rounded up or down, so 20 jobs at 0.5 are 10 and 10. Each job still goes
    /// where its hash sends it whenever the balance allows either arm.
    Balanced {
        /// Share of jobs that go to arm B, in [0, 1].
        ratio_b: f64,
    },
    /// Jobs carrying the label go to B, the others to A.
    Label {
        /// The selector.
        selector: LabelSelector,
    },
}

impl JobAssignment {
    /// A hash split sending `ratio_b` of the jobs to arm B.
    pub fn hash(ratio_b: f64) -> Result<Self, ExperimentError> {
        if !(0.0..=1.0).contains(&ratio_b) {
            return Err(ExperimentError::BadRatio(ratio_b));
        }
        Ok(Self::Hash { ratio_b })
    }

    /// A split sending `ratio_b` of the jobs to arm B by the hash, held to a running
    /// balance ([`JobAssignment::Balanced`]).
    pub fn balanced(ratio_b: f64) -> Result<Self, ExperimentError> {
        Self::hash(ratio_b).map(|_| Self::Balanced { ratio_b })
    }

    /// `hash` or `balanced`, as the settings file, `--split-assign` and the API name
    /// them, sending `ratio_b` of the jobs to B.
    pub fn by_name(name: &str, ratio_b: f64) -> Result<Self, ExperimentError> {
        match name {
            "hash" => Self::hash(ratio_b),
            "balanced" => Self::balanced(ratio_b),
            other => Err(ExperimentError::BadAssignment(
                other.escape_debug().to_string(),
            )),
        }
    }

    /// The share of jobs meant for B, when the rule has one.
    fn ratio_b(&self) -> Option<f64> {
        match self {
            JobAssignment::Hash { ratio_b } | JobAssignment::Balanced { ratio_b } => Some(*ratio_b),
            JobAssignment::Label { .. } => None,
        }
    }

    /// The arm of a job first seen after `assigned` jobs went to A and B.
    fn arm_of(&self, id: &str, labels: &BTreeMap<String, String>, assigned: [u64; 2]) -> Arm {
        let to_b = match self {
            JobAssignment::Hash { ratio_b } => hash_fraction(id) < *ratio_b,
            JobAssignment::Balanced { ratio_b } => {
                // What B lacks of its share once this job is counted: from 1 up B must
                // take it, from 0 down A must; in between the hash decides, with
                // odds that bring B back to its share. `|ratio n - B| < 1` holds after
                // every job.
                let due = ratio_b * (assigned[0] + assigned[1] + 1) as f64 - assigned[1] as f64;
                due >= 1.0 || (due > 0.0 && hash_fraction(id) < due)
            }
            JobAssignment::Label { selector } => selector.matches(labels),
        };
        if to_b { Arm::B } else { Arm::A }
    }
}

/// FNV-1a of the id, finished with SplitMix64's mixer, as a fraction of `u64::MAX`:
/// stable across runs, platforms and releases, unlike `std`'s hasher. FNV alone leaves
/// the high bits of ids that differ only in their last characters (`job-1`, `job-2`)
/// correlated, which skews the split; the mixer spreads them.
fn hash_fraction(id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    h as f64 / u64::MAX as f64
}

/// What kind of experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum ExperimentMode {
    /// B decides on A's snapshots; only A's decisions apply.
    Shadow,
    /// Jobs (and optionally nodes) are divided between the arms.
    Split {
        /// How jobs are assigned.
        jobs: JobAssignment,
        /// Nodes carrying this label belong to arm B, the others to A; none shares
        /// every node.
        #[serde(skip_serializing_if = "Option::is_none")]
        nodes_b: Option<LabelSelector>,
    },
}

/// One side of an experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    /// The active policy.
    A,
    /// The candidate.
    B,
}

#[derive(Clone, Debug, Default)]
struct JobTrack {
    arm: Option<Arm>,
    submit: f64,
    start: Option<f64>,
    finish: Option<f64>,
}

/// A running experiment: arm B's policy, the mode and the tallies so far.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub(crate) b: PolicySlot,
    mode: ExperimentMode,
    started_at: Option<f64>,
    rounds: u64,
    b_failures: u64,
    compared: u64,
    agreed: u64,
    differing: VecDeque<ShadowDifference>,
    jobs: BTreeMap<String, JobTrack>,
    /// Jobs assigned so far to A and to B.
    assigned: [u64; 2],
    last_time: Option<f64>,
    /// Per arm: (cpu millis, gpus) requested by its placed tasks at `last_time`.
    allocated: [(f64, f64); 2],
    /// Per arm: integral of `allocated` over time.
    area: [(f64, f64); 2],
    /// Per arm: capacity of its nodes (cpu millis, gpus).
    capacity: [(f64, f64); 2],
    /// Per arm: accepted actions the cluster failed to carry out, by reason.
    failed_actions: [BTreeMap<FailureReason, u64>; 2],
}

impl Experiment {
    /// An experiment with `b` as the candidate arm.
    pub fn new(b: PolicySlot, mode: ExperimentMode) -> Self {
        Self {
            b,
            mode,
            started_at: None,
            rounds: 0,
            b_failures: 0,
            compared: 0,
            agreed: 0,
            differing: VecDeque::new(),
            jobs: BTreeMap::new(),
            assigned: [0; 2],
            last_time: None,
            allocated: [(0.0, 0.0); 2],
            area: [(0.0, 0.0); 2],
            capacity: [(0.0, 0.0); 2],
            failed_actions: Default::default(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> &ExperimentMode {
        &self.mode
    }

    /// Checks the experiment against the cluster it is to run on: a split by nodes must
    /// leave each arm at least one node.
    pub fn check_against(&self, snapshot: &Snapshot) -> Result<(), ExperimentError> {
        if let ExperimentMode::Split {
            nodes_b: Some(selector),
            ..
        } = &self.mode
        {
            let matching = snapshot
                .nodes
                .iter()
                .filter(|n| selector.matches(&n.labels))
                .count();
            if matching == 0 || matching == snapshot.nodes.len() {
                return Err(ExperimentError::ArmWithoutNodes {
                    selector: selector.to_string(),
                    matching,
                    nodes: snapshot.nodes.len(),
                });
            }
        }
        Ok(())
    }

    /// Arm B's policy.
    pub fn policy_b(&self) -> &PolicySlot {
        &self.b
    }

    pub(crate) fn is_split(&self) -> bool {
        matches!(self.mode, ExperimentMode::Split { .. })
    }

    pub(crate) fn record_b_failure(&mut self) {
        self.b_failures += 1;
    }

    /// Tallies the failures among what became of `arm`'s applied actions.
    pub(crate) fn record_failed_actions<'a>(
        &mut self,
        arm: Arm,
        outcomes: impl Iterator<Item = &'a ActionOutcome>,
    ) {
        for failure in outcomes.filter_map(|o| o.as_ref().err()) {
            *self.failed_actions[arm as usize]
                .entry(failure.reason)
                .or_default() += 1;
        }
    }

    /// Compares A's and B's requested operations, ignoring order and reasons; returns
    /// whether they agree.
    pub(crate) fn compare(&mut self, round: u64, time: f64, a: &[Action], b: &[Action]) -> bool {
        let ops = |actions: &[Action]| {
            let mut ops: Vec<(String, Operation)> = actions
                .iter()
                .map(|a| {
                    (
                        serde_json::to_string(&a.op).unwrap_or_default(),
                        a.op.clone(),
                    )
                })
                .collect();
            ops.sort_by(|x, y| x.0.cmp(&y.0));
            ops
        };
        let (a, b) = (ops(a), ops(b));
        let agrees = a.iter().map(|x| &x.0).eq(b.iter().map(|x| &x.0));
        self.compared += 1;
        if agrees {
            self.agreed += 1;
        } else {
            if self.differing.len() == DIFFERENCES_KEPT {
                self.differing.pop_front();
            }
            self.differing.push_back(ShadowDifference {
                round,
                time,
                a: a.into_iter().map(|x| x.1).collect(),
                b: b.into_iter().map(|x| x.1).collect(),
            });
        }
        agrees
    }

    /// Takes in a round's snapshot: counts the round, assigns new jobs to arms, notes
    /// starts and finishes, and integrates each arm's allocation since the last round.
    pub(crate) fn observe(&mut self, snapshot: &Snapshot) {
        self.rounds += 1;
        self.started_at.get_or_insert(snapshot.time);
        let ExperimentMode::Split {
            jobs: rule,
            nodes_b,
        } = &self.mode
        else {
            return;
        };
        if let Some(last) = self.last_time {
            let dt = (snapshot.time - last).max(0.0);
            for arm in 0..2 {
                self.area[arm].0 += self.allocated[arm].0 * dt;
                self.area[arm].1 += self.allocated[arm].1 * dt;
            }
        }
        self.last_time = Some(snapshot.time);
        self.capacity = [(0.0, 0.0); 2];
        for node in &snapshot.nodes {
            let cap = (
                node.allocatable.cpu_millis as f64,
                node.allocatable.gpus as f64,
            );
            let arms: &[usize] = match nodes_b {
                Some(sel) if sel.matches(&node.labels) => &[1],
                Some(_) => &[0],
                None => &[0, 1],
            };
            for &arm in arms {
                self.capacity[arm].0 += cap.0;
                self.capacity[arm].1 += cap.1;
            }
        }
        self.allocated = [(0.0, 0.0); 2];
        for job in &snapshot.jobs {
            let track = self.jobs.entry(job.id.clone()).or_default();
            let arm = match track.arm {
                Some(arm) => arm,
                None => {
                    let arm = rule.arm_of(&job.id, &job.labels, self.assigned);
                    self.assigned[arm as usize] += 1;
                    *track.arm.insert(arm)
                }
            };
            track.submit = job.submit_time;
            if track.start.is_none() {
                track.start = job.start_time;
            }
            let i = arm as usize;
            for task in job.tasks.iter().filter(|t| t.node.is_some()) {
                self.allocated[i].0 += task.requests.cpu_millis as f64;
                self.allocated[i].1 += task.requests.gpus as f64;
            }
        }
        for trigger in &snapshot.triggers {
            if let Trigger::JobFinished(id) = trigger
                && let Some(track) = self.jobs.get_mut(id)
            {
                track.finish.get_or_insert(snapshot.time);
            }
        }
    }

    /// The arm job `id` was assigned to, once it has been seen.
    pub fn arm_of(&self, id: &str) -> Option<Arm> {
        self.jobs.get(id).and_then(|t| t.arm)
    }

    /// What arm `arm` sees of `snapshot`: its jobs, its nodes (all of them when nodes
    /// are not partitioned), and the triggers about them.
    pub(crate) fn filter(&self, snapshot: &Snapshot, arm: Arm) -> Snapshot {
        let nodes_b = match &self.mode {
            ExperimentMode::Split { nodes_b, .. } => nodes_b.as_ref(),
            ExperimentMode::Shadow => None,
        };
        let mine = |id: &str| self.arm_of(id) == Some(arm);
        let kept: Vec<usize> = (0..snapshot.nodes.len())
            .filter(|&i| {
                nodes_b.is_none_or(|sel| sel.matches(&snapshot.nodes[i].labels) == (arm == Arm::B))
            })
            .collect();
        let node_sets = if kept.len() == snapshot.nodes.len() {
            Arc::clone(&snapshot.node_sets)
        } else {
            Arc::new(renumbered(&snapshot.node_sets, &kept, snapshot.nodes.len()))
        };
        Snapshot {
            time: snapshot.time,
            triggers: snapshot
                .triggers
                .iter()
                .filter(|t| match t {
                    Trigger::JobArrived(id)
                    | Trigger::JobFinished(id)
                    | Trigger::JobPreempted(id) => mine(id),
                    Trigger::Tick | Trigger::NodeChanged(_) => true,
                })
                .cloned()
                .collect(),
            nodes: kept
                .iter()
                .map(|&i| Arc::clone(&snapshot.nodes[i]))
                .collect(),
            jobs: snapshot
                .jobs
                .iter()
                .filter(|j| mine(&j.id))
                .cloned()
                .collect(),
            node_sets,
        }
    }

    /// The figures so far; `policy_a` is the active policy's name.
    pub fn report(&self, policy_a: &str) -> ExperimentReport {
        let shadow = matches!(self.mode, ExperimentMode::Shadow).then(|| ShadowReport {
            compared: self.compared,
            agreed: self.agreed,
            agreement_rate: (self.compared > 0).then(|| self.agreed as f64 / self.compared as f64),
            differing: self.differing.iter().cloned().collect(),
        });
        let split = self.is_split().then(|| self.split_report(policy_a));
        ExperimentReport {
            mode: self.mode.clone(),
            policy_a: policy_a.to_string(),
            policy_b: self.b.module.name().to_string(),
            started_at: self.started_at,
            rounds: self.rounds,
            b_failures: self.b_failures,
            failed_actions: FailedActions {
                a: self.failed_actions[0].clone(),
                b: self.failed_actions[1].clone(),
            },
            shadow,
            split,
        }
    }

    fn split_report(&self, policy_a: &str) -> SplitReport {
        let now = self.last_time.unwrap_or(0.0);
        let observed = |arm: Arm| -> Vec<Observation> {
            self.jobs
                .values()
                .filter(|t| t.arm == Some(arm))
                .map(|t| Observation::of(t.submit, t.finish, now))
                .collect()
        };
        let (a, b, difference) = stats::compare_arms(&observed(Arm::A), &observed(Arm::B));
        let imbalance = match &self.mode {
            ExperimentMode::Split { jobs, .. } => jobs.ratio_b(),
            ExperimentMode::Shadow => None,
        }
        .map(|ratio_b| Imbalance::of(self.assigned, ratio_b));
        SplitReport {
            arms: vec![
                self.arm_report(Arm::A, policy_a, a),
                self.arm_report(Arm::B, self.b.module.name(), b),
            ],
            difference,
            imbalance,
        }
    }

    fn arm_report(&self, arm: Arm, policy: &str, completion: CompletionStats) -> ArmReport {
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
            policy: policy.to_string(),
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

/// `sets` for an arm that sees only the nodes at positions `kept` (ascending) of the
/// `nodes` the cluster has: each set keeps its nodes that the arm sees, numbered by
/// their positions in the arm's list.
fn renumbered(sets: &[NodeSet], kept: &[usize], nodes: usize) -> Vec<NodeSet> {
    let mut position = vec![None; nodes];
    for (new, &old) in kept.iter().enumerate() {
        position[old] = Some(new as u32);
    }
    sets.iter()
        .map(|set| NodeSet {
            id: set.id,
            nodes: set
                .nodes
                .iter()
                .filter_map(|&old| position.get(old as usize).copied().flatten())
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_split_is_deterministic_and_roughly_follows_the_ratio() {
        let rule = JobAssignment::hash(0.3).unwrap();
        let labels = BTreeMap::new();
        let to_b = (0..2000)
            .filter(|i| rule.arm_of(&format!("job-{i}"), &labels, [0; 2]) == Arm::B)
            .count();
        assert!((450..750).contains(&to_b), "{to_b} of 2000 went to B");
        for i in 0..50 {
            let id = format!("job-{i}");
            assert_eq!(
                rule.arm_of(&id, &labels, [0; 2]),
                rule.arm_of(&id, &labels, [3; 2])
            );
        }
    }

    /// Assigns `n` jobs in arrival order as `observe` does; returns B's count after each.
    fn counts_of_b(rule: &JobAssignment, n: usize) -> Vec<u64> {
        let labels = BTreeMap::new();
        let mut assigned = [0; 2];
        (0..n)
            .map(|i| {
                let arm = rule.arm_of(&format!("resnet-{i}"), &labels, assigned);
                assigned[arm as usize] += 1;
                assigned[1]
            })
            .collect()
    }

    #[test]
    fn a_balanced_split_of_20_jobs_at_one_half_is_10_and_10() {
        let counts = counts_of_b(&JobAssignment::balanced(0.5).unwrap(), 20);
        assert_eq!(counts[19], 10);
        // After every even number of jobs the arms are level, whatever the hash says.
        for (n, b) in counts.iter().enumerate().skip(1).step_by(2) {
            let jobs = n + 1;
            assert_eq!(*b as usize, jobs / 2, "after {jobs} jobs");
        }
    }

    #[test]
    fn a_balanced_split_stays_within_one_job_of_its_ratio_and_still_follows_the_hash() {
        for ratio in [0.1, 0.3, 0.5, 0.77] {
            let rule = JobAssignment::balanced(ratio).unwrap();
            for (n, b) in counts_of_b(&rule, 500).into_iter().enumerate() {
                let share = ratio * (n + 1) as f64;
                assert!((share - b as f64).abs() < 1.0, "{ratio}: {b} of {}", n + 1);
            }
        }
        // Not a fixed alternation: the hash picks which of a pair of jobs goes to B.
        let labels = BTreeMap::new();
        let rule = JobAssignment::balanced(0.5).unwrap();
        let firsts: std::collections::HashSet<Arm> = (0..20)
            .map(|i| rule.arm_of(&format!("job-{i}"), &labels, [0; 2]))
            .collect();
        assert_eq!(firsts.len(), 2);
    }

    #[test]
    fn assignments_are_named_hash_or_balanced() {
        assert_eq!(
            JobAssignment::by_name("balanced", 0.5),
            Ok(JobAssignment::Balanced { ratio_b: 0.5 })
        );
        let error = JobAssignment::by_name("alternate", 0.5).unwrap_err();
        assert!(error.to_string().contains("neither `hash`"), "{error}");
        assert_eq!(
            JobAssignment::by_name("balanced", -0.1),
            Err(ExperimentError::BadRatio(-0.1))
        );
    }

    #[test]
    fn arms_of_13_and_7_at_one_half_are_within_chance_and_18_and_2_are_not() {
        let chance = Imbalance::of([13, 7], 0.5);
        assert_eq!((chance.jobs, chance.jobs_b), (20, 7));
        assert!(!chance.unbalanced, "{chance:?}");
        assert!(Imbalance::of([18, 2], 0.5).unbalanced);
    }

    #[test]
    fn a_ratio_outside_zero_to_one_and_a_selector_without_equals_are_refused() {
        assert_eq!(
            JobAssignment::hash(1.5),
            Err(ExperimentError::BadRatio(1.5))
        );
        assert!(LabelSelector::parse("team").is_err());
        assert_eq!(
            LabelSelector::parse("team=a").unwrap().to_string(),
            "team=a"
        );
    }
}
