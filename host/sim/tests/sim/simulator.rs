//! The simulator itself: processor sharing, completion times, the costs of a migration,
//! a checkpoint and a rescale, roles created later, interference, the communication
//! penalty, and the snapshots it hands out.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use support::res;
use switchyard_control::{Advance, Cluster};
use switchyard_core::{
    Action, Assignment, JobMove, JobPhase, MoveKind, Operation, TaskPhase, Trigger,
};
use switchyard_sim::{
    CheckpointSpec, JobSpec, NodeSpec, RoleSpec, Scenario, SimConfig, Simulator, Speed,
};

pub(crate) fn node(name: &str, cpus: f64) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        allocatable: res(cpus, 64, 4),
        labels: BTreeMap::new(),
        taints: vec![],
    }
}

pub(crate) fn cpu_job(id: &str, work: f64, per_core: f64, max_cores: f64) -> JobSpec {
    JobSpec {
        id: id.into(),
        submit_time: 0.0,
        priority: 0,
        utility: 1.0,
        roles: vec![RoleSpec {
            name: "main".into(),
            count: 1,
            requests: res(1.0, 1, 0),
            max_cores,
            create_after: 0.0,
        }]
        .into(),
        scalable_role: "main".into(),
        min_replicas: 1,
        max_replicas: 1,
        work,
        speed: Speed::Cpu {
            per_core,
            serial_fraction: 0.0,
        },
        comm_penalty: 0.8,
        curve: None,
        noise: 0.0,
        eval_every: f64::INFINITY,
        metric_rises: false,
        checkpointable: true,
        checkpoint: CheckpointSpec::default(),
        labels: Default::default(),
        placement: Default::default(),
    }
}

pub(crate) fn sim(nodes: Vec<NodeSpec>, jobs: Vec<JobSpec>) -> Simulator {
    Simulator::new(Scenario {
        nodes,
        jobs,
        config: SimConfig::default(),
    })
}

pub(crate) fn place(job: &str, task: &str, node: &str) -> Action {
    Action {
        op: Operation::Place {
            job: job.into(),
            assignments: vec![Assignment {
                task: task.into(),
                node: node.into(),
            }],
        },
        reason: "test".into(),
    }
}

pub(crate) fn run_to_end(s: &mut Simulator) {
    while let Advance::Events(_) = s.advance(None) {}
}

#[test]
fn weighted_processor_sharing_hands_out_exactly_the_nodes_cores_when_demand_exceeds_them() {
    let jobs = vec![
        cpu_job("a", 1e6, 1.0, 8.0),
        cpu_job("b", 1e6, 1.0, 8.0),
        cpu_job("c", 1e6, 1.0, 1.0),
    ];
    let mut s = sim(vec![node("n1", 8.0)], jobs);
    s.advance(None);
    s.apply(
        &[
            place("a", "main", "n1"),
            place("b", "main", "n1"),
            place("c", "main", "n1"),
        ],
        &[],
    );
    let weight = Action {
        op: Operation::SetCpuWeight {
            job: "b".into(),
            task: "main".into(),
            weight: 0.5,
        },
        reason: "t".into(),
    };
    s.apply(&[weight], &[]);
    let cores = |id: &str| s.task_cores(id).unwrap()[0].1;
    let (a, b, c) = (cores("a"), cores("b"), cores("c"));
    assert!(
        (a + b + c - 8.0).abs() < 1e-9,
        "shares {a} {b} {c} must add up to 8 cores"
    );
    assert_eq!(c, 1.0, "a task that can use one core keeps only one");
    assert!(
        (a - 2.0 * b).abs() < 1e-9,
        "weight 1 gets twice weight 0.5: {a} vs {b}"
    );
    let rates = s.job_rate("a").unwrap() + s.job_rate("b").unwrap() + s.job_rate("c").unwrap();
    assert!(
        (rates - 8.0).abs() < 1e-9,
        "with linear speed-up the progress rates add up to the capacity"
    );
}

#[test]
fn a_job_alone_on_a_node_finishes_after_its_work_divided_by_its_speed() {
    let mut s = sim(vec![node("n1", 8.0)], vec![cpu_job("a", 300.0, 2.5, 1.0)]);
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    run_to_end(&mut s);
    assert_eq!(s.finish_time("a"), Some(120.0));
}

