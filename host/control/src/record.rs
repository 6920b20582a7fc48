//! What the loop remembers of each round, for results and the decision trace.

use serde::Serialize;

use switchyard_core::model::{Action, Decision, JobLabel, Snapshot, Trigger};
use switchyard_core::validate::Checked;

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
    /// What the shadow policy of a shadow experiment asked for (never applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowRecord>,
    /// What arm B of a split experiment decided for its jobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arm_b: Option<ArmRecord>,
}

/// The shadow policy's side of a round.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArmRecord {
    /// The policy that decided (the fallback's name when the arm's own policy failed).
    pub policy: String,
    /// The arm's own policy's failure, when the fallback decided.
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
}

impl ArmRecord {
    /// An arm's part of a round: `policy` decided `decision`, of which the validator
    /// accepted and rejected what `checked` says.
    pub fn new(
        policy: String,
        failure: Option<String>,
        decision: &Decision,
        checked: Checked,
    ) -> Self {
        Self {
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
            shadow: None,
            arm_b: None,
        }
    }
}
