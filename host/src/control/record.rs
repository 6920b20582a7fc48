//! What the loop remembers of each round, for results and the decision trace.

use serde::Serialize;

use crate::model::{Action, Decision, JobLabel, Snapshot, Trigger};
use crate::validate::Checked;

/// A rejected action and the validator's reason, as text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RejectedRecord {
    /// The action as the policy sent it.
    #[serde(flatten)]
    pub action: Action,
    /// Why it was turned down.
    pub rejected_because: String,
}

/// One round of the control loop.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DecisionRecord {
    /// Cluster time of the round.
    pub time: f64,
    /// Why the policy was called.
    pub triggers: Vec<Trigger>,
    /// The policy that decided (the fallback's name when the active one failed).
    pub policy: String,
    /// The active policy's failure, when the fallback decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Actions applied, with the policy's reasons.
    pub accepted: Vec<Action>,
    /// Actions turned down, with the validator's reasons.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedRecord>,
    /// Labels the policy set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<JobLabel>,
    /// When the policy asked to be called again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_call_after: Option<f64>,
}

impl DecisionRecord {
    /// The record of a round decided by `policy` on `snapshot`.
    pub fn new(
        snapshot: &Snapshot,
        policy: String,
        failure: Option<String>,
        decision: &Decision,
        checked: Checked,
    ) -> Self {
        Self {
            time: snapshot.time,
            triggers: snapshot.triggers.clone(),
            policy,
            failure,
            accepted: checked.accepted,
            rejected: checked
                .rejected
                .into_iter()
                .map(|r| RejectedRecord {
                    rejected_because: r.reason.to_string(),
                    action: r.action,
                })
                .collect(),
            labels: decision.labels.clone(),
            next_call_after: decision.next_call_after,
        }
    }
}
