//! The validator: each rule on its own, then a property test that random action lists
//! against random snapshots never get an invalid action past it.

use switchyard_test_support as support;

use std::collections::HashMap;

use proptest::prelude::*;
use support::{cluster, job, node, res};
use switchyard_core::{
    Action, Assignment, Decision, Job, JobPhase, Node, NodeSet, Operation, Rejection, Replicas,
    Resources, Snapshot, Task, TaskPhase, check_decision,
};

fn action(op: Operation) -> Action {
    Action {
        op,
        reason: "test".into(),
    }
}

fn place(job: &str, pairs: &[(&str, &str)]) -> Action {
    action(Operation::Place {
        job: job.into(),
        assignments: pairs
            .iter()
            .map(|(t, n)| Assignment {
                task: t.to_string(),
                node: n.to_string(),
            })
            .collect(),
    })
}

fn migrate(job: &str, node: &str, purpose: &str) -> Action {
    action(Operation::Migrate {
        job: job.into(),
        task: None,
        node: node.into(),
        purpose: purpose.into(),
    })
}

fn preempt(job: &str) -> Action {
    action(Operation::Preempt { job: job.into() })
}

fn decide(snapshot: &Snapshot, actions: Vec<Action>) -> switchyard_core::Checked {
    check_decision(
        snapshot,
        &Decision {
            actions,
            ..Decision::default()
        },
    )
}

#[test]
fn two_placements_that_fit_alone_but_not_together_accept_only_the_first() {
    let snapshot = cluster()
        .node(node("n1").cpus(3.0))
        .job(job("a").task("main", "main", res(2.0, 1, 0)))
        .job(job("b").task("main", "main", res(2.0, 1, 0)))
        .build();
    let checked = decide(
        &snapshot,
        vec![place("a", &[("main", "n1")]), place("b", &[("main", "n1")])],
    );
    assert_eq!(checked.accepted.len(), 1);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NodeFull { .. }
    ));
}

#[test]
fn a_gang_with_one_member_that_does_not_fit_binds_none_of_its_members() {
    let snapshot = cluster()
        .node(node("n1").gpus(2))
        .node(node("n2").gpus(1))
        .job(
            job("g")
                .task("worker-0", "worker", res(1.0, 1, 1))
                .task("worker-1", "worker", res(1.0, 1, 1))
                .task("worker-2", "worker", res(1.0, 1, 2)),
        )
        .job(job("later").task("main", "main", res(1.0, 1, 2)))
        .build();
    let checked = decide(
        &snapshot,
        vec![
            place(
                "g",
                &[("worker-0", "n1"), ("worker-1", "n1"), ("worker-2", "n2")],
            ),
            place("later", &[("main", "n1")]),
        ],
    );
    assert_eq!(checked.rejected.len(), 1, "{:?}", checked.rejected);
    // The rejected gang charged nothing: the later job still gets both GPUs of n1.
    assert!(matches!(&checked.accepted[0].op, Operation::Place { job, .. } if job == "later"));
}

#[test]
fn a_job_that_moved_twice_already_may_move_a_third_time() {
    // The host has no "once per kind" rule: a defragmenting policy moves a job as often
    // as it likes, one move per round; SpeCon keeps its own rule from the history.
    let snapshot = cluster()
        .node(node("n1"))
        .node(node("n2"))
        .job(
            job("j")
                .running_on("n1")
                .migrated_for("reallocate")
                .migrated_for("defrag"),
        )
        .build();
    assert_eq!(snapshot.jobs[0].moves.len(), 2);
    let checked = decide(&snapshot, vec![migrate("j", "n2", "defrag")]);
    assert_eq!(checked.accepted.len(), 1, "{:?}", checked.rejected);
}

#[test]
fn a_migration_purpose_must_be_a_short_tag() {
    let snapshot = cluster()
        .node(node("n1"))
        .node(node("n2"))
        .job(job("j").running_on("n1"))
        .build();
    for bad in ["two words", "x".repeat(64).as_str(), "new\nline"] {
        let checked = decide(&snapshot, vec![migrate("j", "n2", bad)]);
        assert!(
            matches!(checked.rejected[0].reason, Rejection::BadPurpose { .. }),
            "{bad:?}: {:?}",
            checked.rejected
        );
    }
}