#[test]
fn a_migration_delays_the_job_by_its_cost_exactly_once() {
    let mut s = sim(
        vec![node("n1", 8.0), node("n2", 8.0)],
        vec![cpu_job("a", 100.0, 1.0, 1.0)],
    );
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    assert_eq!(s.advance(Some(10.0)), Advance::Reached { quiescent: false });
    let migrate = Action {
        op: Operation::Migrate {
            job: "a".into(),
            task: None,
            node: "n2".into(),
            purpose: "reallocate".into(),
        },
        reason: "t".into(),
    };
    s.apply(&[migrate], &[]);
    run_to_end(&mut s);
    assert_eq!(s.finish_time("a"), Some(105.0));
}

pub(crate) fn preempt(job: &str) -> Action {
    Action {
        op: Operation::Preempt { job: job.into() },
        reason: "t".into(),
    }
}

#[test]
fn a_preempted_job_keeps_its_progress_frees_its_node_after_the_checkpoint_and_restores_once() {
    let mut s = sim(
        vec![node("n1", 1.0), node("n2", 1.0)],
        vec![cpu_job("a", 100.0, 1.0, 1.0)],
    );
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    assert_eq!(s.advance(Some(30.0)), Advance::Reached { quiescent: false });
    s.apply(&[preempt("a")], &[]);
    // Saving the checkpoint (5 s by default): still on n1, restarting, no progress.
    let job = |s: &mut Simulator| s.snapshot(vec![]).jobs[0].clone();
    let saving = job(&mut s);
    assert_eq!(saving.phase, JobPhase::Restarting);
    assert_eq!(saving.tasks[0].node.as_deref(), Some("n1"));
    // Then the node is free, the job waits, and the policy hears of it.
    let Advance::Events(triggers) = s.advance(None) else {
        panic!("the checkpoint's end is an event");
    };
    assert_eq!(triggers, [Trigger::JobPreempted("a".into())]);
    assert_eq!(s.now(), 35.0);
    let waiting = job(&mut s);
    assert_eq!(waiting.phase, JobPhase::Waiting);
    assert_eq!(waiting.tasks[0].phase, TaskPhase::Pending);
    assert_eq!(waiting.tasks[0].node, None);
    assert_eq!(s.snapshot(vec![]).nodes[0].requested.cpu_millis, 0);
    // Nothing runs while it waits: at t=100 it is still 70 work units short.
    assert_eq!(s.advance(Some(100.0)), Advance::Reached { quiescent: true });
    s.apply(&[place("a", "main", "n2")], &[]);
    run_to_end(&mut s);
    // 100 + 5 s restore + the 70 units left; the checkpoint cost was charged once
    // (t=30..35), the restore once.
    assert_eq!(s.finish_time("a"), Some(175.0));
    let outcome = &s.outcomes()[0];
    assert_eq!((outcome.preemptions, outcome.migrations), (1, 0));
}

#[test]
fn a_job_s_moves_are_recorded_in_order_with_their_nodes() {
    let mut s = sim(
        vec![node("n1", 2.0), node("n2", 2.0)],
        vec![cpu_job("a", 1000.0, 1.0, 1.0)],
    );
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    s.advance(Some(10.0));
    let migrate = |purpose: &str| Action {
        op: Operation::Migrate {
            job: "a".into(),
            task: None,
            node: "n2".into(),
            purpose: purpose.into(),
        },
        reason: "t".into(),
    };
    s.apply(&[migrate("defrag")], &[]);
    s.advance(Some(20.0));
    s.apply(&[migrate("")], &[]); // already there: only marked
    s.advance(Some(30.0));
    s.apply(&[preempt("a")], &[]);
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    let moves = s.snapshot(vec![]).jobs[0].moves.clone();
    let names = |nodes: &[&str]| -> Vec<String> { nodes.iter().map(|n| n.to_string()).collect() };
    let moved = |time, kind, purpose: &str, from: &[&str], to: &[&str]| JobMove {
        time,
        kind,
        purpose: purpose.into(),
        from_nodes: names(from),
        to_nodes: names(to),
    };
    assert_eq!(
        *moves,
        [
            moved(0.0, MoveKind::Placed, "", &[], &["n1"]),
            moved(10.0, MoveKind::Migrated, "defrag", &["n1"], &["n2"]),
            moved(20.0, MoveKind::Migrated, "", &["n2"], &["n2"]),
            moved(30.0, MoveKind::Preempted, "", &["n2"], &[]),
            moved(35.0, MoveKind::Placed, "", &[], &["n1"]),
        ]
    );
}

