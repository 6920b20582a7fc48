//! What the validator says of what it turns down: the rule an action or a label broke
//! ([`Rejection`], [`LabelRejection`], each with a short label for metrics) beside what
//! was turned down. It owns the wording of every refusal; it must not check anything.

use crate::disruption::DisruptionRefusal;
use crate::model::{Action, JobLabel};

/// Why one action was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error, serde::Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Rejection {
    /// The job is not in the snapshot (finished, or never existed).
    #[error("unknown job `{job}`")]
    UnknownJob {
        /// Job id.
        job: String,
    },
    /// The job has no task of that name.
    #[error("job `{job}` has no task `{task}`")]
    UnknownTask {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
    },
    /// No node of that name.
    #[error("unknown node `{node}`")]
    UnknownNode {
        /// Node name.
        node: String,
    },
    /// The node is cordoned or not ready.
    #[error("node `{node}` is not schedulable")]
    NodeUnschedulable {
        /// Node name.
        node: String,
    },
    /// Placing the task would exceed what the node has left.
    #[error(
        "task `{task}` of job `{job}` does not fit on node `{node}`: it requests {requested}, the node has {free} left"
    )]
    NodeFull {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
        /// Node name.
        node: String,
        /// What the task asks for.
        requested: String,
        /// What is left on the node.
        free: String,
    },
    /// A placement named a task that is already on a node, or named it twice.
    #[error("task `{task}` of job `{job}` is not pending (already placed, or named twice)")]
    TaskNotPending {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
    },
    /// A placement with no tasks.
    #[error("placement for job `{job}` names no tasks")]
    EmptyPlacement {
        /// Job id.
        job: String,
    },
    /// The task may not run on the node (its tolerations, node selector or required
    /// affinity exclude it).
    #[error(
        "task `{task}` of job `{job}` may not run on node `{node}`: the node is outside its eligible set"
    )]
    NotEligible {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
        /// Node name.
        node: String,
    },
    /// A migration's purpose is not a short tag.
    #[error("migration of job `{job}`: purpose {message}")]
    BadPurpose {
        /// Job id.
        job: String,
        /// What is wrong.
        message: String,
    },
    /// The job cannot checkpoint, so it cannot be moved or rescaled.
    #[error("job `{job}` cannot checkpoint, so it cannot be migrated, rescaled or preempted")]
    NotCheckpointable {
        /// Job id.
        job: String,
    },
    /// The job or task is not in a state that allows the action.
    #[error("job `{job}` is {phase}: {what}")]
    WrongPhase {
        /// Job id.
        job: String,
        /// Its phase.
        phase: String,
        /// What cannot be done.
        what: String,
    },
    /// A CPU weight outside (0, 1].
    #[error("CPU weight {weight} for task `{task}` of job `{job}` is outside (0, 1]")]
    WeightOutOfRange {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
        /// The weight asked for.
        weight: f64,
    },
    /// A replica count outside min..max, or equal to the current one.
    #[error("job `{job}` cannot scale to {replicas} replicas: {why}")]
    BadReplicaCount {
        /// Job id.
        job: String,
        /// Count asked for.
        replicas: u32,
        /// Why not.
        why: String,
    },
    /// Two tasks of a job that asks for one task per node would share a node.
    #[error(
        "job `{job}` runs at most one task per node (its pod template has required anti-affinity against its own pods, or a host port): tasks {tasks} would share node `{node}`"
    )]
    SharedNode {
        /// Job id.
        job: String,
        /// The node.
        node: String,
        /// The tasks that would share it.
        tasks: String,
    },
    /// The job already had a move (migration, rescale, preemption) accepted in this
    /// decision, or a placement when this is a move: a job moves at most once per
    /// round, and never in the round it is placed.
    #[error(
        "job `{job}` already has a placement or a move (migration, rescale, preemption) in this decision; a job moves at most once per round, and not in a round that places it"
    )]
    ConflictingAction {
        /// Job id.
        job: String,
    },
    /// A valid disruption the disruption budget turns down (`disruption.rs`).
    #[error(transparent)]
    Disruption(#[from] DisruptionRefusal),
}

impl Rejection {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Rejection::UnknownJob { .. } => "unknown-job",
            Rejection::UnknownTask { .. } => "unknown-task",
            Rejection::UnknownNode { .. } => "unknown-node",
            Rejection::NodeUnschedulable { .. } => "node-unschedulable",
            Rejection::NodeFull { .. } => "node-full",
            Rejection::TaskNotPending { .. } => "task-not-pending",
            Rejection::EmptyPlacement { .. } => "empty-placement",
            Rejection::NotEligible { .. } => "not-eligible",
            Rejection::BadPurpose { .. } => "bad-purpose",
            Rejection::NotCheckpointable { .. } => "not-checkpointable",
            Rejection::WrongPhase { .. } => "wrong-phase",
            Rejection::WeightOutOfRange { .. } => "weight-out-of-range",
            Rejection::BadReplicaCount { .. } => "bad-replica-count",
            Rejection::ConflictingAction { .. } => "conflicting-action",
            Rejection::SharedNode { .. } => "shared-node",
            Rejection::Disruption(refusal) => refusal.metric_label(),
        }
    }
}

/// An action the validator turned down, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RejectedAction {
    /// The action as the policy sent it.
    pub action: Action,
    /// Why it was turned down.
    pub reason: Rejection,
}

/// Why one label was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error, serde::Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum LabelRejection {
    /// The job is not in the snapshot.
    #[error("label on unknown job `{job}`")]
    UnknownJob {
        /// Job id.
        job: String,
    },
    /// The key or value is not what a Kubernetes object label may hold.
    #[error("{message}")]
    Syntax {
        /// What is wrong, naming the key or value.
        message: String,
    },
}

impl LabelRejection {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LabelRejection::UnknownJob { .. } => "label-unknown-job",
            LabelRejection::Syntax { .. } => "label-syntax",
        }
    }
}

/// A label the validator turned down, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RejectedLabel {
    /// The label as the policy sent it.
    pub label: JobLabel,
    /// Why it was turned down.
    pub reason: LabelRejection,
}