#[test]
fn a_running_checkpointable_job_may_be_preempted_and_nothing_else() {
    let snapshot = cluster()
        .node(node("n1").cpus(2.0))
        .node(node("n2"))
        .job(job("run").running_on("n1"))
        .job(job("pinned").running_on("n1").not_checkpointable())
        .job(job("queued"))
        .build();
    let checked = decide(
        &snapshot,
        vec![
            preempt("run"),
            preempt("pinned"),
            preempt("queued"),
            preempt("ghost"),
        ],
    );
    assert_eq!(checked.accepted, [preempt("run")]);
    let reasons: Vec<&str> = checked
        .rejected
        .iter()
        .map(|r| r.reason.metric_label())
        .collect();
    assert_eq!(
        reasons,
        ["not-checkpointable", "wrong-phase", "unknown-job"],
        "{:?}",
        checked.rejected
    );
}

#[test]
fn a_preempted_job_s_nodes_are_not_free_in_the_same_round() {
    // The checkpoint is saved first; a placement counting on the freed room waits.
    let snapshot = cluster()
        .node(node("n1").cpus(1.0))
        .job(job("old").running_on("n1"))
        .job(job("new"))
        .build();
    let checked = decide(
        &snapshot,
        vec![preempt("old"), place("new", &[("main", "n1")])],
    );
    assert_eq!(checked.accepted, [preempt("old")]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NodeFull { .. }
    ));
}

#[test]
fn placements_migrations_and_scale_targets_outside_the_eligible_set_are_refused() {
    let snapshot = cluster()
        .node(node("gpu-a"))
        .node(node("gpu-b"))
        .node(node("tainted"))
        .job(job("waiting"))
        .job(job("running").running_on("gpu-a").replicas("main", 1, 1, 3))
        .only_on("waiting", &["gpu-b"])
        .only_on("running", &["gpu-a", "gpu-b"])
        .build();
    let checked = decide(&snapshot, vec![place("waiting", &[("main", "tainted")])]);
    assert!(
        matches!(&checked.rejected[0].reason, Rejection::NotEligible { node, .. } if node == "tainted"),
        "{:?}",
        checked.rejected
    );
    assert!(
        checked.rejected[0]
            .reason
            .to_string()
            .contains("outside its eligible set")
    );
    let checked = decide(&snapshot, vec![place("waiting", &[("main", "gpu-b")])]);
    assert_eq!(checked.accepted.len(), 1);
    let checked = decide(&snapshot, vec![migrate("running", "tainted", "")]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NotEligible { .. }
    ));
    let checked = decide(&snapshot, vec![migrate("running", "gpu-b", "")]);
    assert_eq!(checked.accepted.len(), 1);
    let scale = |nodes: &[&str]| {
        action(Operation::Scale {
            job: "running".into(),
            replicas: 1 + nodes.len() as u32,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        })
    };
    let checked = decide(&snapshot, vec![scale(&["gpu-b", "tainted"])]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NotEligible { .. }
    ));
    let checked = decide(&snapshot, vec![scale(&["gpu-b", "gpu-a"])]);
    assert_eq!(checked.accepted.len(), 1, "{:?}", checked.rejected);
}

#[test]
fn a_task_naming_a_set_the_snapshot_lacks_may_run_nowhere() {
    let mut snapshot = cluster().node(node("n1")).job(job("j")).build();
    std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(&mut snapshot.jobs[0]).tasks)[0]
        .eligible = Some(9);
    let checked = decide(&snapshot, vec![place("j", &[("main", "n1")])]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NotEligible { .. }
    ));
}

#[test]
fn two_moves_of_one_job_in_one_decision_keep_only_the_first() {
    let snapshot = cluster()
        .node(node("n1"))
        .node(node("n2"))
        .job(job("j").running_on("n1"))
        .build();
    let checked = decide(
        &snapshot,
        vec![
            migrate("j", "n2", "reallocate"),
            migrate("j", "n1", "rebalance"),
            preempt("j"),
        ],
    );
    assert_eq!(checked.accepted.len(), 1);
    for rejected in &checked.rejected {
        assert!(matches!(
            rejected.reason,
            Rejection::ConflictingAction { .. }
        ));
    }
    assert_eq!(checked.rejected.len(), 2);
}

#[test]
fn a_job_that_cannot_checkpoint_is_never_migrated() {
    let snapshot = cluster()
        .node(node("n1"))
        .node(node("n2"))
        .job(job("j").running_on("n1").not_checkpointable())
        .build();
    let checked = decide(&snapshot, vec![migrate("j", "n2", "reallocate")]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NotCheckpointable { .. }
    ));
}

