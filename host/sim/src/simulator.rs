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
//! This module holds the simulator's state and the [`control::Cluster`] it implements;
//! the work is in its parts: `progress` (time passing: what falls due, each job's
//! progress and rate), `actions` (the accepted actions carried out), `view` (the
//! snapshot a policy sees), `checkpoint` (a stopped job's checkpoint: its grace period,
//! its acknowledgement, the work a timed-out one loses), `events` (the event queue), `state` (the simulator's own
//! records of nodes and jobs), `spec` (what a [`Scenario`] holds), `share` (a node's CPU
//! shared among its tasks), `faults` (injected failures), `curve` and `goodput` (a job's
//! evaluation curve and the measured job model).
//!
//! [`control::Cluster`]: switchyard_control::Cluster
//! [`control::Cluster::apply`]: switchyard_control::Cluster::apply

mod actions;
mod checkpoint;
pub(crate) mod curve;
mod events;
mod faults;
pub(crate) mod goodput;
#[cfg(test)]
mod kept_bytes;
mod progress;
pub(crate) mod share;
mod spec;
mod state;
mod view;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use rand::SeedableRng;
use rand_pcg::Pcg64;
use serde::Serialize;

pub use curve::Curve;
use events::EventQueue;
pub use faults::Faults;
use faults::Injector;
pub use goodput::{BatchSplit, Goodput, Measurements, ModelLimits, StepTime};
pub use spec::{CheckpointSpec, JobSpec, NodeSpec, RoleSpec, Scenario, SimConfig, Speed};
pub(crate) use state::table_rate;
use state::{JobState, SimJob, SimNode};
use switchyard_control::{ActionOutcome, Advance, Cluster};
use switchyard_core::{Action, EligibilitySets, JobLabel, JobPhase, Resources, Snapshot, Trigger};

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
    /// Work lost to checkpoints that timed out (done again after the restart).
    #[serde(skip_serializing_if = "is_zero")]
    pub work_lost: f64,
    /// The labels the policy put on it last.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_labels: BTreeMap<String, String>,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
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
                work_lost: j.work_lost,
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
        self.snapshot_now(triggers)
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
