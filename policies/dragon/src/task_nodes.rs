//! Where each job's bound tasks run, as node positions, and which task a new replica
//! copies, kept between the calls of a kept instance.
//!
//! Step 3 (scale-up) lists the running jobs by the nodes their tasks are on: a node
//! name looked up per task, every round, ten thousand lookups on a 1,000-node cluster
//! and, in Wasm, most of DRAGON's round (`docs/performance.md`, "Decision rounds").
//! A task's position only changes when its job does (the host's change names the job)
//! or the nodes' order does, so a kept instance works positions out for the jobs the
//! change named alone ([`Follow`]), and for every job when the nodes' order changed. A
//! policy called on a whole snapshot (a fresh instance, a native build) works them out
//! for every job. The task a replica copies (the first of the scalable
//! role, found by comparing role names) is kept the same way.

use std::cell::RefCell;

use switchyard_policy_sdk::{
    Job, Snapshot, Task,
    changes::{self, Follow},
    cluster::{Ledger, NodeOrder},
};

thread_local! {
    /// What the last kept call worked out, and the node order it holds under.
    static KEPT: RefCell<Option<(NodeOrder, Follow<Placed>)>> = const { RefCell::new(None) };
}

/// One job's tasks as step 3 reads them.
#[derive(Debug, Default)]
pub struct Placed {
    /// The node positions of its bound tasks, in task order (a task on a node the
    /// ledger does not list is left out).
    pub nodes: Vec<u32>,
    /// Which of its tasks a new replica copies ([`replica_template_at`]).
    pub template: Option<u32>,
}

/// [`Placed`] for every job of the snapshot.
pub enum TaskNodes {
    /// Followed from the previous kept call; [`TaskNodes::keep`] hands them on.
    Kept(NodeOrder, Follow<Placed>),
    /// Worked out for this call alone.
    Fresh(Vec<Placed>),
}

impl TaskNodes {
    /// The positions for `snapshot`'s jobs under `ledger`'s nodes.
    pub fn of(snapshot: &Snapshot, ledger: &Ledger) -> Self {
        if !changes::deciding_kept_call() {
            return Self::Fresh(snapshot.jobs.iter().map(|j| placed(j, ledger)).collect());
        }
        let order = ledger.node_order();
        let mut follow = KEPT
            .with(|kept| kept.borrow_mut().take())
            .filter(|(kept_order, _)| *kept_order == order)
            .map(|(_, follow)| follow)
            // Another node order: every kept position may be wrong; match every job.
            .unwrap_or_default();
        follow.follow(snapshot, |_, job, _| placed(job, ledger), drop);
        Self::Kept(order, follow)
    }

    /// The job at `at` in the snapshot.
    pub fn of_job(&self, at: usize) -> &Placed {
        match self {
            Self::Kept(_, follow) => &follow.values()[at],
            Self::Fresh(all) => &all[at],
        }
    }

    /// Keeps followed positions for the next call.
    pub fn keep(self) {
        if let Self::Kept(order, follow) = self {
            KEPT.with(|kept| *kept.borrow_mut() = Some((order, follow)));
        }
    }
}

/// `job`'s tasks under `ledger`'s nodes.
fn placed(job: &Job, ledger: &Ledger) -> Placed {
    Placed {
        nodes: job
            .tasks
            .iter()
            .filter_map(|t| t.node.as_deref())
            .filter_map(|node| ledger.position(node))
            .map(|at| at as u32)
            .collect(),
        template: replica_template_at(job).map(|at| at as u32),
    }
}

/// A task of `job`'s scalable role: what one more replica asks and where it may run.
pub fn replica_template(job: &Job) -> Option<&Task> {
    replica_template_at(job).map(|at| &job.tasks[at])
}

/// The position of [`replica_template`] among `job`'s tasks.
pub fn replica_template_at(job: &Job) -> Option<usize> {
    job.tasks.iter().position(|t| t.role == job.replicas.role)
}

#[cfg(test)]
mod tests {
    use switchyard_policy_sdk::cluster::ResourcesExt;
    use switchyard_policy_sdk::testing::*;
    use switchyard_policy_sdk::{Decision, Operation, TaskPhase};

    use crate::policy::decide;

    /// `s` after the host carried out `d`: placements as [`applied`] does them, and each
    /// scale-up's new replicas (copies of the role's first task) running on their nodes.
    fn host(s: &switchyard_policy_sdk::Snapshot, d: &Decision) -> switchyard_policy_sdk::Snapshot {
        let mut s = applied(s, d);
        for action in &d.actions {
            let Operation::Scale(scaling) = &action.op else {
                continue;
            };
            let job = s.jobs.iter_mut().find(|j| j.id == scaling.job).unwrap();
            let template = super::replica_template(job).unwrap().clone();
            for node in &scaling.nodes {
                let mut task = template.clone();
                task.name = format!("{}-{}", job.replicas.role, job.replicas.current);
                task.node = Some(node.clone());
                task.phase = TaskPhase::Running;
                job.replicas.current += 1;
                let n = s.nodes.iter_mut().find(|n| n.name == *node).unwrap();
                n.requested = n.requested.plus(&task.requests);
                job.tasks.push(task);
            }
        }
        s
    }

    /// A kept instance, which keeps the positions of unchanged jobs' tasks, against a
    /// fresh one: the same scale-ups when a node before theirs leaves (every position
    /// after it moves, while the jobs stay as they were), when jobs come and go, and
    /// when they grow.
    #[test]
    fn a_kept_instance_scales_up_onto_the_nodes_a_fresh_one_does() {
        let elastic = |id: &str, node: &str| {
            job(id)
                .requests(1000, 1)
                .distributed(0, 1, 1, 4)
                .running_on(node)
        };
        let nodes = vec![
            node("n0", 16000).gpus(4),
            node("n1", 16000).gpus(4),
            node("n2", 16000).gpus(4),
        ];
        let round = snapshot(0.0, nodes, vec![elastic("a", "n1"), elastic("b", "n2")]);
        let changes: [Change; 5] = [
            &|s| {
                s.time = 10.0;
                s.nodes.remove(0);
            },
            &|s| s.time = 70.0,
            &|s| {
                s.time = 80.0;
                s.jobs.push(elastic("c", "n1").submitted_at(80.0));
                let c = s.jobs.last_mut().unwrap();
                c.phase = switchyard_policy_sdk::JobPhase::Waiting;
                c.tasks[0].node = None;
                c.tasks[0].phase = TaskPhase::Pending;
            },
            &|s| {
                s.time = 90.0;
                finish(s, "a");
            },
            &|s| s.time = 200.0,
        ];
        let mut scaled = Vec::new();
        kept_against_fresh(
            round,
            Vec::new(),
            &changes,
            |s, blob| decide(&[], s, blob).unwrap(),
            |s, blob, _| decide(&[], s, blob).unwrap(),
            host,
            |s, kept| {
                for action in &kept.actions {
                    if let Operation::Scale(scaling) = &action.op {
                        scaled.push(format!("{} {} {:?}", s.time, scaling.job, scaling.nodes));
                    }
                }
            },
        );
        // The scale-ups the run is about happened: after mu, each job on its own node.
        assert_eq!(
            scaled,
            [r#"70 a ["n1", "n1", "n1"]"#, r#"70 b ["n2", "n2", "n2"]"#]
        );
    }
}