#[test]
fn a_placement_naming_a_task_the_job_does_not_have_is_rejected() {
    let snapshot = cluster().node(node("n1")).job(job("j")).build();
    let checked = decide(&snapshot, vec![place("j", &[("ghost", "n1")])]);
    assert!(checked.accepted.is_empty());
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::UnknownTask { .. }
    ));
}

#[test]
fn a_task_already_running_is_not_placed_again() {
    let snapshot = cluster()
        .node(node("n1"))
        .node(node("n2"))
        .job(job("j").running_on("n1"))
        .build();
    let checked = decide(&snapshot, vec![place("j", &[("main", "n2")])]);
    assert!(checked.accepted.is_empty());
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::TaskNotPending { .. }
    ));
}

#[test]
fn a_placement_with_no_assignment_is_rejected() {
    let snapshot = cluster().node(node("n1")).job(job("j")).build();
    let checked = decide(&snapshot, vec![place("j", &[])]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::EmptyPlacement { .. }
    ));
}

#[test]
fn a_restarting_job_is_neither_placed_nor_moved() {
    let mut restarting = job("r")
        .task("worker-0", "worker", res(1.0, 1, 0))
        .task("worker-1", "worker", res(1.0, 1, 0))
        .build();
    restarting.phase = JobPhase::Restarting;
    let first = &mut std::sync::Arc::make_mut(&mut restarting.tasks)[0];
    first.node = Some("n1".into());
    first.phase = TaskPhase::Restarting;
    let snapshot = Snapshot {
        jobs: vec![restarting.into()],
        ..cluster().node(node("n1")).node(node("n2")).build()
    };
    let checked = decide(
        &snapshot,
        vec![
            place("r", &[("worker-1", "n2")]),
            migrate("r", "n2", "reallocate"),
        ],
    );
    assert!(checked.accepted.is_empty(), "{:?}", checked.accepted);
    for rejected in &checked.rejected {
        assert!(
            matches!(rejected.reason, Rejection::WrongPhase { .. }),
            "{}",
            rejected.reason
        );
    }
}

#[test]
fn cpu_weights_outside_zero_to_one_are_rejected() {
    let snapshot = cluster()
        .node(node("n1"))
        .job(job("j").running_on("n1"))
        .build();
    for weight in [0.0, -0.5, 1.01, f64::NAN, f64::INFINITY] {
        let op = Operation::SetCpuWeight {
            job: "j".into(),
            task: "main".into(),
            weight,
        };
        let checked = decide(&snapshot, vec![action(op)]);
        assert!(
            matches!(
                checked.rejected[0].reason,
                Rejection::WeightOutOfRange { .. }
            ),
            "{weight}"
        );
    }
    let op = Operation::SetCpuWeight {
        job: "j".into(),
        task: "main".into(),
        weight: 1.0,
    };
    assert_eq!(decide(&snapshot, vec![action(op)]).accepted.len(), 1);
}

#[test]
fn scaling_outside_min_max_is_rejected_and_growing_needs_room_on_the_named_nodes() {
    let snapshot = cluster()
        .node(node("n1").gpus(4))
        .job(
            job("d")
                .task("worker-0", "worker", res(1.0, 1, 1))
                .task("worker-1", "worker", res(1.0, 1, 1))
                .replicas("worker", 2, 1, 4)
                .running_on("n1"),
        )
        .build();
    let scale = |replicas: u32, nodes: &[&str]| {
        action(Operation::Scale {
            job: "d".into(),
            replicas,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        })
    };
    let checked = decide(&snapshot, vec![scale(5, &["n1", "n1", "n1"])]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::BadReplicaCount { .. }
    ));
    let checked = decide(&snapshot, vec![scale(0, &[])]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::BadReplicaCount { .. }
    ));
    let checked = decide(&snapshot, vec![scale(4, &["n1", "n1"])]);
    assert_eq!(checked.accepted.len(), 1, "{:?}", checked.rejected);
    let mut full = snapshot.clone();
    std::sync::Arc::make_mut(&mut full.nodes[0]).requested.gpus = 3;
    let checked = decide(&full, vec![scale(4, &["n1", "n1"])]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NodeFull { .. }
    ));
}

