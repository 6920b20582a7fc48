//! Synthetic cluster snapshots of a given size, for measuring decision rounds.
//!
//! Every node is a 64-core, 256 GiB, 8-GPU machine; every running job is a two-task
//! parameter-server job (`ps` + one `worker`, scalable to four workers) with both tasks
//! on one node, five jobs per node, so a cluster of `n` nodes carries `10 n` tasks. Each
//! job has reported 20 loss samples. Pending jobs, when asked for, are the same shape
//! with no node yet, submitted in one burst. The shape is what the papers' policies
//! were designed for and leaves room on every node, so a placement round has real
//! choices to make.

use std::collections::BTreeMap;

use switchyard_core::{
    Job, JobPhase, LossSample, Node, NodeSet, Replicas, Resources, Snapshot, Task, TaskPhase,
    Trigger,
};

/// Running jobs per node (two tasks each).
pub(crate) const JOBS_PER_NODE: usize = 5;
/// Loss samples each running job has reported.
const SAMPLES: usize = 20;
/// Seconds between two samples.
const SAMPLE_EVERY: f64 = 30.0;

const GIB: u64 = 1 << 30;

/// The time of the last sample: a round at this time sees every sample.
pub(crate) const NOW: f64 = SAMPLES as f64 * SAMPLE_EVERY;

/// `nodes` nodes with 10 running tasks each and `pending_tasks` tasks (in two-task
/// jobs) waiting, at time `time`.
pub(crate) fn cluster(nodes: usize, pending_tasks: usize, time: f64) -> Snapshot {
    let task_request = Resources {
        cpu_millis: 2_000,
        memory_bytes: 4 * GIB,
        gpus: 0,
    };
    let mut snapshot = Snapshot {
        time,
        triggers: vec![Trigger::Tick],
        nodes: (0..nodes)
            .map(|i| node(i, &task_request).into())
            .collect::<Vec<_>>(),
        jobs: Vec::new(),
        node_sets: Default::default(),
    };
    for i in 0..nodes * JOBS_PER_NODE {
        let host = format!("node-{:05}", i / JOBS_PER_NODE);
        snapshot.jobs.push(job(i, Some(host), &task_request).into());
    }
    let first_pending = snapshot.jobs.len();
    for i in first_pending..first_pending + pending_tasks.div_ceil(2) {
        snapshot
            .triggers
            .push(Trigger::JobArrived(format!("job-{i:06}")));
        snapshot.jobs.push(job(i, None, &task_request).into());
    }
    snapshot
}

fn node(i: usize, task_request: &Resources) -> Node {
    let per_task = JOBS_PER_NODE as u64 * 2;
    Node {
        name: format!("node-{i:05}"),
        allocatable: Resources {
            cpu_millis: 64_000,
            memory_bytes: 256 * GIB,
            gpus: 8,
        },
        requested: Resources {
            cpu_millis: task_request.cpu_millis * per_task,
            memory_bytes: task_request.memory_bytes * per_task,
            gpus: 0,
        },
        usage: None,
        labels: BTreeMap::from([
            ("kubernetes.io/hostname".into(), format!("node-{i:05}")),
            (
                "topology.kubernetes.io/zone".into(),
                format!("zone-{}", i % 3),
            ),
        ]),
        schedulable: true,
    }
}

/// Job `i`: running on `host`, or waiting when `host` is none.
fn job(i: usize, host: Option<String>, request: &Resources) -> Job {
    let running = host.is_some();
    let task = |name: &str, role: &str| Task {
        name: name.into(),
        role: role.into(),
        node: host.clone(),
        phase: if running {
            TaskPhase::Running
        } else {
            TaskPhase::Pending
        },
        requests: *request,
        cpu_weight: 1.0,
        usage: None,
        eligible: None,
    };
    // Loss falls fast and then flattens, at a pace that differs per job, so SpeCon
    // finds jobs in every category.
    let pace = 0.05 + (i % 7) as f64 * 0.05;
    let loss = if running {
        (0..SAMPLES)
            .map(|s| LossSample {
                time: (s + 1) as f64 * SAMPLE_EVERY,
                step: (s as u64 + 1) * 100,
                value: 0.2 + 2.0 * (-(pace * s as f64)).exp(),
            })
            .collect()
    } else {
        vec![]
    };
    Job {
        id: format!("job-{i:06}"),
        phase: if running {
            JobPhase::Running
        } else {
            JobPhase::Waiting
        },
        submit_time: if running { 0.0 } else { NOW },
        start_time: running.then_some(0.0),
        priority: 0,
        utility: 1.0 + (i % 5) as f64,
        tasks: [task("ps-0", "ps"), task("worker-0", "worker")].into(),
        replicas: Replicas {
            role: "worker".into(),
            current: 1,
            min: 1,
            max: 4,
        },
        loss: loss.into(),
        metric_rises: false,
        moves: Default::default(),
        checkpointable: true,
        labels: Default::default(),
    }
}

/// `snapshot` as a cluster with placement rules would be: three eligibility sets (a GPU
/// type on the nodes of zone 0, another on zones 1 and 2, and every node but a tainted
/// tenth), and the jobs in turn unconstrained or limited to one of them. Tasks of one
/// job share their set, as tasks with the same constraints do. With `named` false the
/// sets travel but no task names one: what carrying them costs, apart from the
/// different decisions a constrained cluster asks for.
#[allow(dead_code, reason = "only the decision bench measures eligibility")]
pub(crate) fn with_eligibility(mut snapshot: Snapshot, named: bool) -> Snapshot {
    let nodes = snapshot.nodes.len() as u32;
    let sets = [
        (0..nodes).filter(|i| i % 3 == 0).collect::<Vec<_>>(),
        (0..nodes).filter(|i| i % 3 != 0).collect(),
        (0..nodes).filter(|i| i % 10 != 9).collect(),
    ];
    snapshot.node_sets = std::sync::Arc::new(
        sets.into_iter()
            .enumerate()
            .map(|(id, nodes)| NodeSet {
                id: id as u32,
                nodes,
            })
            .collect(),
    );
    for (i, job) in snapshot.jobs.iter_mut().enumerate().filter(|_| named) {
        let job = std::sync::Arc::make_mut(job);
        // Running jobs sit on node i / JOBS_PER_NODE; keep them inside their set.
        let host = (i / JOBS_PER_NODE) as u32;
        let set = match i % 4 {
            1 if host.is_multiple_of(3) => Some(0),
            2 if !host.is_multiple_of(3) => Some(1),
            3 if host % 10 != 9 => Some(2),
            _ => None,
        };
        for task in std::sync::Arc::make_mut(&mut job.tasks).iter_mut() {
            task.eligible = set;
        }
    }
    snapshot
}

/// A waiting two-task job of the synthetic shape, numbered `i` (ids `job-{i:06}`).
#[allow(
    dead_code,
    reason = "only the languages bench adds jobs round by round"
)]
pub(crate) fn waiting_job(i: usize) -> Job {
    let request = Resources {
        cpu_millis: 2_000,
        memory_bytes: 4 * GIB,
        gpus: 0,
    };
    job(i, None, &request)
}
