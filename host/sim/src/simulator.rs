//! The discrete-event cluster simulator, one implementation of [`control::Cluster`].
//!
//! Virtual time jumps from event to event (arrivals, completions, evaluation reports,
//! restarts finishing); between events every job progresses at a constant rate, so
//! progress is advanced analytically, never in fixed steps. Rates change only when an
//! event or an applied action touches a node: then that node's CPU is re-shared
//! ([`share::water_fill`]) and the rates of the jobs on it are recomputed. Everything a
//! policy may decide goes through [`control::Cluster::apply`]; the simulator makes no
//! scheduling decision of its own.
//!
//! A snapshot shows each node and job as an `Arc` the simulator keeps until the item
//! changes (`view`, cleared wherever its state moves), so a round's snapshot is built,
//! diffed and dropped at the cost of what changed; debug builds check every kept view
//! against a fresh one.
//!
//! [`control::Cluster`]: switchyard_control::Cluster
//! [`control::Cluster::apply`]: switchyard_control::Cluster::apply

pub(crate) mod curve;
mod events;
mod faults;
pub(crate) mod goodput;
#[cfg(test)]
mod kept_bytes;
pub(crate) mod share;
mod spec;
mod state;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use rand::SeedableRng;
use rand_distr::{Distribution, Normal};
use rand_pcg::Pcg64;
use serde::Serialize;

use events::{EventKind, EventQueue};
pub(crate) use faults::Faults;
use faults::Injector;
pub use spec::{JobSpec, NodeSpec, RoleSpec, Scenario, SimConfig, Speed};
pub(crate) use state::table_rate;
use state::{JobState, SimJob, SimNode};
use switchyard_control::{ActionOutcome, Advance, Cluster};
use switchyard_core::{
    Action, EligibilitySets, Job, JobLabel, JobMove, JobPhase, LossSample, MoveKind, Node,
    Operation, Replicas, Resources, Snapshot, Task, TaskPhase, Trigger, with_move,
};

/// Evaluation samples a job keeps (the most recent ones).
pub(crate) const LOSS_HISTORY: usize = 32;

/// One point of the utilisation time series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct UtilPoint {
    /// Virtual time, seconds.
    pub time: f64,
    /// Cores in use / cores in the cluster.
    pub cpu: f64,
    /// GPUs allocated to running jobs / GPUs in the cluster.
    pub gpu: f64,
}

/// What happened to one job in a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobOutcome {
    /// Job id.
    pub id: String,
    /// Submission time.
    pub submit_time: f64,
    /// When its first task started, if it did.
    pub start_time: Option<f64>,
    /// When it finished, if it did.
    pub finish_time: Option<f64>,
    /// Held resources at the end without finishing (a stranded partial gang, or stuck).
    pub deadlocked: bool,
    /// Migrations applied to it.
    pub migrations: u32,
    /// Re-scales applied to it.
    pub rescales: u32,
    /// Preemptions applied to it.
    pub preemptions: u32,
    /// The labels the policy put on it last.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_labels: BTreeMap<String, String>,
}

/// The simulated cluster.
pub struct Simulator {
    config: SimConfig,
    now: f64,
    nodes: Vec<SimNode>,
    node_index: HashMap<String, usize>,
    jobs: Vec<SimJob>,
    job_index: HashMap<String, usize>,
    next_arrival: usize,
    /// `(time, job)` at which tasks of a role created after submission appear, soonest
    /// last (popped from the end).
    creations: Vec<(f64, usize)>,
    active: Vec<usize>,
    finished: usize,
    queue: EventQueue,
    rng: Pcg64,
    /// Decides which accepted actions fail (`SimConfig::faults`).
    faults: Injector,
    total_cores: f64,
    total_gpus: f64,
    cores_in_use: f64,
    gpus_in_use: f64,
    cpu_area: f64,
    gpu_area: f64,
    series: Vec<UtilPoint>,
    dirty_nodes: Vec<usize>,
    dirty_jobs: Vec<usize>,
    /// Where each distinct set of placement rules may run (the nodes never change).
    eligibility: EligibilitySets,
}