#[test]
fn a_job_with_one_task_per_node_is_never_given_two_tasks_on_one_node() {
    let worker = res(1.0, 1, 0);
    let snapshot = cluster()
        .node(node("n1").cpus(8.0))
        .node(node("n2").cpus(8.0))
        .node(node("n3").cpus(8.0))
        .job(
            job("spread")
                .task("worker-0", "worker", worker)
                .task("worker-1", "worker", worker)
                .one_task_per_node(),
        )
        .job(
            job("running")
                .task("worker-0", "worker", worker)
                .task("worker-1", "worker", worker)
                .running_on("n1")
                .replicas("worker", 2, 1, 4)
                .one_task_per_node(),
        )
        .job(
            job("packed")
                .task("worker-0", "worker", worker)
                .task("worker-1", "worker", worker),
        )
        .build();
    let together = place("spread", &[("worker-0", "n1"), ("worker-1", "n1")]);
    let checked = decide(&snapshot, vec![together]);
    let [rejected] = checked.rejected.as_slice() else {
        panic!("the shared node is refused: {checked:?}");
    };
    assert!(
        matches!(&rejected.reason, Rejection::SharedNode { node, .. } if node == "n1"),
        "{rejected:?}"
    );
    assert!(
        rejected
            .reason
            .to_string()
            .contains("`worker-0` and `worker-1`"),
        "{}",
        rejected.reason
    );
    assert_eq!(rejected.reason.metric_label(), "shared-node");
    // Apart: accepted; in two placements of one decision, the second may not join the first.
    let apart = place("spread", &[("worker-0", "n1"), ("worker-1", "n2")]);
    assert_eq!(decide(&snapshot, vec![apart]).accepted.len(), 1);
    let checked = decide(
        &snapshot,
        vec![
            place("spread", &[("worker-0", "n2")]),
            place("spread", &[("worker-1", "n2")]),
        ],
    );
    assert_eq!((checked.accepted.len(), checked.rejected.len()), (1, 1));
    // A job without the label may pack its tasks.
    let packed = place("packed", &[("worker-0", "n3"), ("worker-1", "n3")]);
    assert_eq!(decide(&snapshot, vec![packed]).accepted.len(), 1);
    // Moving one task onto its sibling's node, or growing onto it, is refused.
    let mut snapshot = snapshot;
    std::sync::Arc::make_mut(&mut std::sync::Arc::make_mut(&mut snapshot.jobs[1]).tasks)[1].node =
        Some("n2".into());
    let migrate_to = |node: &str| {
        action(Operation::Migrate {
            job: "running".into(),
            task: Some("worker-0".into()),
            node: node.into(),
            purpose: String::new(),
        })
    };
    assert!(matches!(
        decide(&snapshot, vec![migrate_to("n2")]).rejected[0].reason,
        Rejection::SharedNode { .. }
    ));
    assert_eq!(decide(&snapshot, vec![migrate_to("n3")]).accepted.len(), 1);
    assert!(
        matches!(
            decide(&snapshot, vec![migrate("running", "n3", "")]).rejected[0].reason,
            Rejection::SharedNode { .. }
        ),
        "the whole job onto one node"
    );
    let grow = |nodes: &[&str]| {
        action(Operation::Scale {
            job: "running".into(),
            replicas: 2 + nodes.len() as u32,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
        })
    };
    for refused in [&["n3", "n3"][..], &["n1"]] {
        assert!(matches!(
            decide(&snapshot, vec![grow(refused)]).rejected[0].reason,
            Rejection::SharedNode { .. }
        ));
    }
    assert_eq!(decide(&snapshot, vec![grow(&["n3"])]).accepted.len(), 1);
}

#[test]
fn placing_on_a_cordoned_node_is_rejected() {
    let snapshot = cluster()
        .node(node("n1").unschedulable())
        .job(job("j"))
        .build();
    let checked = decide(&snapshot, vec![place("j", &[("main", "n1")])]);
    assert!(matches!(
        checked.rejected[0].reason,
        Rejection::NodeUnschedulable { .. }
    ));
}

// ---- property: nothing invalid gets through -------------------------------------------

const NODE_NAMES: &[&str] = &["n0", "n1", "n2", "n3", "ghost"];
const JOB_IDS: &[&str] = &["j0", "j1", "j2", "j3", "nobody"];
const TASK_NAMES: &[&str] = &["worker-0", "worker-1", "worker-2", "ps-0", "nothing"];

fn arb_resources(max_cpu: u64, max_gpus: u32) -> impl Strategy<Value = Resources> {
    (0..=max_cpu, 0u64..=8, 0..=max_gpus).prop_map(|(cpu, gib, gpus)| Resources {
        cpu_millis: cpu * 250,
        memory_bytes: gib << 30,
        gpus,
    })
}

