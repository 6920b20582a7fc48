//! What a job's tasks ask for and where they are: its pending tasks, their requests, its
//! nodes, and whether its tasks may share a node. Reads a job only; it must not hold
//! node capacity (the ledger's).

use super::resources::ResourcesExt as _;
use crate::{Job, Resources, Task, TaskPhase};

/// The job label the host sets (value `true`) when no two of a job's tasks may share a
/// node: its pod template asks for required anti-affinity against the job's own pods per
/// node, or for a host port. The host refuses a decision that puts two of them on one.
pub const ONE_TASK_PER_NODE_LABEL: &str = "switchyard.dev/one-task-per-node";

/// Whether no two tasks of `job` may share a node ([`ONE_TASK_PER_NODE_LABEL`]).
pub fn one_task_per_node(job: &Job) -> bool {
    job.labels
        .iter()
        .any(|l| l.key == ONE_TASK_PER_NODE_LABEL && l.value == "true")
}

/// The tasks of `job` not yet on a node.
pub fn pending_tasks(job: &Job) -> Vec<&Task> {
    job.tasks
        .iter()
        .filter(|t| t.phase == TaskPhase::Pending && t.node.is_none())
        .collect()
}

/// Whether `job` has a task not yet on a node: [`pending_tasks`] is not empty, asked
/// without collecting them (a round asks it of every job in a long queue).
pub fn has_pending_tasks(job: &Job) -> bool {
    job.tasks
        .iter()
        .any(|t| t.phase == TaskPhase::Pending && t.node.is_none())
}

/// Sum of the requests of `tasks`.
pub fn total_requests<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Resources {
    tasks
        .into_iter()
        .fold(Resources::zero(), |acc, t| acc.plus(&t.requests))
}

/// Names of the nodes `job` has tasks on, without repeats, in task order.
pub fn nodes_of(job: &Job) -> Vec<&str> {
    let mut nodes: Vec<&str> = Vec::new();
    for node in job.tasks.iter().filter_map(|t| t.node.as_deref()) {
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    nodes
}
