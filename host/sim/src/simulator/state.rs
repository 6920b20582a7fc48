//! The simulator's mutable record of each node, job and task.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::share::speedup;
use super::spec::{JobSpec, NodeSpec, Speed};
use switchyard_control::{CheckpointOutcome, LastCheckpoint};
use switchyard_core::{
    Job, JobMove, JobPhase, LossSample, Node, Resources, RuledNode, Taint, TaskPhase,
};

/// A node and the tasks bound to it.
#[derive(Debug)]
pub(crate) struct SimNode {
    pub(crate) spec: NodeSpec,
    pub(crate) requested: Resources,
    /// `(job, task)` indices bound here.
    pub(crate) tasks: Vec<(usize, usize)>,
    pub(crate) cores_in_use: f64,
    pub(crate) dirty: bool,
    /// What the last snapshot showed of it; `None` once it changed since.
    pub(crate) view: Option<Arc<Node>>,
}

impl RuledNode for SimNode {
    fn labels(&self) -> &BTreeMap<String, String> {
        &self.spec.labels
    }
    fn taints(&self) -> &[Taint] {
        &self.spec.taints
    }
}

impl SimNode {
    pub(crate) fn new(spec: NodeSpec) -> Self {
        Self {
            spec,
            requested: Resources::default(),
            tasks: Vec::new(),
            cores_in_use: 0.0,
            dirty: false,
            view: None,
        }
    }
}

/// Where a job is in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobState {
    NotYetArrived,
    Active,
    Finished,
}

#[derive(Debug)]
pub(crate) struct SimTask {
    pub(crate) name: String,
    /// Index into the job's roles.
    pub(crate) role: usize,
    pub(crate) node: Option<usize>,
    pub(crate) phase: TaskPhase,
    pub(crate) requests: Resources,
    pub(crate) cpu_weight: f64,
    pub(crate) max_cores: f64,
    /// Cores it gets now.
    pub(crate) cores: f64,
    /// Share of its cores' speed left after co-location interference (1 = none).
    pub(crate) efficiency: f64,
    /// When the task is created (shows up in the snapshot); the job's submit time
    /// unless its role is created later.
    pub(crate) created_at: f64,
}

#[derive(Debug)]
pub(crate) struct SimJob {
    pub(crate) spec: JobSpec,
    pub(crate) state: JobState,
    pub(crate) phase: JobPhase,
    pub(crate) tasks: Vec<SimTask>,
    pub(crate) replicas: u32,
    pub(crate) work_done: f64,
    pub(crate) settled_at: f64,
    pub(crate) rate: f64,
    /// Work done at which `rate` changes by itself (a measured job's epoch ends).
    pub(crate) rate_until: Option<f64>,
    pub(crate) gpus_busy: f64,
    pub(crate) version: u64,
    pub(crate) restart_until: Option<f64>,
    pub(crate) next_eval: f64,
    /// Its most recent evaluation samples, shared with the job's views.
    pub(crate) loss: Arc<[LossSample]>,
    /// Its moves, oldest first (the contract's bounded history), shared with the job's
    /// views.
    pub(crate) moves: Arc<[JobMove]>,
    /// Saving a checkpoint after a preemption: its nodes go when the restart is done.
    pub(crate) checkpointing: bool,
    /// Preempted and waiting: its next whole placement restores the checkpoint.
    pub(crate) resuming: bool,
    /// The checkpoint asked of it, until it completes or times out.
    pub(crate) asked: Option<Asked>,
    /// Its work at its last complete checkpoint (0 before any): what a timed-out
    /// checkpoint rolls it back to.
    pub(crate) kept_work: f64,
    /// Work lost to timed-out checkpoints.
    pub(crate) work_lost: f64,
    /// How its last checkpoint ended.
    pub(crate) last_checkpoint: Option<LastCheckpoint>,
    /// Its eligibility set, once looked up (`Some(None)`: any node).
    pub(crate) eligible: Option<Option<u32>>,
    pub(crate) migrations: u32,
    pub(crate) preemptions: u32,
    pub(crate) rescales: u32,
    pub(crate) start_time: Option<f64>,
    pub(crate) finish_time: Option<f64>,
    pub(crate) policy_labels: BTreeMap<String, String>,
    /// Its submission labels (taken from the spec), shared with every job that has the
    /// same ones, so the jobs of one template hold one map between them.
    pub(crate) labels: Arc<BTreeMap<String, String>>,
    /// What the last snapshot showed of it; `None` once it changed since.
    pub(crate) view: Option<Arc<Job>>,
}