/// A consistent snapshot: bound tasks fit their nodes and are charged to them.
fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
    let nodes = prop::collection::vec((arb_resources(32, 4), any::<bool>()), 1..=4);
    let jobs = prop::collection::vec(
        (
            prop::collection::vec((arb_resources(8, 2), 0usize..6), 1..=3),
            (prop::option::of(0u32..3), any::<bool>()),
            (1u32..=2, 2u32..=4),
        ),
        1..=4,
    );
    // Three eligibility sets over the first four node positions (a position past the
    // cluster's end is left out, as the host would never send one).
    let sets = prop::collection::vec(prop::collection::btree_set(0u32..4, 0..=4), 3);
    (nodes, jobs, sets).prop_map(|(nodes, jobs, sets)| {
        let mut nodes: Vec<Node> = nodes
            .into_iter()
            .enumerate()
            .map(|(i, (allocatable, cordoned))| Node {
                name: NODE_NAMES[i].into(),
                allocatable,
                requested: Resources::default(),
                usage: None,
                labels: Default::default(),
                schedulable: !cordoned || i == 0,
            })
            .collect();
        let jobs = jobs
            .into_iter()
            .enumerate()
            .map(|(j, (tasks, (eligible, checkpointable), (min, max)))| {
                let tasks: Vec<Task> = tasks
                    .into_iter()
                    .enumerate()
                    .map(|(t, (requests, where_))| {
                        let target = nodes.get_mut(where_).filter(|n| {
                            n.allocatable
                                .saturating_minus(&n.requested)
                                .covers(&requests)
                        });
                        let node = target.map(|n| {
                            n.requested = n.requested.plus(&requests);
                            n.name.clone()
                        });
                        Task {
                            name: format!("worker-{t}"),
                            role: "worker".into(),
                            phase: if node.is_some() {
                                TaskPhase::Running
                            } else {
                                TaskPhase::Pending
                            },
                            node,
                            requests,
                            cpu_weight: 1.0,
                            usage: None,
                            eligible,
                        }
                    })
                    .collect();
                let current = tasks.len() as u32;
                let placed = tasks.iter().filter(|t| t.node.is_some()).count();
                Job {
                    id: JOB_IDS[j].into(),
                    phase: if placed == 0 {
                        JobPhase::Waiting
                    } else {
                        JobPhase::Running
                    },
                    submit_time: j as f64,
                    start_time: None,
                    priority: 0,
                    utility: 1.0,
                    tasks: tasks.into(),
                    replicas: Replicas {
                        role: "worker".into(),
                        current,
                        min: min.min(current),
                        max: max.max(current),
                    },
                    loss: Default::default(),
                    metric_rises: false,
                    moves: Default::default(),
                    checkpointable,
                    labels: Default::default(),
                }
            })
            .map(Into::into)
            .collect();
        let count = nodes.len() as u32;
        Snapshot {
            time: 0.0,
            triggers: vec![],
            nodes: nodes.into_iter().map(Into::into).collect(),
            jobs,
            node_sets: std::sync::Arc::new(
                sets.into_iter()
                    .enumerate()
                    .map(|(id, nodes)| NodeSet {
                        id: id as u32,
                        nodes: nodes.into_iter().filter(|&n| n < count).collect(),
                    })
                    .collect(),
            ),
        }
    })
}

fn arb_operation() -> impl Strategy<Value = Operation> {
    let job = prop::sample::select(JOB_IDS).prop_map(String::from);
    let task = prop::sample::select(TASK_NAMES).prop_map(String::from);
    let node = prop::sample::select(NODE_NAMES).prop_map(String::from);
    let assignment =
        (task.clone(), node.clone()).prop_map(|(task, node)| Assignment { task, node });
    prop_oneof![
        (job.clone(), prop::collection::vec(assignment, 0..=4))
            .prop_map(|(job, assignments)| Operation::Place { job, assignments }),
        (
            job.clone(),
            prop::option::of(task.clone()),
            node.clone(),
            prop::sample::select(&["", "rebalance", "two words"][..])
        )
            .prop_map(|(job, task, node, purpose)| Operation::Migrate {
                job,
                task,
                node,
                purpose: purpose.into(),
            }),
        (job.clone(), task, -0.5f64..1.5).prop_map(|(job, task, weight)| Operation::SetCpuWeight {
            job,
            task,
            weight
        }),
        (job.clone(), 0u32..=5, prop::collection::vec(node, 0..=3)).prop_map(
            |(job, replicas, nodes)| Operation::Scale {
                job,
                replicas,
                nodes
            }
        ),
        job.clone().prop_map(|job| Operation::Wait { job }),
        job.prop_map(|job| Operation::Preempt { job }),
    ]
}

