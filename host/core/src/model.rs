//! The host's model of a cluster snapshot and of a policy's decision.
//!
//! These mirror `wit/policy.wit` field for field, but are plain Rust with serde so the
//! simulator, the Kubernetes backend, the validator and the HTTP API can share them
//! without touching generated bindings. Conversions live in the runtime crate's
//! `contract` module only (and in [`crate::snapshot_lowering`], which it shares with the
//! guest SDK).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// An amount of each scheduled resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Resources {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Whole GPUs.
    pub gpus: u32,
}

impl Resources {
    /// `self + other`, saturating.
    pub fn plus(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            gpus: self.gpus.saturating_add(other.gpus),
        }
    }

    /// `self - other`, floored at zero.
    pub fn saturating_minus(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
            gpus: self.gpus.saturating_sub(other.gpus),
        }
    }

    /// True when every component of `other` is at most `self`'s.
    pub fn covers(&self, other: &Resources) -> bool {
        self.cpu_millis >= other.cpu_millis
            && self.memory_bytes >= other.memory_bytes
            && self.gpus >= other.gpus
    }
}

/// A machine that can run tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Unique node name.
    pub name: String,
    /// What the node offers to tasks.
    pub allocatable: Resources,
    /// Sum of the requests of the tasks bound to it.
    pub requested: Resources,
    /// Measured usage, when known.
    pub usage: Option<Resources>,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// False when cordoned or not ready.
    pub schedulable: bool,
}

/// Lifecycle of one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskPhase {
    /// Not on a node yet.
    Pending,
    /// Bound and running.
    Running,
    /// Checkpointing or restoring.
    Restarting,
}

/// One process of a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique within its job.
    pub name: String,
    /// The role it plays (`ps`, `worker`, `main`).
    pub role: String,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Where it is in its lifecycle.
    pub phase: TaskPhase,
    /// What it asked for.
    pub requests: Resources,
    /// Relative CPU share under contention, in (0, 1].
    pub cpu_weight: f64,
    /// Measured usage, when known.
    pub usage: Option<Resources>,
    /// The [`NodeSet`] it may run on, by id; none: any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible: Option<u32>,
}

/// A set of nodes tasks may run on, shared by every task with the same constraints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSet {
    /// What tasks name it by ([`Task::eligible`]).
    pub id: u32,
    /// The nodes, as positions in [`Snapshot::nodes`], ascending.
    pub nodes: Vec<u32>,
}

/// What kind of move a job made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveKind {
    /// Bound to nodes from waiting.
    Placed,
    /// Tasks moved (or, with equal from and to, the job was only marked).
    Migrated,
    /// Restarted with another replica count.
    Rescaled,
    /// Stopped at a checkpoint; waits again.
    Preempted,
}

/// One move of a job, for its history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobMove {
    /// Host clock seconds when it was applied.
    pub time: f64,
    /// What happened.
    pub kind: MoveKind,
    /// A migration's purpose as the policy gave it; empty otherwise.
    pub purpose: String,
    /// Nodes before (one per task that moved).
    pub from_nodes: Vec<String>,
    /// Nodes after.
    pub to_nodes: Vec<String>,
}

/// The most recent moves a job's history keeps.
pub const MOVE_HISTORY: usize = 32;

/// `history` with `moved` added, the oldest dropped beyond [`MOVE_HISTORY`]: what every
/// backend keeps of a job's moves. A new list, sized exactly, rather than the old one
/// changed: views of the job share the old one, and moves are rare.
pub fn with_move(history: &[JobMove], moved: JobMove) -> Arc<[JobMove]> {
    let oldest_kept = (history.len() + 1).saturating_sub(MOVE_HISTORY);
    history[oldest_kept..]
        .iter()
        .cloned()
        .chain([moved])
        .collect()
}

/// One evaluation of a job's training objective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossSample {
    /// Host clock seconds.
    pub time: f64,
    /// Training step.
    pub step: u64,
    /// Evaluation value.
    pub value: f64,
}