#[test]
fn a_rescale_delays_the_job_by_its_cost_once_and_then_runs_at_the_new_throughput() {
    let mut job = cpu_job("a", 1000.0, 1.0, 1.0);
    job.roles = vec![RoleSpec {
        name: "worker".into(),
        count: 1,
        requests: res(1.0, 1, 1),
        max_cores: 1.0,
        create_after: 0.0,
    }]
    .into();
    job.scalable_role = "worker".into();
    job.max_replicas = 2;
    job.speed = Speed::Table(vec![10.0, 20.0].into());
    let mut s = sim(vec![node("n1", 8.0)], vec![job]);
    s.advance(None);
    s.apply(&[place("a", "worker-0", "n1")], &[]);
    s.advance(Some(50.0)); // 500 work done
    let scale = Action {
        op: Operation::Scale {
            job: "a".into(),
            replicas: 2,
            nodes: vec!["n1".into()],
        },
        reason: "t".into(),
    };
    s.apply(&[scale], &[]);
    run_to_end(&mut s);
    // 50 s of restart, then 500 work at 20/s.
    assert_eq!(s.finish_time("a"), Some(50.0 + 50.0 + 25.0));
}

/// A two-role job whose `worker` role is created `after` seconds after submission.
fn staged_job(after: f64) -> JobSpec {
    let mut job = cpu_job("a", 100.0, 1.0, 1.0);
    job.roles = vec![
        RoleSpec {
            name: "ps".into(),
            count: 1,
            requests: res(1.0, 1, 0),
            max_cores: 1.0,
            create_after: 0.0,
        },
        RoleSpec {
            name: "worker".into(),
            count: 1,
            requests: res(1.0, 1, 0),
            max_cores: 1.0,
            create_after: after,
        },
    ]
    .into();
    job.scalable_role = "worker".into();
    job
}

#[test]
fn a_role_created_later_is_absent_from_the_snapshot_until_then_and_arrives_as_a_trigger() {
    let mut s = sim(vec![node("n1", 8.0)], vec![staged_job(10.0)]);
    assert!(matches!(s.advance(None), Advance::Events(_)));
    let tasks = |s: &mut Simulator| -> Vec<String> {
        s.snapshot(vec![]).jobs[0]
            .tasks
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(tasks(&mut s), ["ps-0"]);
    s.apply(&[place("a", "ps-0", "n1")], &[]);
    assert_eq!(
        s.job_rate("a"),
        Some(0.0),
        "a job missing a task cannot run"
    );
    let Advance::Events(triggers) = s.advance(None) else {
        panic!("the worker's creation must be an event");
    };
    assert_eq!(s.now(), 10.0);
    assert_eq!(triggers, [switchyard_core::Trigger::JobArrived("a".into())]);
    assert_eq!(tasks(&mut s), ["ps-0", "worker-0"]);
    s.apply(&[place("a", "worker-0", "n1")], &[]);
    run_to_end(&mut s);
    assert_eq!(s.finish_time("a"), Some(110.0));
}

#[test]
fn co_located_cpu_jobs_slow_each_other_by_the_interference_factor() {
    let jobs = vec![cpu_job("a", 100.0, 1.0, 1.0), cpu_job("b", 100.0, 1.0, 1.0)];
    let mut s = Simulator::new(Scenario {
        nodes: vec![node("n1", 8.0)],
        jobs,
        config: SimConfig {
            interference: 0.25,
            ..SimConfig::default()
        },
    });
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    assert_eq!(s.job_rate("a"), Some(1.0), "alone: no interference");
    s.apply(&[place("b", "main", "n1")], &[]);
    assert_eq!(
        s.job_rate("a"),
        Some(0.8),
        "two on the node: 1 / (1 + 0.25)"
    );
    assert_eq!(s.job_rate("b"), Some(0.8));
}

#[test]
fn a_finished_gpu_job_stops_counting_as_gpu_utilisation() {
    let mut job = cpu_job("a", 100.0, 1.0, 1.0);
    Arc::make_mut(&mut job.roles)[0].requests = res(1.0, 1, 2);
    job.speed = Speed::Table(vec![1.0].into());
    let mut s = sim(vec![node("n1", 8.0)], vec![job]);
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    run_to_end(&mut s);
    assert_eq!(s.finish_time("a"), Some(100.0));
    // 2 of 4 GPUs for 100 s, then none: half over the first 100 s, a quarter over 200 s.
    assert!((s.mean_utilisation(100.0).1 - 0.5).abs() < 1e-9);
    assert!((s.mean_utilisation(200.0).1 - 0.25).abs() < 1e-9);
    assert_eq!(s.utilisation_series().last().map(|p| p.gpu), Some(0.0));
}

#[test]
fn a_job_whose_tasks_span_nodes_runs_at_the_communication_penalty() {
    let distributed = |id: &str| {
        let mut job = cpu_job(id, 1000.0, 1.0, 1.0);
        job.roles = vec![RoleSpec {
            name: "worker".into(),
            count: 2,
            requests: res(1.0, 1, 0),
            max_cores: 1.0,
            create_after: 0.0,
        }]
        .into();
        job.scalable_role = "worker".into();
        job.min_replicas = 2;
        job.max_replicas = 2;
        job.speed = Speed::Table(vec![5.0, 10.0].into());
        job.comm_penalty = 0.8;
        job
    };
    let mut s = sim(
        vec![node("n1", 8.0), node("n2", 8.0)],
        vec![distributed("together"), distributed("apart")],
    );
    s.advance(None);
    let gang = |job: &str, nodes: [&str; 2]| Action {
        op: Operation::Place {
            job: job.into(),
            assignments: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| Assignment {
                    task: format!("worker-{i}"),
                    node: n.to_string(),
                })
                .collect(),
        },
        reason: "t".into(),
    };
    s.apply(
        &[gang("together", ["n1", "n1"]), gang("apart", ["n1", "n2"])],
        &[],
    );
    run_to_end(&mut s);
    // 1000 work at 10/s on one node; at 10 * 0.8 = 8/s across two.
    assert_eq!(s.finish_time("together"), Some(100.0));
    assert_eq!(s.finish_time("apart"), Some(125.0));
}

