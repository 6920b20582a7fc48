//! The running account of one decision: the cluster as the actions accepted so far leave
//! it (each node's free room, the tasks placed, the jobs moved, the disruptions
//! admitted), with the checks every kind of action shares: room on a node, charged all
//! at once or not at all; a task's eligible nodes; one task of a job per node. It owns
//! the bookkeeping; what each kind of action must satisfy is in `placement` and `moves`.

use std::collections::{HashMap, HashSet};

use rustc_hash::{FxHashMap, FxHashSet};

use super::rejection::Rejection;
use crate::disruption::Gate;
use crate::model::{Decision, Job, Node, Resources, Snapshot, Task};

/// The cluster as the accepted actions so far leave it. Nodes and the jobs the decision
/// names are indexed by name once, so checking a decision is linear in its actions,
/// even with thousands of placements on thousands of nodes; a round that touches two
/// jobs of 25,000 indexes two.
pub(super) struct Account<'a> {
    pub(super) jobs: FxHashMap<&'a str, &'a Job>,
    pub(super) nodes: FxHashMap<&'a str, &'a Node>,
    /// Free room of the nodes the accepted actions changed; the others have what the
    /// snapshot says.
    pub(super) free: FxHashMap<&'a str, Resources>,
    pub(super) placed: HashSet<(&'a str, &'a str)>,
    /// Per job, (task, node) of the placements accepted so far in this decision.
    pub(super) placed_on: FxHashMap<&'a str, Vec<(&'a str, &'a str)>>,
    /// Jobs with a move accepted so far in this decision.
    pub(super) moved: FxHashSet<&'a str>,
    pub(super) snapshot: &'a Snapshot,
    /// The nodes of each eligibility set a checked task named, by set id.
    pub(super) eligible: FxHashMap<u32, FxHashSet<&'a str>>,
    /// The disruption budget of this decision.
    pub(super) disruptions: Gate<'a>,
}

/// (task, node) of every task of `job` that is on a node.
pub(super) fn where_tasks_run(job: &Job) -> impl Iterator<Item = (&str, &str)> {
    job.tasks
        .iter()
        .filter_map(|t| Some((t.name.as_str(), t.node.as_deref()?)))
}

/// Refuses a task of `moving` (task, node) on a node where another task of job `job_id`
/// stays (`staying`) or goes. Tasks that already share a node are left alone.
pub(super) fn one_per_node<'n>(
    job_id: &str,
    staying: impl Iterator<Item = (&'n str, &'n str)>,
    moving: impl Iterator<Item = (&'n str, &'n str)>,
) -> Result<(), Rejection> {
    let mut taken: FxHashMap<&str, &str> = FxHashMap::default();
    for (task, node) in staying {
        taken.entry(node).or_insert(task);
    }
    for (task, node) in moving {
        if let Some(other) = taken.insert(node, task)
            && other != task
        {
            return Err(Rejection::SharedNode {
                job: job_id.into(),
                node: node.into(),
                tasks: format!("`{other}` and `{task}`"),
            });
        }
    }
    Ok(())
}

fn show(r: &Resources) -> String {
    format!(
        "{}m CPU, {} B memory, {} GPU",
        r.cpu_millis, r.memory_bytes, r.gpus
    )
}

impl<'a> Account<'a> {
    pub(super) fn new(snapshot: &'a Snapshot, decision: &Decision, disruptions: Gate<'a>) -> Self {
        let named: FxHashSet<&str> = decision.actions.iter().map(|a| a.op.job()).collect();
        // No action, no job to index (and no id of the snapshot hashed).
        let jobs = if named.is_empty() {
            &[][..]
        } else {
            &snapshot.jobs[..]
        };
        Self {
            jobs: jobs
                .iter()
                .filter(|j| named.contains(j.id.as_str()))
                .map(|j| (j.id.as_str(), &**j))
                .rev()
                .collect(),
            nodes: snapshot
                .nodes
                .iter()
                .map(|n| (n.name.as_str(), &**n))
                .rev()
                .collect(),
            free: FxHashMap::default(),
            placed: HashSet::new(),
            placed_on: FxHashMap::default(),
            moved: FxHashSet::default(),
            snapshot,
            eligible: FxHashMap::default(),
            disruptions,
        }
    }

    /// Refuses `node` for `task` when the task's eligibility set leaves it out.
    pub(super) fn check_eligible(
        &mut self,
        job: &str,
        task: &'a Task,
        node: &str,
    ) -> Result<(), Rejection> {
        let Some(set) = task.eligible else {
            return Ok(());
        };
        let snapshot = self.snapshot;
        let nodes = self.eligible.entry(set).or_insert_with(|| {
            snapshot
                .node_set(set)
                .map(|s| {
                    s.nodes
                        .iter()
                        .filter_map(|&i| snapshot.nodes.get(i as usize))
                        .map(|n| n.name.as_str())
                        .collect()
                })
                .unwrap_or_default()
        });
        if nodes.contains(node) {
            Ok(())
        } else {
            Err(Rejection::NotEligible {
                job: job.into(),
                task: task.name.clone(),
                node: node.into(),
            })
        }
    }

    pub(super) fn job(&self, id: &str) -> Option<&'a Job> {
        self.jobs.get(id).copied()
    }

    pub(super) fn node_free(&self, node: &str) -> Result<Resources, Rejection> {
        let n = self.nodes.get(node).ok_or_else(|| Rejection::UnknownNode {
            node: node.to_string(),
        })?;
        if !n.schedulable {
            return Err(Rejection::NodeUnschedulable {
                node: node.to_string(),
            });
        }
        Ok(self.free_now(n))
    }

    pub(super) fn free_now(&self, node: &Node) -> Resources {
        match self.free.get(node.name.as_str()) {
            Some(free) => *free,
            None => node.allocatable.saturating_minus(&node.requested),
        }
    }

    /// Charges `(node, request)` pairs all at once or not at all.
    pub(super) fn charge_all(
        &mut self,
        job: &str,
        charges: &[(&'a str, &'a str, Resources)],
    ) -> Result<(), Rejection> {
        let mut trial: HashMap<&'a str, Resources> = HashMap::new();
        for (task, node, request) in charges {
            let free = match trial.get(node) {
                Some(f) => *f,
                None => self.node_free(node)?,
            };
            if !free.covers(request) {
                return Err(Rejection::NodeFull {
                    job: job.into(),
                    task: task.to_string(),
                    node: node.to_string(),
                    requested: show(request),
                    free: show(&free),
                });
            }
            trial.insert(node, free.saturating_minus(request));
        }
        self.free.extend(trial);
        Ok(())
    }
}