impl Simulator {
    /// A cluster at time 0 with `scenario`'s nodes; its jobs arrive at their times.
    pub fn new(scenario: Scenario) -> Self {
        let nodes: Vec<SimNode> = scenario.nodes.into_iter().map(SimNode::new).collect();
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.spec.name.clone(), i))
            .collect();
        let mut jobs: Vec<SimJob> = scenario.jobs.into_iter().map(SimJob::new).collect();
        let mut distinct_labels = HashSet::new();
        for job in &mut jobs {
            match distinct_labels.get(&job.labels) {
                Some(shared) => job.labels = Arc::clone(shared),
                None => {
                    distinct_labels.insert(Arc::clone(&job.labels));
                }
            }
        }
        // Arrival order is submission order; a stable sort keeps ties in file order.
        jobs.sort_by(|a, b| a.spec.submit_time.total_cmp(&b.spec.submit_time));
        let job_index = jobs
            .iter()
            .enumerate()
            .map(|(i, j)| (j.spec.id.clone(), i))
            .collect();
        let total_cores = nodes
            .iter()
            .map(|n| n.spec.allocatable.cpu_millis as f64 / 1000.0)
            .sum();
        let total_gpus = nodes.iter().map(|n| n.spec.allocatable.gpus as f64).sum();
        Self {
            rng: Pcg64::seed_from_u64(scenario.config.seed),
            faults: Injector::new(scenario.config.faults, scenario.config.seed),
            config: scenario.config,
            now: 0.0,
            nodes,
            node_index,
            jobs,
            job_index,
            next_arrival: 0,
            creations: Vec::new(),
            active: Vec::new(),
            finished: 0,
            queue: EventQueue::default(),
            total_cores,
            total_gpus,
            cores_in_use: 0.0,
            gpus_in_use: 0.0,
            cpu_area: 0.0,
            gpu_area: 0.0,
            series: vec![UtilPoint {
                time: 0.0,
                cpu: 0.0,
                gpu: 0.0,
            }],
            dirty_nodes: Vec::new(),
            dirty_jobs: Vec::new(),
            eligibility: EligibilitySets::default(),
        }
    }

    /// Accepted actions made to fail so far (`SimConfig::faults`).
    pub fn faults_injected(&self) -> u64 {
        self.faults.injected()
    }

    /// The knobs it runs with.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Jobs in the scenario.
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    /// Every job's outcome, in submission order.
    pub fn outcomes(&self) -> Vec<JobOutcome> {
        self.jobs
            .iter()
            .map(|j| JobOutcome {
                id: j.spec.id.clone(),
                submit_time: j.spec.submit_time,
                start_time: j.start_time,
                finish_time: j.finish_time,
                deadlocked: j.state == JobState::Active && j.tasks.iter().any(|t| t.node.is_some()),
                migrations: j.migrations,
                rescales: j.rescales,
                preemptions: j.preemptions,
                policy_labels: j.policy_labels.clone(),
            })
            .collect()
    }

    /// Mean CPU and GPU utilisation from time 0 to `until` (the makespan).
    pub fn mean_utilisation(&self, until: f64) -> (f64, f64) {
        if until <= 0.0 {
            return (0.0, 0.0);
        }
        let cpu = if self.total_cores > 0.0 {
            self.cpu_area / (self.total_cores * until)
        } else {
            0.0
        };
        let gpu = if self.total_gpus > 0.0 {
            self.gpu_area / (self.total_gpus * until)
        } else {
            0.0
        };
        (cpu.min(1.0), gpu.min(1.0))
    }

    /// The utilisation after every change, oldest first.
    pub fn utilisation_series(&self) -> &[UtilPoint] {
        &self.series
    }

    /// Current progress rate (work/s) of the job `id`, if it is active.
    pub fn job_rate(&self, id: &str) -> Option<f64> {
        let j = &self.jobs[*self.job_index.get(id)?];
        (j.state == JobState::Active).then_some(j.rate)
    }

    /// Cores each running task of the job `id` gets now, by task name.
    pub fn task_cores(&self, id: &str) -> Option<Vec<(String, f64)>> {
        let j = &self.jobs[*self.job_index.get(id)?];
        Some(j.tasks.iter().map(|t| (t.name.clone(), t.cores)).collect())
    }

    /// When the job `id` finished.
    pub fn finish_time(&self, id: &str) -> Option<f64> {
        self.jobs[*self.job_index.get(id)?].finish_time
    }

    /// Whether the job `id` has arrived and not finished (it is in the snapshot).
    pub fn is_active(&self, id: &str) -> bool {
        self.job_index
            .get(id)
            .is_some_and(|&j| self.jobs[j].state == JobState::Active)
    }

    /// The phase of every active job, in snapshot order: counting them this way costs
    /// no allocation, unlike a snapshot.
    pub fn active_phases(&self) -> impl Iterator<Item = JobPhase> + '_ {
        self.active.iter().map(|&j| self.jobs[j].phase)
    }

    /// Each node's allocatable and requested resources, in snapshot order.
    pub fn node_resources(&self) -> impl Iterator<Item = (Resources, Resources)> + '_ {
        self.nodes.iter().map(|n| (n.spec.allocatable, n.requested))
    }

    /// Moves the clock to `t`, accumulating utilisation; progress is settled lazily.
    fn move_to(&mut self, t: f64) {
        if t > self.now {
            let dt = t - self.now;
            self.cpu_area += self.cores_in_use * dt;
            self.gpu_area += self.gpus_in_use * dt;
            self.now = t;
        }
    }

    fn next_event_time(&mut self) -> Option<f64> {
        let arrival = self.jobs.get(self.next_arrival).map(|j| j.spec.submit_time);
        let creation = self.creations.last().map(|c| c.0);
        let jobs = &self.jobs;
        let queued = self
            .queue
            .peek_valid(|job, version| jobs[job].version == version);
        [arrival, creation, queued]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
    }

    /// Handles everything due at the current time; returns the triggers for the policy.
    fn process_due(&mut self) -> Vec<Trigger> {
        let mut triggers = Vec::new();
        while let Some(j) = self.jobs.get(self.next_arrival)
            && j.spec.submit_time <= self.now
        {
            let index = self.next_arrival;
            self.next_arrival += 1;
            self.jobs[index].state = JobState::Active;
            self.active.push(index);
            triggers.push(Trigger::JobArrived(self.jobs[index].spec.id.clone()));
            let times = self.jobs[index].creation_times();
            if !times.is_empty() {
                self.creations.extend(times.into_iter().map(|t| (t, index)));
                self.creations.sort_by(|a, b| b.0.total_cmp(&a.0));
            }
        }
        // Tasks created after their job's submission: the WIT has no pod-created
        // trigger, so the policy hears of them as the job arriving again (its new pods
        // join the queue), which is when a scheduler would place them.
        while let Some(&(t, index)) = self.creations.last()
            && t <= self.now
        {
            self.creations.pop();
            if self.jobs[index].state != JobState::Active {
                continue;
            }
            // Its new tasks show from now on.
            self.jobs[index].view = None;
            let arrived = Trigger::JobArrived(self.jobs[index].spec.id.clone());
            if !triggers.contains(&arrived) {
                triggers.push(arrived);
            }
        }
        while let Some((job, kind)) = {
            let jobs = &self.jobs;
            self.queue
                .pop_due(self.now, |job, version| jobs[job].version == version)
        } {
            match kind {
                EventKind::Completion => {
                    self.finish(job);
                    triggers.push(Trigger::JobFinished(self.jobs[job].spec.id.clone()));
                }
                EventKind::Evaluation => self.evaluate(job),
                EventKind::RateChange => {
                    self.settle(job);
                    let j = &mut self.jobs[job];
                    // Settling in floating point may stop a hair short of the epoch's
                    // end, which would ask for the same change again.
                    if let Some(until) = j.rate_until {
                        j.work_done = j.work_done.max(until);
                    }
                    self.dirty_jobs.push(job);
                }
                EventKind::RestartDone if self.jobs[job].checkpointing => {
                    self.release_preempted(job);
                    triggers.push(Trigger::JobPreempted(self.jobs[job].spec.id.clone()));
                }
                EventKind::RestartDone => {
                    let j = &mut self.jobs[job];
                    j.restart_until = None;
                    j.phase = JobPhase::Running;
                    for t in j.tasks.iter_mut().filter(|t| t.node.is_some()) {
                        t.phase = TaskPhase::Running;
                    }
                    self.touch_job(job);
                }
            }
        }
        triggers
    }

    fn finish(&mut self, job: usize) {
        self.settle(job);
        let j = &mut self.jobs[job];
        j.work_done = j.spec.work;
        j.finish_time = Some(self.now);
        // Nobody asks a finished job's history; a long trace would keep it all.
        j.moves = Arc::default();
        j.state = JobState::Finished;
        j.view = None;
        j.rate = 0.0;
        j.version += 1;
        // `recompute` skips finished jobs, so their GPUs leave the busy count here.
        let freed_gpus = std::mem::take(&mut j.gpus_busy);
        self.gpus_in_use -= freed_gpus;
        let placed: Vec<(usize, usize, Resources)> = j
            .tasks
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.node.map(|n| (n, i, t.requests)))
            .collect();
        for t in &mut j.tasks {
            t.node = None;
            t.cores = 0.0;
        }
        for (n, t, r) in placed {
            self.release(n, job, t, r);
        }
        self.active.retain(|&a| a != job);
        self.finished += 1;
    }

    fn release(&mut self, node: usize, job: usize, task: usize, requests: Resources) {
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

    fn touch_job(&mut self, job: usize) {
        self.dirty_jobs.push(job);
        let nodes: Vec<usize> = self.jobs[job].tasks.iter().filter_map(|t| t.node).collect();
        for n in nodes {
            self.mark_node(n);
        }
    }

    /// Brings a job's work up to now at its current rate.
    fn settle(&mut self, job: usize) {
        let now = self.now;
        let j = &mut self.jobs[job];
        j.work_done = (j.work_done + j.rate * (now - j.settled_at)).min(j.spec.work);
        j.settled_at = now;
    }

    fn evaluate(&mut self, job: usize) {
        self.settle(job);
        let now = self.now;
        let j = &mut self.jobs[job];
        if let Some(curve) = &j.spec.curve {
            let p = j.work_done / j.spec.work;
            let clean = curve.value(p);
            let noise = if j.spec.noise > 0.0 {
                Normal::new(0.0, j.spec.noise).map_or(0.0, |n| n.sample(&mut self.rng))
            } else {
                0.0
            };
            let sample = LossSample {
                time: now,
                step: j.work_done.round() as u64,
                value: clean * (1.0 + noise),
            };
            // A new list rather than the old one changed: the job's views (and a
            // snapshot a policy instance still holds) share the old one.
            let kept = &j.loss[j.loss.len().saturating_sub(LOSS_HISTORY - 1)..];
            j.loss = kept.iter().copied().chain([sample]).collect();
        }
        j.next_eval += j.spec.eval_every;
        self.dirty_jobs.push(job);
    }

    /// Re-shares dirty nodes and recomputes the rates of the jobs on them.
    fn recompute(&mut self) {
        let mut jobs = std::mem::take(&mut self.dirty_jobs);
        for node in std::mem::take(&mut self.dirty_nodes) {
            self.nodes[node].dirty = false;
            let demands: Vec<(f64, f64)> = self.nodes[node]
                .tasks
                .iter()
                .map(|&(j, t)| {
                    let job = &self.jobs[j];
                    let task = &job.tasks[t];
                    let demand = if job.progressing() {
                        task.max_cores
                    } else {
                        0.0
                    };
                    (demand, task.cpu_weight)
                })
                .collect();
            let capacity = self.nodes[node].spec.allocatable.cpu_millis as f64 / 1000.0;
            let shares = share::water_fill(capacity, &demands);
            let cpu_active = self.nodes[node]
                .tasks
                .iter()
                .zip(&demands)
                .filter(|&(&(j, _), d)| d.0 > 0.0 && self.jobs[j].cpu_bound())
                .count();
            let efficiency =
                1.0 / (1.0 + self.config.interference * cpu_active.saturating_sub(1) as f64);
            let used: f64 = shares.iter().sum();
            self.cores_in_use += used - self.nodes[node].cores_in_use;
            self.nodes[node].cores_in_use = used;
            let placed = self.nodes[node].tasks.clone();
            for (&(j, t), share) in placed.iter().zip(shares) {
                let task = &mut self.jobs[j].tasks[t];
                task.cores = share;
                task.efficiency = efficiency;
                jobs.push(j);
            }
        }
        jobs.sort_unstable();
        jobs.dedup();
        let mut gpus_delta = 0.0;
        for job in jobs {
            // Touched, re-shared or evaluated: its view is out of date.
            self.jobs[job].view = None;
            if self.jobs[job].state != JobState::Active {
                continue;
            }
            self.settle(job);
            let old_gpus = self.jobs[job].gpus_busy;
            let j = &mut self.jobs[job];
            (j.rate, j.rate_until) = j.compute_rate();
            j.gpus_busy = if j.progressing() {
                j.tasks
                    .iter()
                    .filter(|t| t.node.is_some())
                    .map(|t| t.requests.gpus as f64)
                    .sum()
            } else {
                0.0
            };
            gpus_delta += j.gpus_busy - old_gpus;
            j.version += 1;
            let version = j.version;
            if let Some(until) = j.restart_until {
                self.queue.push(until, job, version, EventKind::RestartDone);
            }
            if j.rate > 0.0 {
                let left = (j.spec.work - j.work_done).max(0.0);
                self.queue.push(
                    self.now + left / j.rate,
                    job,
                    version,
                    EventKind::Completion,
                );
                if j.spec.curve.is_some() && j.next_eval < j.spec.work {
                    let due = self.now + (j.next_eval - j.work_done).max(0.0) / j.rate;
                    self.queue.push(due, job, version, EventKind::Evaluation);
                }
                if let Some(until) = j.rate_until {
                    let due = self.now + (until - j.work_done).max(0.0) / j.rate;
                    self.queue.push(due, job, version, EventKind::RateChange);
                }
            }
        }
        self.gpus_in_use += gpus_delta;
        let jobs = &self.jobs;
        self.queue
            .drop_stale(|job, version| jobs[job].version == version);
        let point = UtilPoint {
            time: self.now,
            cpu: if self.total_cores > 0.0 {
                self.cores_in_use / self.total_cores
            } else {
                0.0
            },
            gpu: if self.total_gpus > 0.0 {
                self.gpus_in_use / self.total_gpus
            } else {
                0.0
            },
        };
        match self.series.last_mut() {
            Some(last) if last.time == point.time => *last = point,
            Some(last) if last.cpu == point.cpu && last.gpu == point.gpu => {}
            _ => self.series.push(point),
        }
    }

    fn restart(&mut self, job: usize, cost: f64) {
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

    fn apply_one(&mut self, action: &Action) {
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
                self.restart(job, self.config.migration_cost);
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

    /// Starts saving `job`'s checkpoint: it holds its nodes and makes no progress for
    /// the checkpoint cost, then releases them ([`Simulator::release_preempted`]). Its
    /// work so far is kept.
    fn preempt(&mut self, job: usize) {
        let from = self.bound_nodes(job);
        self.note_move(job, MoveKind::Preempted, "", from, Vec::new());
        let j = &mut self.jobs[job];
        j.preemptions += 1;
        j.checkpointing = true;
        self.restart(job, self.config.checkpoint_cost);
    }

    /// The checkpoint of a preempted job is saved: every task leaves its node and the
    /// job waits again, to restore when it is placed whole.
    fn release_preempted(&mut self, job: usize) {
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
        self.restart(job, self.config.rescale_cost);
    }

    fn node_view(&self, n: &SimNode) -> Node {
        Node {
            name: n.spec.name.clone(),
            allocatable: n.spec.allocatable,
            requested: n.requested,
            usage: Some(Resources {
                cpu_millis: (n.cores_in_use * 1000.0).round() as u64,
                memory_bytes: n.requested.memory_bytes,
                gpus: n.requested.gpus,
            }),
            labels: n.spec.labels.clone(),
            schedulable: true,
        }
    }

    /// Every kept view equals a fresh one: a change that forgot to clear its item's view
    /// fails here, in every debug-build test, instead of showing a policy stale state.
    #[cfg(debug_assertions)]
    fn check_views(&self) {
        fn fresh<T: PartialEq + std::fmt::Debug>(
            kept: &Option<Arc<T>>,
            now: T,
            kind: &str,
            name: &str,
        ) {
            assert_eq!(kept.as_deref(), Some(&now), "stale view of {kind} {name}");
        }
        for n in &self.nodes {
            fresh(&n.view, self.node_view(n), "node", &n.spec.name);
        }
        for job in self.active.iter().map(|&j| &self.jobs[j]) {
            fresh(&job.view, self.job_view(job), "job", &job.spec.id);
        }
    }

    fn job_view(&self, j: &SimJob) -> Job {
        // Sized exactly: a filtered iterator would give two tasks room for four.
        let mut tasks = Vec::with_capacity(j.tasks.len());
        tasks.extend(
            j.tasks
                .iter()
                .filter(|t| t.created_at <= self.now)
                .map(|t| Task {
                    name: t.name.clone(),
                    role: j.spec.roles[t.role].name.clone(),
                    node: t.node.map(|n| self.nodes[n].spec.name.clone()),
                    phase: t.phase,
                    requests: t.requests,
                    cpu_weight: t.cpu_weight,
                    usage: t.node.map(|_| Resources {
                        cpu_millis: (t.cores * 1000.0).round() as u64,
                        memory_bytes: t.requests.memory_bytes,
                        gpus: t.requests.gpus,
                    }),
                    eligible: j.eligible.flatten(),
                }),
        );
        Job {
            id: j.spec.id.clone(),
            phase: j.phase,
            submit_time: j.spec.submit_time,
            start_time: j.start_time,
            priority: j.spec.priority,
            utility: j.spec.utility,
            tasks: tasks.into(),
            replicas: Replicas {
                role: j.spec.scalable_role.clone(),
                current: j.replicas,
                min: j.spec.min_replicas,
                max: j.spec.max_replicas,
            },
            loss: Arc::clone(&j.loss),
            metric_rises: j.spec.metric_rises,
            moves: Arc::clone(&j.moves),
            checkpointable: j.spec.checkpointable,
            labels: Arc::clone(&j.labels),
        }
    }
}

impl Cluster for Simulator {
    fn now(&self) -> f64 {
        self.now
    }

    fn advance(&mut self, until: Option<f64>) -> Advance {
        loop {
            let next = self.next_event_time();
            let limit = until.map_or(self.config.max_time, |u| u.min(self.config.max_time));
            match next {
                Some(t) if t <= limit => {
                    self.move_to(t);
                    let triggers = self.process_due();
                    self.recompute();
                    if !triggers.is_empty() {
                        return Advance::Events(triggers);
                    }
                }
                _ => {
                    if let Some(u) = until
                        && u <= self.config.max_time
                    {
                        self.move_to(u);
                        return Advance::Reached {
                            quiescent: next.is_none(),
                        };
                    }
                    if next.is_none() {
                        return Advance::Idle;
                    }
                    self.move_to(self.config.max_time);
                    return Advance::Stopped;
                }
            }
        }
    }

    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        for n in 0..self.nodes.len() {
            if self.nodes[n].view.is_none() {
                self.nodes[n].view = Some(Arc::new(self.node_view(&self.nodes[n])));
            }
        }
        for a in 0..self.active.len() {
            let j = self.active[a];
            if self.jobs[j].eligible.is_none() {
                let rules = &self.jobs[j].spec.placement;
                let set = self.eligibility.id_for(rules, &self.nodes);
                self.jobs[j].eligible = Some(set);
            }
            if self.jobs[j].view.is_none() {
                self.jobs[j].view = Some(Arc::new(self.job_view(&self.jobs[j])));
            }
        }
        #[cfg(debug_assertions)]
        self.check_views();
        Snapshot {
            time: self.now,
            triggers,
            nodes: self.nodes.iter().map(|n| shown(&n.view)).collect(),
            jobs: self
                .active
                .iter()
                .map(|&j| shown(&self.jobs[j].view))
                .collect(),
            node_sets: Arc::clone(self.eligibility.sets()),
        }
    }

    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) -> Vec<ActionOutcome> {
        let mut outcomes = Vec::with_capacity(accepted.len());
        for action in accepted {
            match self.faults.draw(action) {
                Some(failure) => outcomes.push(Err(failure)),
                None => {
                    self.apply_one(action);
                    outcomes.push(Ok(()));
                }
            }
        }
        for label in labels {
            if let Some(&j) = self.job_index.get(&label.job) {
                self.jobs[j]
                    .policy_labels
                    .insert(label.key.clone(), label.value.clone());
            }
        }
        self.recompute();
        outcomes
    }

    fn finished_jobs(&self) -> usize {
        self.finished
    }
}

/// A view the snapshot just built.
fn shown<T>(view: &Option<Arc<T>>) -> Arc<T> {
    Arc::clone(view.as_ref().expect("built by the snapshot"))
}

impl SimJob {
    fn task_index(&self, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.name == name)
    }
}