/// The elastic part of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replicas {
    /// The role that scales.
    pub role: String,
    /// Replicas now.
    pub current: u32,
    /// Fewest it may run with.
    pub min: u32,
    /// Most it may run with.
    pub max: u32,
}

/// Lifecycle of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobPhase {
    /// Nothing placed yet.
    Waiting,
    /// Some or all tasks running.
    Running,
    /// Checkpointing or restoring.
    Restarting,
}

/// A training job not yet finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Unique id.
    pub id: String,
    /// Where it is in its lifecycle.
    pub phase: JobPhase,
    /// Submission time, host clock seconds.
    pub submit_time: f64,
    /// When its first task started.
    pub start_time: Option<f64>,
    /// Higher first.
    pub priority: i32,
    /// Utility of finishing it.
    pub utility: f64,
    /// Its tasks. Shared, like the loss series: a job whose only change is a new loss
    /// sample is the same tasks in a new view, and the host's diff then tells it apart
    /// from a job whose tasks changed by identity, without comparing every task's names.
    pub tasks: Arc<[Task]>,
    /// Its scalable role.
    pub replicas: Replicas,
    /// Recent evaluation samples, oldest first. Shared, like the snapshot's jobs: a
    /// series moves on as a new list, so a source can keep one copy of the current series
    /// for itself and every view of the job, and a snapshot still holding an older view
    /// keeps the older list.
    pub loss: Arc<[LossSample]>,
    /// The metric improves by rising.
    pub metric_rises: bool,
    /// Its moves, oldest first (the most recent [`MOVE_HISTORY`]). Shared, like the loss
    /// series: a source keeps one copy for itself and every view of the job.
    pub moves: Arc<[JobMove]>,
    /// Can checkpoint and restore.
    pub checkpointable: bool,
    /// Submission labels, shared: jobs of one template carry the same ones.
    pub labels: Arc<BTreeMap<String, String>>,
}

/// The job label saying no two of its tasks may share a node (value `true`): its pod
/// template asks for required anti-affinity against the job's own pods per node, or for a
/// host port. The host sets it; policies read it ([`Job::one_task_per_node`]) and the
/// validator refuses a decision that puts two of the job's tasks on one node.
pub const ONE_TASK_PER_NODE_LABEL: &str = "switchyard.dev/one-task-per-node";

impl Job {
    /// Whether no two of this job's tasks may share a node ([`ONE_TASK_PER_NODE_LABEL`]).
    pub fn one_task_per_node(&self) -> bool {
        self.labels
            .get(ONE_TASK_PER_NODE_LABEL)
            .is_some_and(|v| v == "true")
    }

    /// The task named `name`.
    pub fn task(&self, name: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.name == name)
    }

    /// Adds `moved` to the history, dropping the oldest beyond [`MOVE_HISTORY`].
    pub fn record_move(&mut self, moved: JobMove) {
        self.moves = with_move(&self.moves, moved);
    }
}

/// Why the host calls the policy now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "name")]
pub enum Trigger {
    /// The policy's interval elapsed.
    Tick,
    /// A job was submitted.
    JobArrived(String),
    /// A job finished.
    JobFinished(String),
    /// A node changed.
    NodeChanged(String),
    /// A preempted job released its nodes.
    JobPreempted(String),
}

/// Everything a policy sees in one call.
///
/// Nodes and jobs are shared, not owned: a source that knows what it left unchanged
/// (the simulator) hands out the same `Arc` again, so building, diffing, holding and
/// dropping a snapshot costs per changed item, not per item.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Host clock seconds.
    pub time: f64,
    /// Why the call happens.
    pub triggers: Vec<Trigger>,
    /// All nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Active jobs in submission order.
    pub jobs: Vec<Arc<Job>>,
    /// The eligibility sets tasks refer to (empty: every task may run anywhere).
    /// Shared, like nodes and jobs, so an unchanged list is recognised by its pointer.
    #[serde(default)]
    pub node_sets: Arc<Vec<NodeSet>>,
}

