//! Carrying out the actions the validator accepted: binding and releasing tasks,
//! placements, migrations, CPU weights, re-scales and preemptions, each restart charged
//! its cost and each move noted in the job's history. It decides nothing: every action
//! comes from a policy through the control loop, and a rejected one never arrives here.

use std::sync::Arc;

use super::Simulator;
use super::state::SimJob;
use switchyard_core::{
    Action, JobMove, JobPhase, MoveKind, Operation, Resources, TaskPhase, with_move,
};

impl Simulator {
    pub(super) fn release(&mut self, node: usize, job: usize, task: usize, requests: Resources) {
        let n = &mut self.nodes[node];
        n.requested = n.requested.saturating_minus(&requests);
        if let Some(pos) = n.tasks.iter().position(|&jt| jt == (job, task)) {
            // Task order on a node does not matter: the share is recomputed from weights.
            n.tasks.swap_remove(pos);
        }
        self.mark_node(node);
    }

    fn bind(&mut self, node: usize, job: usize, task: usize) {
        let requests = self.jobs[job].tasks[task].requests;
        let n = &mut self.nodes[node];
        n.requested = n.requested.plus(&requests);
        n.tasks.push((job, task));
        self.jobs[job].tasks[task].node = Some(node);
        self.mark_node(node);
    }

    fn mark_node(&mut self, node: usize) {
        self.nodes[node].view = None;
        if !self.nodes[node].dirty {
            self.nodes[node].dirty = true;
            self.dirty_nodes.push(node);
        }
    }

    pub(super) fn touch_job(&mut self, job: usize) {
        self.dirty_jobs.push(job);
        let nodes: Vec<usize> = self.jobs[job].tasks.iter().filter_map(|t| t.node).collect();
        for n in nodes {
            self.mark_node(n);
        }
    }

    pub(super) fn restart(&mut self, job: usize, cost: f64) {
        self.settle(job);
        let until = self.now + cost;
        let j = &mut self.jobs[job];
        // A second restart before the first is done overlaps it instead of adding up.
        j.restart_until = Some(j.restart_until.map_or(until, |u| u.max(until)));
        j.phase = JobPhase::Restarting;
        for t in j.tasks.iter_mut().filter(|t| t.node.is_some()) {
            t.phase = TaskPhase::Restarting;
        }
        self.touch_job(job);
    }

    pub(super) fn apply_one(&mut self, action: &Action) {
        let Some(&job) = self.job_index.get(action.op.job()) else {
            return;
        };
        match &action.op {
            Operation::Place { assignments, .. } => {
                let was_whole = self.jobs[job].tasks.iter().all(|t| t.node.is_some());
                let was_waiting = self.jobs[job].tasks.iter().all(|t| t.node.is_none());
                let mut to = Vec::with_capacity(assignments.len());
                for a in assignments {
                    let (Some(t), Some(&n)) = (
                        self.jobs[job].task_index(&a.task),
                        self.node_index.get(&a.node),
                    ) else {
                        continue;
                    };
                    self.bind(n, job, t);
                    to.push(a.node.clone());
                    let restarting = self.jobs[job].restart_until.is_some();
                    let j = &mut self.jobs[job];
                    j.tasks[t].phase = if restarting {
                        TaskPhase::Restarting
                    } else {
                        TaskPhase::Running
                    };
                    if !restarting {
                        j.phase = JobPhase::Running;
                    }
                    j.start_time.get_or_insert(self.now);
                }
                self.touch_job(job);
                self.note_placed(job, was_waiting, to);
                let whole = self.jobs[job].tasks.iter().all(|t| t.node.is_some());
                if whole && !was_whole {
                    // Its containers start (and a preempted job restores its
                    // checkpoint): shown as a restart, charged like one.
                    let restore = if std::mem::take(&mut self.jobs[job].resuming) {
                        self.config.restore_cost
                    } else {
                        0.0
                    };
                    let cost = self.config.start_delay + restore;
                    if cost > 0.0 {
                        self.restart(job, cost);
                    }
                }
            }
            Operation::Migrate {
                task,
                node,
                purpose,
                ..
            } => {
                let Some(&target) = self.node_index.get(node) else {
                    return;
                };
                let moving: Vec<usize> = match task {
                    Some(name) => self.jobs[job].task_index(name).into_iter().collect(),
                    None => (0..self.jobs[job].tasks.len()).collect(),
                };
                let j = &mut self.jobs[job];
                j.view = None;
                let on = |t: usize| j.tasks[t].node.map(|n| self.nodes[n].spec.name.clone());
                let from: Vec<String> = moving.iter().filter_map(|&t| on(t)).collect();
                let to = vec![node.clone(); from.len()];
                self.note_move(job, MoveKind::Migrated, purpose, from, to);
                let j = &mut self.jobs[job];
                let moves: Vec<usize> = moving
                    .into_iter()
                    .filter(|&t| j.tasks[t].node.is_some_and(|n| n != target))
                    .collect();
                if moves.is_empty() {
                    return;
                }
                j.migrations += 1;
                for t in moves {
                    let from = self.jobs[job].tasks[t].node.take().expect("bound");
                    let requests = self.jobs[job].tasks[t].requests;
                    self.release(from, job, t, requests);
                    self.bind(target, job, t);
                }
                self.ask_checkpoint(job, Some(self.config.migration_cost));
            }
            Operation::SetCpuWeight { task, weight, .. } => {
                if let Some(t) = self.jobs[job].task_index(task) {
                    self.jobs[job].tasks[t].cpu_weight = *weight;
                    self.touch_job(job);
                }
            }
            Operation::Scale {
                replicas, nodes, ..
            } => {
                self.scale(job, *replicas, nodes);
            }
            Operation::Wait { .. } => {}
            Operation::Preempt { .. } => self.preempt(job),
        }
    }

