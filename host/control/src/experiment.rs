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
//! This module owns the running experiment: taking in each round's snapshot, the
//! filtered views and the tallies. What an experiment is and how jobs get their arms
//! is in `assignment`; the report and its figures in `report` (their censoring-aware
//! statistics come from [`crate::stats`]). Calling the policies, validating and
//! applying stays in the loop ([`crate::ControlLoop`]).

mod assignment;
mod report;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

pub use assignment::{Arm, ExperimentError, ExperimentMode, JobAssignment, LabelSelector};
pub use report::{
    ArmReport, ExperimentReport, FailedActions, Imbalance, ShadowDifference, ShadowReport,
    SplitReport,
};
use report::{JobTrack, SplitTallies};

use crate::outcome::{ActionOutcome, FailureReason};
use crate::slot::PolicySlot;
use switchyard_core::{Action, NodeSet, Operation, Snapshot, Trigger};

/// Differing shadow decisions kept for the report (the most recent ones).
pub(crate) const DIFFERENCES_KEPT: usize = 50;

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
        let ratio_b = match &self.mode {
            ExperimentMode::Split { jobs, .. } => jobs.ratio_b(),
            ExperimentMode::Shadow => None,
        };
        SplitTallies {
            policies: [policy_a, self.b.module.name()],
            jobs: &self.jobs,
            assigned: self.assigned,
            ratio_b,
            started_at: self.started_at,
            last_time: self.last_time,
            area: self.area,
            capacity: self.capacity,
            failed_actions: &self.failed_actions,
        }
        .report()
    }
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
