//! What a move must satisfy: a migration, a rescale or a preemption needs a running
//! checkpointable job, moved at most once per round and not in a round that places it;
//! a migration's purpose is a short tag, a CPU weight is in (0, 1], a rescale stays in
//! its range and growing needs room.

use crate::support::{cluster, job, node, res};
use crate::{action, decide, migrate, place, preempt};
use switchyard_core::{JobPhase, Operation, Rejection, Snapshot, TaskPhase};

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
fn a_placement_and_a_move_of_one_job_in_one_decision_keep_only_the_first() {
    // worker-0 runs on n1, worker-1 waits: a placement of worker-1 and a restart of the
    // job in one round would restart without the pod the placement makes.
    let mut partly = job("j")
        .task("worker-0", "worker", res(1.0, 1, 0))
        .task("worker-1", "worker", res(1.0, 1, 0))
        .replicas("worker", 2, 1, 3)
        .build();
    let first = &mut std::sync::Arc::make_mut(&mut partly.tasks)[0];
    first.node = Some("n1".into());
    first.phase = TaskPhase::Running;
    partly.phase = JobPhase::Running;
    let snapshot = Snapshot {
        jobs: vec![partly.into()],
        ..cluster().node(node("n1")).node(node("n2")).build()
    };
    let grow = action(Operation::Scale {
        job: "j".into(),
        replicas: 3,
        nodes: vec!["n2".into()],
    });
    let move_first = action(Operation::Migrate {
        job: "j".into(),
        task: Some("worker-0".into()),
        node: "n2".into(),
        purpose: String::new(),
    });
    let orders = [
        vec![place("j", &[("worker-1", "n2")]), move_first.clone()],
        vec![move_first, place("j", &[("worker-1", "n2")])],
        vec![place("j", &[("worker-1", "n2")]), preempt("j")],
        vec![preempt("j"), place("j", &[("worker-1", "n2")])],
        vec![place("j", &[("worker-1", "n2")]), grow.clone()],
        vec![grow, place("j", &[("worker-1", "n2")])],
    ];
    for actions in orders {
        let checked = decide(&snapshot, actions.clone());
        assert_eq!(checked.accepted, actions[..1], "{actions:?}");
        let [rejected] = checked.rejected.as_slice() else {
            panic!("the second is refused: {checked:?}");
        };
        assert!(
            matches!(rejected.reason, Rejection::ConflictingAction { .. }),
            "{}",
            rejected.reason
        );
        assert_eq!(rejected.reason.metric_label(), "conflicting-action");
    }
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