/// A checkpoint asked of a job and not over yet.
#[derive(Debug)]
pub(crate) struct Asked {
    /// When it was asked.
    pub(crate) at: f64,
    /// When the grace period ends, if the job has one.
    pub(crate) deadline: Option<f64>,
    /// The job waits for the API's acknowledgement.
    pub(crate) by_api: bool,
    /// How it ends and how long it took, once that is known: at once for a job the
    /// simulator acknowledges, on the last acknowledgement for one the API does.
    pub(crate) decided: Option<(CheckpointOutcome, f64)>,
    /// Asked tasks that have not acknowledged yet (API acknowledgement only).
    pub(crate) waiting: Vec<String>,
    /// Asked tasks that have.
    pub(crate) acknowledged: Vec<String>,
    /// Where the checkpoint is, as the last acknowledgement said.
    pub(crate) path: Option<String>,
    /// Seconds of restart left once the checkpoint is over (a migration's or a
    /// rescale's, for a job that waited for the API; the simulator's own checkpoints
    /// are charged within them).
    pub(crate) restart_after: f64,
}

/// Task name of replica `index` of `role`: `main` for a lone `main`, else `role-index`.
pub(crate) fn task_name(role: &str, count: u32, index: u32) -> String {
    if role == "main" && count == 1 {
        "main".to_string()
    } else {
        format!("{role}-{index}")
    }
}

impl SimJob {
    pub(crate) fn new(mut spec: JobSpec) -> Self {
        let labels = std::mem::take(&mut spec.labels);
        let mut tasks = Vec::with_capacity(spec.roles.iter().map(|r| r.count as usize).sum());
        let mut replicas = 0;
        for (r, role) in spec.roles.iter().enumerate() {
            if role.name == spec.scalable_role {
                replicas = role.count;
            }
            for i in 0..role.count {
                tasks.push(SimTask {
                    name: task_name(&role.name, role.count, i),
                    role: r,
                    node: None,
                    phase: TaskPhase::Pending,
                    requests: role.requests,
                    cpu_weight: 1.0,
                    max_cores: role.max_cores,
                    cores: 0.0,
                    efficiency: 1.0,
                    created_at: spec.submit_time + role.create_after,
                });
            }
        }
        Self {
            next_eval: spec.eval_every,
            spec,
            state: JobState::NotYetArrived,
            phase: JobPhase::Waiting,
            tasks,
            replicas,
            work_done: 0.0,
            settled_at: 0.0,
            rate: 0.0,
            rate_until: None,
            gpus_busy: 0.0,
            version: 0,
            restart_until: None,
            loss: Arc::default(),
            moves: Arc::default(),
            checkpointing: false,
            resuming: false,
            asked: None,
            kept_work: 0.0,
            work_lost: 0.0,
            last_checkpoint: None,
            eligible: None,
            migrations: 0,
            preemptions: 0,
            rescales: 0,
            start_time: None,
            finish_time: None,
            policy_labels: BTreeMap::new(),
            labels,
            view: None,
        }
    }

    /// Every task bound and no restart under way: the job can make progress.
    pub(crate) fn progressing(&self) -> bool {
        self.state == JobState::Active
            && self.restart_until.is_none()
            && !self.tasks.is_empty()
            && self.tasks.iter().all(|t| t.node.is_some())
    }

