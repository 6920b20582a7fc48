//! Fixture builders: snapshots that read like the scenario they set up
//! (`cluster().node(node("n1").cpus(4))`), and waiting for a condition. They build the
//! host's model only; they must not run anything.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use switchyard_core::{
    Job, JobMove, JobPhase, LossSample, MoveKind, Node, Replicas, Resources, Snapshot, Task,
    TaskPhase,
};

/// `cpus` cores, `gib` GiB of memory, `gpus` GPUs.
pub fn res(cpus: f64, gib: u64, gpus: u32) -> Resources {
    Resources {
        cpu_millis: (cpus * 1000.0) as u64,
        memory_bytes: gib << 30,
        gpus,
    }
}

/// A schedulable node with 8 cores, 32 GiB and no GPU until told otherwise.
pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder(Node {
        name: name.into(),
        allocatable: res(8.0, 32, 0),
        requested: Resources::default(),
        usage: None,
        labels: BTreeMap::new(),
        schedulable: true,
    })
}

/// A node being built; `.0` is the node.
pub struct NodeBuilder(pub Node);

impl NodeBuilder {
    /// `cpus` cores allocatable.
    pub fn cpus(mut self, cpus: f64) -> Self {
        self.0.allocatable.cpu_millis = (cpus * 1000.0) as u64;
        self
    }
    /// `gpus` GPUs allocatable.
    pub fn gpus(mut self, gpus: u32) -> Self {
        self.0.allocatable.gpus = gpus;
        self
    }
    /// Cordoned: no new task may be placed on it.
    pub fn unschedulable(mut self) -> Self {
        self.0.schedulable = false;
        self
    }
}

/// A waiting single-container job with one pending `main` task asking for one core.
pub fn job(id: &str) -> JobBuilder {
    JobBuilder(Job {
        id: id.into(),
        phase: JobPhase::Waiting,
        submit_time: 0.0,
        start_time: None,
        priority: 0,
        utility: 1.0,
        tasks: Default::default(),
        replicas: Replicas {
            role: "main".into(),
            current: 1,
            min: 1,
            max: 1,
        },
        loss: Default::default(),
        metric_rises: false,
        moves: Default::default(),
        checkpointable: true,
        labels: Default::default(),
    })
}

/// A job being built; `.0` is the job so far (see [`JobBuilder::build`]).
pub struct JobBuilder(pub Job);

impl JobBuilder {
    /// Adds a pending task.
    pub fn task(mut self, name: &str, role: &str, requests: Resources) -> Self {
        let task = Task {
            name: name.into(),
            role: role.into(),
            node: None,
            phase: TaskPhase::Pending,
            requests,
            cpu_weight: 1.0,
            usage: None,
            eligible: None,
        };
        self.0.tasks = self.0.tasks.iter().cloned().chain([task]).collect();
        self
    }
    /// Binds every task to `node` and marks the job running.
    pub fn running_on(mut self, node: &str) -> Self {
        if self.0.tasks.is_empty() {
            self = self.task("main", "main", res(1.0, 1, 0));
        }
        for t in std::sync::Arc::make_mut(&mut self.0.tasks).iter_mut() {
            t.node = Some(node.into());
            t.phase = TaskPhase::Running;
        }
        self.0.phase = JobPhase::Running;
        self.0.start_time = Some(0.0);
        self
    }
    /// The scalable role and its replica count with bounds.
    pub fn replicas(mut self, role: &str, current: u32, min: u32, max: u32) -> Self {
        self.0.replicas = Replicas {
            role: role.into(),
            current,
            min,
            max,
        };
        self
    }
    /// Has a migration with `purpose` in its history, in place on its nodes.
    pub fn migrated_for(mut self, purpose: &str) -> Self {
        let at: Vec<String> = self.0.tasks.iter().filter_map(|t| t.node.clone()).collect();
        self.0.record_move(JobMove {
            time: 0.0,
            kind: MoveKind::Migrated,
            purpose: purpose.into(),
            from_nodes: at.clone(),
            to_nodes: at,
        });
        self
    }
    /// Carries the host's label saying no two of its tasks may share a node.
    pub fn one_task_per_node(mut self) -> Self {
        std::sync::Arc::make_mut(&mut self.0.labels).insert(
            switchyard_core::ONE_TASK_PER_NODE_LABEL.into(),
            "true".into(),
        );
        self
    }
    /// Cannot checkpoint, so it cannot be migrated.
    pub fn not_checkpointable(mut self) -> Self {
        self.0.checkpointable = false;
        self
    }
    /// Loss samples with these values, one every 10 s and 100 steps.
    pub fn loss(mut self, values: &[f64]) -> Self {
        self.0.loss = values
            .iter()
            .enumerate()
            .map(|(i, v)| LossSample {
                time: i as f64 * 10.0,
                step: i as u64 * 100,
                value: *v,
            })
            .collect();
        self
    }
    /// The job, with a default `main` task if none was added.
    pub fn build(mut self) -> Job {
        if self.0.tasks.is_empty() {
            self = self.task("main", "main", res(1.0, 1, 0));
        }
        self.0
    }
}

/// An empty snapshot at t=0.
pub fn cluster() -> ClusterBuilder {
    ClusterBuilder(Snapshot::default())
}

/// A snapshot being built; `.0` is the snapshot.
pub struct ClusterBuilder(pub Snapshot);

impl ClusterBuilder {
    /// Adds a node.
    pub fn node(mut self, node: NodeBuilder) -> Self {
        self.0.nodes.push(node.0.into());
        self
    }
    /// Adds a job and charges its bound tasks to their nodes' `requested`.
    pub fn job(mut self, job: JobBuilder) -> Self {
        let job = job.build();
        for t in job.tasks.iter() {
            if let Some(n) = self
                .0
                .nodes
                .iter_mut()
                .find(|n| Some(&n.name) == t.node.as_ref())
            {
                let n = std::sync::Arc::make_mut(n);
                n.requested = n.requested.plus(&t.requests);
            }
        }
        self.0.jobs.push(job.into());
        self
    }
    /// The snapshot's time.
    pub fn at(mut self, time: f64) -> Self {
        self.0.time = time;
        self
    }
    /// Every task of job `job` may only run on `nodes`: a new eligibility set.
    pub fn only_on(mut self, job: &str, nodes: &[&str]) -> Self {
        let id = self.0.node_sets.len() as u32;
        let positions = (0..self.0.nodes.len() as u32)
            .filter(|&i| nodes.contains(&self.0.nodes[i as usize].name.as_str()))
            .collect();
        std::sync::Arc::make_mut(&mut self.0.node_sets).push(switchyard_core::NodeSet {
            id,
            nodes: positions,
        });
        let job = self
            .0
            .jobs
            .iter_mut()
            .find(|j| j.id == job)
            .expect("known job");
        for t in std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(job).tasks) {
            t.eligible = Some(id);
        }
        self
    }
    /// The snapshot.
    pub fn build(self) -> Snapshot {
        self.0
    }
}

/// Polls `check` every 5 ms until it holds; fails naming `what` after `within`.
pub fn wait_until(what: &str, within: Duration, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < within, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
