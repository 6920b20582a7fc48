//! What the loop remembers of each round, for results and the decision trace.

use serde::{Deserialize, Serialize};

use crate::outcome::{ActionOutcome, FailureReason};
use switchyard_core::{Action, Checked, JobLabel, Snapshot, Trigger};

/// A rejected action and the validator's reason, as text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RejectedActionRecord {
    /// The action as the policy sent it.
    #[serde(flatten)]
    pub action: Action,
    /// Why it was turned down.
    pub rejected_because: String,
}

/// An accepted action the cluster failed to carry out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailedActionRecord {
    /// The action as the policy sent it.
    #[serde(flatten)]
    pub action: Action,
    /// The kind of failure (`conflict`, `forbidden`, `injected`, ...).
    pub failure: FailureReason,
    /// What failed, in the backend's words.
    pub failed_because: String,
}

/// How much of the queue a policy was shown, when the loop showed it only the oldest
/// waiting jobs (see `ControlLoop`'s queue window).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueWindowRecord {
    /// Waiting jobs the deciding policy saw, the oldest first.
    pub shown: usize,
    /// Waiting jobs in the cluster.
    pub waiting: usize,
}

/// One round of the control loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// Round number, from 0, consecutive.
    pub round: u64,
    /// Cluster time of the round.
    pub time: f64,
    /// Why the policy was called.
    pub triggers: Vec<Trigger>,
    /// What the active policy (arm A of an experiment), or the fallback standing in for
    /// it, decided and what of it was applied.
    #[serde(flatten)]
    pub arm_a: ArmRecord,
    /// When the deciding policy asked to be called again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_call_after: Option<f64>,
    /// Set when the deciding policy saw only part of the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_window: Option<QueueWindowRecord>,
    /// What the shadow policy of a shadow experiment asked for (never applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowRecord>,
    /// What arm B of a split experiment decided for its jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arm_b: Option<ArmRecord>,
}

/// The shadow policy's side of a round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShadowRecord {
    /// The shadow policy.
    pub policy: String,
    /// Its failure, if it failed (the applied decision is unaffected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Whether it asked for the same operations as the applied policy; none when
    /// either failed.
    pub agrees: Option<bool>,
    /// What it asked for.
    pub actions: Vec<Action>,
}

/// One arm's side of a round: the policy that decided, and what of its decision was
/// applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArmRecord {
    /// The policy that decided (the fallback's name when the arm's own policy failed).
    pub policy: String,
    /// The arm's own policy's failure, when the fallback decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Actions applied, with the policy's reasons.
    pub accepted: Vec<Action>,
    /// Actions the validator accepted that the cluster failed to carry out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedActionRecord>,
    /// Actions turned down, with the validator's reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedActionRecord>,
    /// Labels the policy set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<JobLabel>,
    /// Labels turned down, with the validator's reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected_labels: Vec<RejectedLabelRecord>,
}

/// A rejected label and the validator's reason, as text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RejectedLabelRecord {
    /// The label as the policy sent it.
    #[serde(flatten)]
    pub label: JobLabel,
    /// Why it was turned down.
    pub rejected_because: String,
}

impl ArmRecord {
    /// An arm's part of a round: `policy` decided, and the validator accepted and
    /// rejected what `checked` says.
    pub fn new(policy: String, failure: Option<String>, checked: Checked) -> Self {
        Self {
            policy,
            failure,
            accepted: checked.accepted,
            failed: Vec::new(),
            rejected: checked
                .rejected
                .into_iter()
                .map(|r| RejectedActionRecord {
                    rejected_because: r.reason.to_string(),
                    action: r.action,
                })
                .collect(),
            labels: checked.labels,
            rejected_labels: checked
                .rejected_labels
                .into_iter()
                .map(|r| RejectedLabelRecord {
                    rejected_because: r.reason.to_string(),
                    label: r.label,
                })
                .collect(),
        }
    }
}