/// Applies accepted actions the simple way and checks every invariant the validator
/// promises. Independent of the validator's own bookkeeping on purpose.
fn assert_invariants(snapshot: &Snapshot, accepted: &[Action]) {
    let mut requested: HashMap<&str, Resources> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.requested))
        .collect();
    let mut bound: HashMap<(&str, &str), &str> = HashMap::new();
    let mut moves: HashMap<&str, usize> = HashMap::new();
    let eligible = |task: &Task, node: &str| -> bool {
        task.eligible.is_none_or(|id| {
            snapshot.node_set(id).is_some_and(|set| {
                set.nodes
                    .iter()
                    .any(|&i| snapshot.nodes[i as usize].name == node)
            })
        })
    };
    for a in accepted {
        let job = snapshot
            .job(a.op.job())
            .expect("accepted action names a known job");
        match &a.op {
            Operation::Place { assignments, .. } => {
                assert!(!assignments.is_empty());
                for asg in assignments {
                    let task = job.task(&asg.task).expect("known task");
                    assert!(task.node.is_none(), "placed a bound task");
                    assert!(
                        bound.insert((&job.id, &asg.task), &asg.node).is_none(),
                        "placed twice"
                    );
                    let node = snapshot.node(&asg.node).expect("known node");
                    assert!(node.schedulable);
                    assert!(eligible(task, &asg.node), "placed outside the eligible set");
                    let r = requested.get_mut(asg.node.as_str()).unwrap();
                    *r = r.plus(&task.requests);
                }
            }
            Operation::Migrate {
                task,
                node,
                purpose,
                ..
            } => {
                assert!(job.checkpointable);
                assert!(!purpose.contains(' '), "a purpose with a space");
                *moves.entry(&job.id).or_default() += 1;
                let moving: Vec<&Task> = match task {
                    Some(t) => vec![job.task(t).expect("known task")],
                    None => job.tasks.iter().collect(),
                };
                for t in moving {
                    let from = t.node.as_deref().expect("only bound tasks move");
                    if from != node {
                        assert!(eligible(t, node), "migrated outside the eligible set");
                        let r = requested.get_mut(node.as_str()).expect("known node");
                        *r = r.plus(&t.requests);
                        let r = requested.get_mut(from).unwrap();
                        *r = r.saturating_minus(&t.requests);
                    }
                }
            }
            Operation::SetCpuWeight { task, weight, .. } => {
                assert!(job.task(task).is_some());
                assert!(*weight > 0.0 && *weight <= 1.0);
            }
            Operation::Scale {
                replicas, nodes, ..
            } => {
                assert!(job.checkpointable);
                assert!(*replicas >= job.replicas.min && *replicas <= job.replicas.max);
                *moves.entry(&job.id).or_default() += 1;
                let template = job
                    .tasks
                    .iter()
                    .find(|t| t.role == job.replicas.role)
                    .unwrap();
                for n in nodes {
                    assert!(eligible(template, n), "scaled outside the eligible set");
                    let r = requested.get_mut(n.as_str()).expect("known node");
                    *r = r.plus(&template.requests);
                }
            }
            Operation::Wait { .. } => {}
            Operation::Preempt { .. } => {
                assert!(job.checkpointable && job.phase == JobPhase::Running);
                *moves.entry(&job.id).or_default() += 1;
            }
        }
    }
    for n in &snapshot.nodes {
        assert!(
            n.allocatable.covers(&requested[n.name.as_str()]),
            "node {} over-committed",
            n.name
        );
    }
    assert!(
        moves.values().all(|&m| m <= 1),
        "a job moved twice in one decision"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_actions_against_random_snapshots_never_pass_an_invalid_action(
        snapshot in arb_snapshot(),
        ops in prop::collection::vec(arb_operation(), 0..12),
    ) {
        let actions: Vec<Action> = ops.into_iter().map(action).collect();
        let checked = decide(&snapshot, actions.clone());
        prop_assert_eq!(checked.accepted.len() + checked.rejected.len(), actions.len());
        assert_invariants(&snapshot, &checked.accepted);
    }
}
