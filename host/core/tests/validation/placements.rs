//! What a placement must satisfy: room on its nodes for the accepted actions so far, all
//! of a gang or none of it, pending tasks only, eligible nodes, one task per node when
//! the job asks for it, no cordoned node.

use crate::support::{cluster, job, node, res};
use crate::{action, decide, migrate, place};
use switchyard_core::{Operation, Rejection};

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