impl Snapshot {
    /// The job with id `id`.
    pub fn job(&self, id: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.id == id).map(|j| &**j)
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name).map(|n| &**n)
    }

    /// The node set with id `id`.
    pub fn node_set(&self, id: u32) -> Option<&NodeSet> {
        self.node_sets.iter().find(|s| s.id == id)
    }
}

/// One task bound to one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// Task name within the job.
    pub task: String,
    /// Target node.
    pub node: String,
}

/// What a policy asks the host to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "op")]
pub enum Operation {
    /// Bind pending tasks of a job, all or none.
    Place {
        /// Job id.
        job: String,
        /// Task to node.
        assignments: Vec<Assignment>,
    },
    /// Checkpoint and move a task (or the whole job when `task` is none) to `node`.
    Migrate {
        /// Job id.
        job: String,
        /// One task, or all of them.
        task: Option<String>,
        /// Target node.
        node: String,
        /// Why, as a short tag kept in the job's move history (may be empty).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        purpose: String,
    },
    /// Set a task's CPU weight.
    SetCpuWeight {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
        /// New weight, in (0, 1].
        weight: f64,
    },
    /// Restart the job with `replicas` replicas of its scalable role.
    Scale {
        /// Job id.
        job: String,
        /// New replica count.
        replicas: u32,
        /// Nodes of the added replicas, one per new replica.
        nodes: Vec<String>,
    },
    /// Leave the job waiting.
    Wait {
        /// Job id.
        job: String,
    },
    /// Checkpoint a running job and release its tasks; it waits again.
    Preempt {
        /// Job id.
        job: String,
    },
}

impl Operation {
    /// The job the operation is about.
    pub fn job(&self) -> &str {
        match self {
            Operation::Place { job, .. }
            | Operation::Migrate { job, .. }
            | Operation::SetCpuWeight { job, .. }
            | Operation::Scale { job, .. }
            | Operation::Wait { job }
            | Operation::Preempt { job } => job,
        }
    }

    /// The operation's name in the contract (`place`, `set-cpu-weight`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Place { .. } => "place",
            Operation::Migrate { .. } => "migrate",
            Operation::SetCpuWeight { .. } => "set-cpu-weight",
            Operation::Scale { .. } => "scale",
            Operation::Wait { .. } => "wait",
            Operation::Preempt { .. } => "preempt",
        }
    }
}

/// One operation and the policy's reason for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// What to do.
    #[serde(flatten)]
    pub op: Operation,
    /// Why, for the operator.
    pub reason: String,
}

/// A label the policy puts on a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLabel {
    /// Job id.
    pub job: String,
    /// Label key.
    pub key: String,
    /// Label value.
    pub value: String,
}

/// The policy's answer to one call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Requested operations.
    pub actions: Vec<Action>,
    /// Labels for the operator.
    pub labels: Vec<JobLabel>,
    /// Seconds until the policy wants a tick.
    pub next_call_after: Option<f64>,
    /// Opaque state for the next call.
    #[serde(skip)]
    pub state: Vec<u8>,
}

/// One tunable parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Parameter {
    /// Name.
    pub name: String,
    /// Default value.
    pub default: String,
    /// One-sentence doc.
    pub doc: String,
}

/// Who a policy is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Description {
    /// Policy name.
    pub name: String,
    /// Policy version.
    pub version: String,
    /// One-line summary.
    pub summary: String,
    /// Parameters with defaults and docs.
    pub parameters: Vec<Parameter>,
    /// Whether it is sent jobs' loss series. False: every job's series goes empty, no
    /// loss update is sent, and a job whose only change is its loss series is unchanged
    /// ([`crate::delta::HeldSnapshot::for_policy`]).
    pub reads_loss: bool,
}

/// Parameter values, by name.
pub type Settings = BTreeMap<String, String>;