    /// Work per second now, and the work done at which that rate changes without any
    /// event touching the job (`None`: it does not).
    pub(crate) fn compute_rate(&self) -> (f64, Option<f64>) {
        if !self.progressing() {
            return (0.0, None);
        }
        let scalable = |t: &&SimTask| self.spec.roles[t.role].name == self.spec.scalable_role;
        let mut until = None;
        let base = match &self.spec.speed {
            Speed::Cpu {
                per_core,
                serial_fraction,
            } => {
                per_core
                    * self
                        .tasks
                        .iter()
                        .filter(scalable)
                        .map(|t| speedup(t.cores, *serial_fraction) * t.efficiency)
                        .sum::<f64>()
            }
            Speed::Table(table) => table_rate(table, self.replicas),
            Speed::Goodput(model) => {
                let (rate, epoch_end) = model.rate(&self.placement(), self.work_done);
                until = epoch_end.filter(|&end| end < self.spec.work);
                rate
            }
        };
        let first = self.tasks[0].node;
        let spans = self.tasks.iter().any(|t| t.node != first);
        let rate = if spans {
            base * self.spec.comm_penalty
        } else {
            base
        };
        (rate, until)
    }

    /// GPUs per node of the scalable role's bound tasks, nodes in the order its tasks
    /// first use them (the order a gang was packed in).
    fn placement(&self) -> Vec<u32> {
        let mut per_node: Vec<(usize, u32)> = Vec::new();
        let scalable = self
            .tasks
            .iter()
            .filter(|t| self.spec.roles[t.role].name == self.spec.scalable_role);
        for node in scalable.filter_map(|t| t.node) {
            match per_node.iter_mut().find(|(n, _)| *n == node) {
                Some((_, count)) => *count += 1,
                None => per_node.push((node, 1)),
            }
        }
        per_node.into_iter().map(|(_, count)| count).collect()
    }

    /// Times after submission at which tasks of a role created later appear, earliest
    /// first, without repeats.
    pub(crate) fn creation_times(&self) -> Vec<f64> {
        let mut times: Vec<f64> = self
            .tasks
            .iter()
            .map(|t| t.created_at)
            .filter(|&t| t > self.spec.submit_time)
            .collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        times
    }

    /// The job's speed comes from its cores (and so suffers co-location interference).
    pub(crate) fn cpu_bound(&self) -> bool {
        matches!(self.spec.speed, Speed::Cpu { .. })
    }

    /// Adds a pending replica of the scalable role named for `index`; returns its index.
    pub(crate) fn add_replica(&mut self, index: u32) -> usize {
        let r = self
            .spec
            .roles
            .iter()
            .position(|r| r.name == self.spec.scalable_role)
            .unwrap_or(0);
        let role = &self.spec.roles[r];
        let mut name = task_name(&role.name, 2, index);
        while self.tasks.iter().any(|t| t.name == name) {
            name.push('+');
        }
        self.tasks.push(SimTask {
            name,
            role: r,
            node: None,
            phase: TaskPhase::Running,
            requests: role.requests,
            cpu_weight: 1.0,
            max_cores: role.max_cores,
            cores: 0.0,
            efficiency: 1.0,
            created_at: f64::NEG_INFINITY,
        });
        self.replicas += 1;
        self.tasks.len() - 1
    }

    /// Removes the last task of the scalable role: `(its index, its node, its requests)`.
    pub(crate) fn remove_last_replica(&mut self) -> Option<(usize, Option<usize>, Resources)> {
        let pos = self
            .tasks
            .iter()
            .rposition(|t| self.spec.roles[t.role].name == self.spec.scalable_role)?;
        self.replicas = self.replicas.saturating_sub(1);
        let task = &self.tasks[pos];
        let out = (pos, task.node, task.requests);
        Some(out)
    }
}

/// Throughput with `replicas` replicas; past the table it grows by the last increment.
pub(crate) fn table_rate(table: &[f64], replicas: u32) -> f64 {
    let n = replicas as usize;
    match (n, table.len()) {
        (0, _) | (_, 0) => 0.0,
        (n, len) if n <= len => table[n - 1],
        (n, len) => {
            let step = if len >= 2 {
                table[len - 1] - table[len - 2]
            } else {
                table[0]
            };
            table[len - 1] + step * (n - len) as f64
        }
    }
}