#[test]
fn a_snapshot_hands_out_the_same_node_and_job_until_they_change() {
    let mut s = sim(
        vec![node("n1", 8.0), node("n2", 8.0)],
        vec![
            cpu_job("a", 1000.0, 1.0, 1.0),
            cpu_job("b", 1000.0, 1.0, 1.0),
        ],
    );
    s.advance(None);
    let first = s.snapshot(vec![]);
    let again = s.snapshot(vec![]);
    for (x, y) in first.jobs.iter().zip(&again.jobs) {
        assert!(Arc::ptr_eq(x, y), "job {} was rebuilt unchanged", x.id);
    }
    for (x, y) in first.nodes.iter().zip(&again.nodes) {
        assert!(Arc::ptr_eq(x, y), "node {} was rebuilt unchanged", x.name);
    }
    s.apply(&[place("a", "main", "n1")], &[]);
    let after = s.snapshot(vec![]);
    // Only what the placement touched is new: job `a` and node n1.
    assert!(!Arc::ptr_eq(&first.jobs[0], &after.jobs[0]));
    assert_eq!(after.jobs[0].tasks[0].node.as_deref(), Some("n1"));
    assert!(Arc::ptr_eq(&first.jobs[1], &after.jobs[1]));
    assert!(!Arc::ptr_eq(&first.nodes[0], &after.nodes[0]));
    assert!(Arc::ptr_eq(&first.nodes[1], &after.nodes[1]));
}

#[test]
fn jobs_with_the_same_labels_share_one_map() {
    let labelled = |id: &str| {
        let mut job = cpu_job(id, 10.0, 1.0, 1.0);
        job.labels = Arc::new(BTreeMap::from([("team".to_string(), "vision".to_string())]));
        job
    };
    let mut s = sim(vec![node("n1", 8.0)], vec![labelled("a"), labelled("b")]);
    s.advance(None);
    let snapshot = s.snapshot(vec![]);
    assert_eq!(snapshot.jobs[0].labels["team"], "vision");
    assert!(Arc::ptr_eq(
        &snapshot.jobs[0].labels,
        &snapshot.jobs[1].labels
    ));
}
