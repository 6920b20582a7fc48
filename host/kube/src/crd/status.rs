//! The status half of the `TrainingJob` resource: what the controller knows and has done
//! about a job (its phase, placements, moves, loss samples, a restart under way, its
//! last checkpoint, conditions). It holds types only; `crd` generates the CRD from them,
//! and nothing here talks to the API server.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchyard_core::{JobMove, MOVE_HISTORY, MoveKind};

/// Lifecycle of a training job, as the controller reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Submitted, no pod placed yet.
    Waiting,
    /// Pods placed and running.
    Running,
    /// Checkpointing and restoring after a migration or a rescale.
    Restarting,
    /// Every pod of the job finished successfully.
    Succeeded,
    /// The job's pods failed more often than its `backoffLimit` allows.
    Failed,
}

/// One move of a job, as the status keeps it (the contract's `job-move`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveRecord {
    /// Seconds since the Unix epoch when it was applied.
    pub time: f64,
    /// What happened.
    pub kind: MoveKindRecord,
    /// A migration's purpose as the policy gave it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub purpose: String,
    /// Nodes the moved tasks were on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_nodes: Vec<String>,
    /// Nodes they are on after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to_nodes: Vec<String>,
}

/// What kind of move a job made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MoveKindRecord {
    /// Bound to nodes from waiting.
    Placed,
    /// Tasks moved, or marked in place.
    Migrated,
    /// Restarted with another replica count.
    Rescaled,
    /// Stopped at a checkpoint; waits again.
    Preempted,
}

impl From<&MoveRecord> for JobMove {
    fn from(m: &MoveRecord) -> Self {
        JobMove {
            time: m.time,
            kind: match m.kind {
                MoveKindRecord::Placed => MoveKind::Placed,
                MoveKindRecord::Migrated => MoveKind::Migrated,
                MoveKindRecord::Rescaled => MoveKind::Rescaled,
                MoveKindRecord::Preempted => MoveKind::Preempted,
            },
            purpose: m.purpose.clone(),
            from_nodes: m.from_nodes.clone(),
            to_nodes: m.to_nodes.clone(),
        }
    }
}

impl TrainingJobStatus {
    /// Adds a move to the history, keeping the most recent [`MOVE_HISTORY`].
    pub fn record_move(
        &mut self,
        kind: MoveKindRecord,
        purpose: &str,
        from: Vec<String>,
        to: Vec<String>,
        time: f64,
    ) {
        if self.moves.len() >= MOVE_HISTORY {
            self.moves.drain(..=self.moves.len() - MOVE_HISTORY);
        }
        self.moves.push(MoveRecord {
            time,
            kind,
            purpose: purpose.to_string(),
            from_nodes: from,
            to_nodes: to,
        });
    }
}

/// What the controller knows and has done about a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingJobStatus {
    /// The `metadata.generation` of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Where the job is in its lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Where each task runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
    /// Labels the policy put on the job (e.g. SpeCon's `category=CC`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_labels: BTreeMap<String, String>,
    /// What happened to the job so far, oldest first (the most recent 32): the
    /// contract's move history, kept here so that policies see the same history after
    /// the controller restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<MoveRecord>,
    /// Migrations carried out.
    #[serde(default)]
    pub migrations: u32,
    /// Rescales carried out.
    #[serde(default)]
    pub rescales: u32,
    /// Current replicas of the scalable role (absent: as submitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Pod failures counted against `backoffLimit`.
    #[serde(default)]
    pub failures: u32,
    /// Pods lost to disruptions (refused by their node, evicted, shut down), not
    /// counted against `backoffLimit`.
    #[serde(default)]
    pub disruptions: u32,
    /// Pods created so far start at generation 0; every restart raises it so
    /// replacement pods get fresh names.
    #[serde(default)]
    pub generation: u32,
    /// The most recent loss samples, oldest first, each step once (from the log and
    /// from pushes); a restarted controller reads them back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loss: Vec<LossSample>,
    /// A migration, rescale or preemption under way: the pods being stopped and where their
    /// replacements go. Written before the first pod is touched, so a restarted
    /// controller finishes the restart instead of starting another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<PendingRestart>,
    /// How the job's last checkpoint ended: acknowledged by every asked task (its pods
    /// were stopped then) or timed out at the grace period (the work since its previous
    /// complete checkpoint is lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checkpoint: Option<CheckpointRecord>,
    /// Conditions: `Checkpointed` (`True` with reason `CheckpointAcknowledged`, `False`
    /// with `CheckpointTimedOut`, after each stop that asked for a checkpoint),
    /// `PodsCreated` (the job's pods were created and released to the
    /// scheduler; `False` with reason `TemplateRejected` when the API server refused a
    /// role's template, or `PlacementFailed`), `PodsScheduled` (`False` with the
    /// scheduler's reason when it refused a member and the gang was taken back),
    /// `CpuWeightApplied` (an in-place CPU resize was applied, or refused by the
    /// cluster) and `VolumesReady`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The Lease term (`leaseTransitions`) of the leader that last wrote this status: a
    /// replica of an earlier term writes it no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_term: Option<u64>,
    /// The last placement kube-scheduler, or a node's kubelet, refused, while the job has
    /// not run since:
    /// which nodes, why, and how many placements in a row were refused (the back-off
    /// before the job is offered again grows with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
}