    /// The names of the nodes `job`'s tasks are on, in task order.
    fn bound_nodes(&self, job: usize) -> Vec<String> {
        self.jobs[job]
            .tasks
            .iter()
            .filter_map(|t| t.node.map(|n| self.nodes[n].spec.name.clone()))
            .collect()
    }

    fn note_move(
        &mut self,
        job: usize,
        kind: MoveKind,
        purpose: &str,
        from_nodes: Vec<String>,
        to_nodes: Vec<String>,
    ) {
        let moved = JobMove {
            time: self.now,
            kind,
            purpose: purpose.to_string(),
            from_nodes,
            to_nodes,
        };
        let j = &mut self.jobs[job];
        j.moves = with_move(&j.moves, moved);
    }

    /// Records a placement from waiting; tasks placed one by one in the same round join
    /// that one move.
    fn note_placed(&mut self, job: usize, was_waiting: bool, to: Vec<String>) {
        let now = self.now;
        let moves = &mut self.jobs[job].moves;
        match moves.last() {
            Some(last) if !was_waiting && last.kind == MoveKind::Placed && last.time == now => {
                let last = Arc::make_mut(moves).last_mut().expect("the last move");
                // Kept for the job's life: sized exactly, not to the doubled capacity
                // `extend` would reserve.
                last.to_nodes.reserve_exact(to.len());
                last.to_nodes.extend(to);
            }
            _ if was_waiting && !to.is_empty() => {
                self.note_move(job, MoveKind::Placed, "", Vec::new(), to);
            }
            _ => {}
        }
    }

    /// Starts saving `job`'s checkpoint: it holds its nodes and makes no progress until
    /// the checkpoint is over (`checkpoint`), then releases them
    /// ([`Simulator::release_preempted`]).
    fn preempt(&mut self, job: usize) {
        let from = self.bound_nodes(job);
        self.note_move(job, MoveKind::Preempted, "", from, Vec::new());
        let j = &mut self.jobs[job];
        j.preemptions += 1;
        j.checkpointing = true;
        self.ask_checkpoint(job, None);
    }

    /// The checkpoint of a preempted job is saved: every task leaves its node and the
    /// job waits again, to restore when it is placed whole.
    pub(super) fn release_preempted(&mut self, job: usize) {
        self.settle(job);
        let bound: Vec<(usize, usize, Resources)> = self.jobs[job]
            .tasks
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.node.map(|n| (n, i, t.requests)))
            .collect();
        for (node, task, requests) in bound {
            self.release(node, job, task, requests);
            let t = &mut self.jobs[job].tasks[task];
            t.node = None;
            t.phase = TaskPhase::Pending;
            t.cores = 0.0;
        }
        let j = &mut self.jobs[job];
        j.checkpointing = false;
        j.resuming = true;
        j.restart_until = None;
        j.phase = JobPhase::Waiting;
        self.touch_job(job);
    }

    fn scale(&mut self, job: usize, replicas: u32, nodes: &[String]) {
        let current = self.jobs[job].replicas;
        if replicas == current {
            return;
        }
        let from = self.bound_nodes(job);
        if replicas > current {
            for (k, node) in nodes.iter().enumerate() {
                let Some(&n) = self.node_index.get(node) else {
                    continue;
                };
                let t = self.jobs[job].add_replica(current + k as u32);
                self.bind(n, job, t);
            }
        } else {
            while self.jobs[job].replicas > replicas {
                let Some((task, node, requests)) = self.jobs[job].remove_last_replica() else {
                    break;
                };
                if let Some(node) = node {
                    self.release(node, job, task, requests);
                }
                self.jobs[job].tasks.remove(task);
                // Later tasks of the job moved down by one; so must the nodes' references.
                for n in &mut self.nodes {
                    for jt in n.tasks.iter_mut().filter(|jt| jt.0 == job && jt.1 > task) {
                        jt.1 -= 1;
                    }
                }
            }
        }
        self.jobs[job].rescales += 1;
        let to = self.bound_nodes(job);
        self.note_move(job, MoveKind::Rescaled, "", from, to);
        self.ask_checkpoint(job, Some(self.config.rescale_cost));
    }
}

impl SimJob {
    fn task_index(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.name == name)
    }
}
