//! The simulator and the control loop: processor sharing,
//! completion times, checkpoint costs, determinism, workload errors and policy fallback.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use support::res;
use switchyard_control::{Advance, Cluster, ControlLoop, PolicySlot};
use switchyard_core::{
    Action, Assignment, JobMove, JobPhase, MoveKind, Operation, TaskPhase, Trigger,
};
use switchyard_runtime::{PolicyRef, Runtime, RuntimeOptions, SandboxLimits};
use switchyard_sim::{
    JobSpec, NodeSpec, RoleSpec, Scenario, SimConfig, Simulator, Speed, Workload,
};

fn node(name: &str, cpus: f64) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        allocatable: res(cpus, 64, 4),
        labels: BTreeMap::new(),
        taints: vec![],
    }
}

fn cpu_job(id: &str, work: f64, per_core: f64, max_cores: f64) -> JobSpec {
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
        labels: BTreeMap::new(),
        placement: Default::default(),
    }
}

fn sim(nodes: Vec<NodeSpec>, jobs: Vec<JobSpec>) -> Simulator {
    Simulator::new(Scenario {
        nodes,
        jobs,
        config: SimConfig::default(),
    })
}

fn place(job: &str, task: &str, node: &str) -> Action {
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

fn run_to_end(s: &mut Simulator) {
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

fn preempt(job: &str) -> Action {
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
    job.speed = Speed::Table(vec![10.0, 20.0]);
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

#[test]
fn a_workload_with_a_misspelt_field_is_refused_with_the_field_and_its_line() {
    let text = "cluster:\n  nodes:\n    - name: n\n      cpus: 4\n      memory_gib: 8\ntemplates:\n  t:\n    wrok: 10\n";
    let error = Workload::parse(text, Path::new("typo.yaml"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("typo.yaml:8"), "{error}");
    assert!(error.contains("templates.t"), "{error}");
    assert!(error.contains("wrok"), "{error}");
}

fn runtime(deadline: Duration) -> Runtime {
    let limits = SandboxLimits {
        deadline,
        ..SandboxLimits::default()
    };
    Runtime::new(RuntimeOptions {
        limits,
        cache_dir: None,
        ..Default::default()
    })
    .unwrap()
}

fn two_jobs_ten_seconds_apart() -> Simulator {
    let mut jobs = vec![cpu_job("a", 50.0, 1.0, 1.0), cpu_job("b", 80.0, 1.0, 1.0)];
    jobs[1].submit_time = 10.0;
    sim(vec![node("n1", 4.0)], jobs)
}

/// The test guest that never returns from `decide`.
fn looping_guest(runtime: &Runtime) -> std::sync::Arc<switchyard_runtime::PolicyModule> {
    runtime
        .load(
            &std::fs::read(support::guest("looping")).unwrap(),
            "looping",
        )
        .unwrap()
}

#[test]
fn when_the_policy_fails_the_default_policy_decides_and_every_job_still_finishes() {
    let runtime = runtime(Duration::from_millis(30));
    let looping = looping_guest(&runtime);
    let default = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let active = PolicySlot::new(looping, Default::default());
    let fallback = PolicySlot::configure(default, &Default::default()).unwrap();
    let mut s = two_jobs_ten_seconds_apart();
    let mut control = ControlLoop::new(active, fallback, 1);
    control.run(&mut s, |_, _| {});
    assert_eq!(s.finished_jobs(), 2, "no job is lost");
    assert!(control.failures() >= 2);
    assert!(
        control
            .records()
            .iter()
            .all(|r| r.arm_a.policy == "default" && r.arm_a.failure.is_some())
    );
    assert_eq!(s.finish_time("a"), Some(50.0));
}

#[test]
fn after_a_hot_swap_to_a_broken_policy_the_previous_policy_decides_not_the_default() {
    let runtime = runtime(Duration::from_millis(30));
    let looping = looping_guest(&runtime);
    let load = |name: &str| {
        PolicySlot::configure(
            PolicyRef::parse(name).unwrap().load(&runtime).unwrap(),
            &Default::default(),
        )
        .unwrap()
    };
    let mut s = two_jobs_ten_seconds_apart();
    let mut control = ControlLoop::new(load("even"), load("default"), 1);
    let switchyard_control::Step::Round { triggers, .. } = control.wait_for_round(&mut s) else {
        panic!("the first arrival is a round");
    };
    control.round(&mut s, triggers);
    control.swap_policy(PolicySlot::new(looping, Default::default()));
    control.run(&mut s, |_, _| {});
    assert_eq!(s.finished_jobs(), 2, "no job is lost");
    let records = control.records();
    assert_eq!(records[0].arm_a.policy, "even");
    assert!(records[0].arm_a.failure.is_none());
    assert!(records.len() > 1);
    for r in &records[1..] {
        assert!(r.arm_a.failure.is_some(), "round {} did not fail", r.round);
        assert_eq!(
            r.arm_a.policy, "even",
            "round {} decided by {}",
            r.round, r.arm_a.policy
        );
    }
}

#[test]
fn a_shadow_policy_that_never_returns_changes_nothing_the_active_policy_decides() {
    use switchyard_control::Experiment;
    use switchyard_control::ExperimentMode;
    let runtime = runtime(Duration::from_millis(30));
    let load = |name: &str| {
        PolicySlot::configure(
            PolicyRef::parse(name).unwrap().load(&runtime).unwrap(),
            &Default::default(),
        )
        .unwrap()
    };
    let run = |shadow: Option<PolicySlot>| {
        let mut s = two_jobs_ten_seconds_apart();
        let mut control = ControlLoop::new(load("even"), load("default"), 1);
        if let Some(b) = shadow {
            control.start_experiment(Experiment::new(b, ExperimentMode::Shadow));
        }
        control.run(&mut s, |_, _| {});
        let decided: Vec<_> = control
            .records()
            .iter()
            .map(|r| {
                (
                    r.round,
                    r.time,
                    r.arm_a.policy.clone(),
                    r.arm_a.failure.clone(),
                    r.arm_a.accepted.clone(),
                )
            })
            .collect();
        (decided, s.outcomes(), control.experiment_report())
    };
    let (alone, alone_jobs, _) = run(None);
    let looping = PolicySlot::new(looping_guest(&runtime), Default::default());
    let (shadowed, shadowed_jobs, report) = run(Some(looping));
    assert_eq!(
        shadowed, alone,
        "the failing shadow changed arm A's decisions"
    );
    assert_eq!(shadowed_jobs, alone_jobs);
    let report = report.unwrap();
    assert_eq!(report.b_failures, report.rounds, "every shadow call failed");
    assert!(report.rounds >= 2);
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
    job.speed = Speed::Table(vec![1.0]);
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
fn a_distributed_template_labels_its_jobs_with_their_roles_and_task_count() {
    let text = "cluster:\n  nodes:\n    - {name: n, cpus: 4, memory_gib: 8}\ntemplates:\n  t:\n    work: 10\n    roles:\n      - {name: scheduler, cpus: 1, memory_gib: 1}\n      - {name: worker, count: 3, cpus: 1, memory_gib: 1, create_after: 5}\njobs:\n  - {template: t}\n";
    let scenario = Workload::parse(text, Path::new("w.yaml"))
        .unwrap()
        .scenario(0)
        .unwrap();
    let labels = &scenario.jobs[0].labels;
    assert_eq!(labels["roles"], "scheduler,worker");
    assert_eq!(labels["tasks"], "4");
    assert_eq!(scenario.jobs[0].roles[1].create_after, 5.0);
    let bad = text.replace("create_after: 5", "create_after: -1");
    let error = Workload::parse(&bad, Path::new("w.yaml"))
        .unwrap()
        .scenario(0)
        .unwrap_err()
        .to_string();
    assert!(error.contains("roles[1].create_after"), "{error}");
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
        job.speed = Speed::Table(vec![5.0, 10.0]);
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

fn workload(text: &str) -> Result<switchyard_sim::Scenario, String> {
    Workload::parse(text, Path::new("w.yaml"))
        .and_then(|w| w.scenario(7))
        .map_err(|e| e.to_string())
}

const ARRIVALS: &str = "cluster:\n  nodes: [{name: n, cpus: 4, memory_gib: 8}]\n\
    templates:\n  t: {work: 10, speed: 1.0, cpus: 1, curve: none}\njobs:\n";

fn submit_times(jobs: &str) -> Vec<f64> {
    workload(&format!("{ARRIVALS}{jobs}"))
        .unwrap()
        .jobs
        .iter()
        .map(|j| j.submit_time)
        .collect()
}

#[test]
fn fixed_interval_arrivals_come_every_interval_from_the_start() {
    assert_eq!(
        submit_times("  - {template: t, count: 3, every: 50, start: 10}\n"),
        [10.0, 60.0, 110.0]
    );
}

#[test]
fn uniform_arrivals_fall_inside_their_window_in_order() {
    let times = submit_times("  - {template: t, count: 50, uniform: 300, start: 100}\n");
    assert_eq!(times.len(), 50);
    assert!(
        times.iter().all(|t| (100.0..=400.0).contains(t)),
        "{times:?}"
    );
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    // Spread over the window, not bunched at one end.
    assert!(times[0] < 150.0 && times[49] > 350.0, "{times:?}");
}

#[test]
fn poisson_arrivals_have_mean_gaps_of_one_over_the_rate() {
    let times = submit_times("  - {template: t, count: 2000, poisson: 0.1}\n");
    let mean_gap = times.last().unwrap() / times.len() as f64;
    // 2,000 exponential gaps of mean 10 s: the mean is within 5% with overwhelming odds.
    assert!((9.5..10.5).contains(&mean_gap), "mean gap {mean_gap}");
}

#[test]
fn negative_intervals_and_costs_are_refused_with_the_field_named() {
    let every = workload(&format!(
        "{ARRIVALS}  - {{template: t, count: 2, every: -5}}\n"
    ))
    .unwrap_err();
    assert!(
        every.contains("jobs[0]") && every.contains("every"),
        "{every}"
    );
    let cost = workload(&format!(
        "simulator: {{migration_cost: -1}}\n{ARRIVALS}  - {{template: t, at: 0}}\n"
    ))
    .unwrap_err();
    assert!(cost.contains("simulator.migration_cost"), "{cost}");
}

#[test]
fn a_missing_data_file_is_an_error_naming_it_and_where_the_data_comes_from() {
    let nodes = "cluster:\n  nodes: [{name: n, cpus: 4, memory_gib: 8, gpus: 4}]\n";
    for (import, file) in [
        (
            "pollux: {path: data/pollux/workloads/workload-9.csv}",
            "workload-9.csv",
        ),
        ("philly: {path: nowhere/philly.csv}", "philly.csv"),
    ] {
        let error = workload(&format!("{nodes}import:\n  {import}\n")).unwrap_err();
        assert!(error.contains(file), "{error}");
        assert!(error.contains("data/pollux/"), "{error}");
        assert!(error.contains("README.md"), "{error}");
    }
    let replay = workload(&format!(
        "{nodes}templates:\n  t: {{work: 10, throughput: [1.0], replay: {{path: gone.csv}}}}\n\
         jobs:\n  - {{template: t, at: 0}}\n"
    ))
    .unwrap_err();
    assert!(
        replay.contains("gone.csv") && replay.contains("data/pollux/"),
        "{replay}"
    );
}

#[test]
fn a_replayed_pollux_curve_passes_through_the_measured_points() {
    let csv =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/pollux/cifar10/validation-128.csv");
    let (curve, total) = switchyard_sim::replay_curve(&csv).unwrap();
    assert_eq!(total, 39062.0);
    // The first and last rows of the file: (390, 0.4455) and (39062, 0.9448).
    assert!((curve.value(390.0 / total) - 0.4455).abs() < 1e-9);
    assert!((curve.value(1.0) - 0.9448).abs() < 1e-9);
    // Halfway between (390, 0.4455) and (781, 0.6007), linearly.
    let mid = curve.value(585.5 / total);
    assert!((mid - (0.4455 + 0.6007) / 2.0).abs() < 1e-6, "{mid}");
}

#[test]
fn a_pollux_workload_imports_every_measured_job_with_its_model_and_a_rate_for_any_size() {
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pollux-workload-1.yaml");
    let scenario = Workload::load(&example).unwrap().scenario(1).unwrap();
    // 160 jobs, less the 7 bert and 4 imagenet ones the artifact has no data for.
    assert_eq!(scenario.jobs.len(), 149);
    // GPUs per node for `r` replicas packed four to a node.
    let packed = |r: u32| -> Vec<u32> {
        let mut p = vec![4; (r / 4) as usize];
        if !r.is_multiple_of(4) {
            p.push(r % 4);
        }
        p
    };
    for job in &scenario.jobs {
        let Speed::Goodput(goodput) = &job.speed else {
            panic!("{} has no measured model", job.id);
        };
        assert_eq!(job.work, goodput.model.total_progress(), "{}", job.id);
        assert_eq!(job.comm_penalty, 1.0, "{}: measured, no penalty", job.id);
        for r in 1..=job.max_replicas {
            let (rate, _) = goodput.rate(&packed(r), 0.0);
            assert!(
                rate.is_finite() && rate > 0.0,
                "{} with {r} replicas: {rate}",
                job.id
            );
        }
    }
    let ncf = scenario.jobs.iter().find(|j| j.id == "ncf-2").unwrap();
    assert_eq!(
        ncf.roles[0].count, 1,
        "workload-1 starts ncf-2 with one replica"
    );
    // cifar10's measurements make four GPUs on two nodes slower than on one.
    let cifar = scenario.jobs.iter().find(|j| j.id == "cifar10-0").unwrap();
    let Speed::Goodput(goodput) = &cifar.speed else {
        panic!("cifar10-0 has no measured model");
    };
    assert!(goodput.rate(&[2, 2], 0.0).0 < goodput.rate(&[4], 0.0).0);
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
        job.labels = BTreeMap::from([("team".to_string(), "vision".to_string())]);
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

/// The controller restarts mid-run (a fresh loop: a new policy instance and no state
/// blob at all) while the cluster keeps running, as a Kubernetes cluster does: the jobs'
/// move histories come from the cluster, and SpeCon, which counts its at-most-once
/// reallocations from them, reallocates no job a second time although the state that
/// also remembered them is gone.
#[test]
fn move_histories_outlive_a_controller_restart_and_specon_counts_on_them() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/specon-random-20.yaml");
    let workload = Workload::load(&path).unwrap();
    let mut sim = Simulator::new(workload.scenario(workload.seed()).unwrap());
    let runtime = runtime(Duration::from_secs(5));
    let slot = |name: &str| {
        switchyard_sim::load_slot(&runtime, name, &BTreeMap::new()).expect("a built-in")
    };
    let fresh_loop = || ControlLoop::new(slot("specon"), slot("default"), 1);
    let mut control = fresh_loop();
    let mut reallocations: BTreeMap<String, usize> = BTreeMap::new();
    let mut restarted_at = None;
    loop {
        let (triggers, quiescent) = match control.wait_for_round(&mut sim) {
            switchyard_control::Step::End(_) => break,
            switchyard_control::Step::Round {
                triggers,
                quiescent,
            } => (triggers, quiescent),
        };
        let outcome = control.decide_round(&mut sim, triggers);
        for action in &outcome.record.arm_a.accepted {
            if let Operation::Migrate { job, purpose, .. } = &action.op
                && purpose == "reallocate"
            {
                *reallocations.entry(job.clone()).or_default() += 1;
            }
        }
        if quiescent && !outcome.changed {
            break;
        }
        if restarted_at.is_none() && reallocations.len() >= 3 {
            let remembered = sim
                .snapshot(vec![])
                .jobs
                .iter()
                .filter(|j| {
                    j.moves
                        .iter()
                        .any(|m| m.kind == MoveKind::Migrated && m.purpose == "reallocate")
                })
                .count();
            assert!(remembered >= 1, "the cluster shows the reallocations");
            control = fresh_loop();
            restarted_at = Some(sim.now());
        }
    }
    assert!(
        restarted_at.is_some(),
        "SpeCon reallocated: {reallocations:?}"
    );
    assert!(
        reallocations.values().all(|&n| n == 1),
        "a job reallocated twice across the restart at {restarted_at:?}: {reallocations:?}"
    );
}