/// A placement the scheduler or a node's kubelet refused
/// ([`TrainingJobStatus::refusal`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// The nodes the refused members were pinned to.
    pub nodes: Vec<String>,
    /// The scheduler's reason (`Unschedulable`, `SchedulerError`), or the kubelet's
    /// (`OutOfnvidia.com/gpu`, `UnexpectedAdmissionError`).
    pub reason: String,
    /// Who refused each refused pod, with their reason and message.
    pub message: String,
    /// Placements refused in a row.
    pub count: u32,
    /// RFC 3339 time it was taken back.
    pub time: String,
}

/// A restart of some of a job's pods (a migration) or all of them (a rescale), carried
/// out in stages while the controller keeps scheduling other jobs: ask for a
/// checkpoint, delete the pods once the grace period allows, and create the replacements
/// once the old pods have terminated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingRestart {
    /// What started it.
    pub action: RestartAction,
    /// The pods being stopped.
    pub stopping: Vec<String>,
    /// Where each replacement task goes.
    pub targets: Vec<TaskTarget>,
    /// RFC 3339 time the checkpoint was requested.
    pub requested_at: String,
    /// RFC 3339 time after which the pods are deleted (`Annotation` checkpoints); absent
    /// when they were deleted at once with the grace period (`Signal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_after: Option<String>,
    /// RFC 3339 time before which the job is not queued again (`Recover`: the back-off
    /// after a failure or a refused placement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// The policy's reason, repeated in the Event when the restart completes.
    pub reason: String,
}

/// What a restart carries out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RestartAction {
    /// Tasks move to another node. In an elastic job (its scalable role's
    /// `minReplicas` below its `maxReplicas`) the others keep running and rejoin the
    /// moved ones; in any other job every task restarts from the checkpoint with them,
    /// the others on the nodes they ran on, as a gang's processes cannot lose a member.
    Migrate,
    /// The whole job restarts with another replica count.
    Scale,
    /// A member failed, crash-looped, was evicted or deleted, or the scheduler refused
    /// it: the whole gang is stopped and the job goes back to the queue, after a
    /// back-off, for the policy to place again.
    Recover,
    /// The policy preempted the job: every pod saves a checkpoint and stops, and the
    /// job goes back to the queue; placed again, its pods restore the checkpoint.
    Preempt,
}

/// A task and the node its replacement pod is pinned to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskTarget {
    /// Task name (`worker-1`).
    pub task: String,
    /// Node.
    pub node: String,
}

/// One task bound to one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Task name (`worker-1`).
    pub task: String,
    /// Pod running it.
    pub pod: String,
    /// Node it is bound to.
    pub node: String,
}

/// One evaluation of the training objective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LossSample {
    /// Unix seconds when the controller read it.
    pub time: f64,
    /// Training step.
    pub step: u64,
    /// Value.
    pub value: f64,
}

/// A condition in the usual Kubernetes shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `CpuWeightApplied`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// One CamelCase word.
    pub reason: String,
    /// A sentence for the operator.
    pub message: String,
    /// RFC 3339 time of the last change.
    pub last_transition_time: String,
}

/// How a checkpoint asked of a job ended ([`TrainingJobStatus::last_checkpoint`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    /// `Acknowledged` or `TimedOut`.
    pub outcome: CheckpointResult,
    /// Seconds from the request to the last acknowledgement, or to the pods' stop.
    pub seconds: f64,
    /// Where the checkpoint is, as the last acknowledgement said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// RFC 3339 time the checkpoint was requested (the restart's `requestedAt`).
    pub requested_at: String,
    /// The asked tasks that did not acknowledge (a timed-out checkpoint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_acknowledged: Vec<String>,
}

/// How a checkpoint ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CheckpointResult {
    /// Every asked task acknowledged; the pods were stopped then, the progress kept.
    Acknowledged,
    /// The grace period ended first; the pods were stopped anyway, and the work since
    /// the previous complete checkpoint is lost.
    TimedOut,
}
