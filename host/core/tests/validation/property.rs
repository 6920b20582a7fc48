//! The property: random action lists against random snapshots never get an invalid action
//! past the validator, checked by applying what it accepts the simple way.

use std::collections::HashMap;

use proptest::prelude::*;

use crate::{action, decide};
use switchyard_core::{
    Action, Assignment, Job, JobPhase, Node, NodeSet, Operation, Replicas, Resources, Snapshot,
    Task, TaskPhase,
};

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
    let mut placed_jobs: std::collections::HashSet<&str> = std::collections::HashSet::new();
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
                placed_jobs.insert(job.id.as_str());
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
    assert!(
        moves.keys().all(|j| !placed_jobs.contains(j)),
        "a job placed and moved in one decision"
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