impl ArmRecord {
    /// Moves the accepted actions whose `outcomes` (one per accepted action, in order)
    /// are failures from `accepted` to `failed`. An action without an outcome (a
    /// cluster that reported fewer) counts as failed: nothing says it happened.
    pub fn settle(&mut self, outcomes: &[ActionOutcome]) {
        let accepted = std::mem::take(&mut self.accepted);
        for (i, action) in accepted.into_iter().enumerate() {
            match outcomes.get(i) {
                Some(Ok(())) => self.accepted.push(action),
                Some(Err(failure)) => self.failed.push(FailedActionRecord {
                    action,
                    failure: failure.reason,
                    failed_because: failure.message.clone(),
                }),
                None => self.failed.push(FailedActionRecord {
                    action,
                    failure: FailureReason::Other,
                    failed_because: "the cluster reported no outcome for this action".into(),
                }),
            }
        }
    }
}

impl DecisionRecord {
    /// The record of round `round`, decided on `snapshot` by arm A as `arm_a` says.
    pub fn new(
        round: u64,
        snapshot: &Snapshot,
        arm_a: ArmRecord,
        next_call_after: Option<f64>,
    ) -> Self {
        Self {
            round,
            time: snapshot.time,
            triggers: snapshot.triggers.clone(),
            arm_a,
            next_call_after,
            queue_window: None,
            shadow: None,
            arm_b: None,
        }
    }
}

/// Bytes a value takes in memory and in JSON, roughly: its strings plus a fixed cost per
/// item. Used to bound what the live controller keeps and what one API page carries.
trait Footprint {
    fn footprint(&self) -> usize;
}

/// The fixed cost counted per action, label or record besides its strings.
const ITEM_BYTES: usize = 64;

impl Footprint for Action {
    fn footprint(&self) -> usize {
        use switchyard_core::Operation;
        let strings = match &self.op {
            Operation::Place { job, assignments } => {
                job.len()
                    + assignments
                        .iter()
                        .map(|a| a.task.len() + a.node.len() + ITEM_BYTES)
                        .sum::<usize>()
            }
            Operation::Migrate {
                job,
                task,
                node,
                purpose,
            } => job.len() + task.as_ref().map_or(0, String::len) + node.len() + purpose.len(),
            Operation::SetCpuWeight { job, task, .. } => job.len() + task.len(),
            Operation::Scale { job, nodes, .. } => {
                job.len() + nodes.iter().map(|n| n.len() + 4).sum::<usize>()
            }
            Operation::Wait { job } | Operation::Preempt { job } => job.len(),
        };
        ITEM_BYTES + strings + self.reason.len()
    }
}

impl Footprint for JobLabel {
    fn footprint(&self) -> usize {
        ITEM_BYTES + self.job.len() + self.key.len() + self.value.len()
    }
}

impl Footprint for ArmRecord {
    fn footprint(&self) -> usize {
        ITEM_BYTES
            + self.policy.len()
            + self.failure.as_ref().map_or(0, String::len)
            + self
                .accepted
                .iter()
                .map(Footprint::footprint)
                .sum::<usize>()
            + self
                .failed
                .iter()
                .map(|f| f.action.footprint() + f.failed_because.len())
                .sum::<usize>()
            + self
                .rejected
                .iter()
                .map(|r| r.action.footprint() + r.rejected_because.len())
                .sum::<usize>()
            + self.labels.iter().map(Footprint::footprint).sum::<usize>()
            + self
                .rejected_labels
                .iter()
                .map(|r| r.label.footprint() + r.rejected_because.len())
                .sum::<usize>()
    }
}

impl DecisionRecord {
    /// Roughly the bytes this record holds (and its JSON takes): what bounds the
    /// records a live controller keeps and an API page returns.
    pub fn footprint(&self) -> usize {
        let shadow = self.shadow.as_ref().map_or(0, |s| {
            ITEM_BYTES
                + s.policy.len()
                + s.failure.as_ref().map_or(0, String::len)
                + s.actions.iter().map(Footprint::footprint).sum::<usize>()
        });
        ITEM_BYTES
            + self.triggers.len() * ITEM_BYTES
            + self.arm_a.footprint()
            + self.arm_b.as_ref().map_or(0, Footprint::footprint)
            + shadow
    }
}
