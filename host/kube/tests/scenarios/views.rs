//! The snapshot's views of nodes and jobs are kept from one round to the next until
//! what they are made of changes, and dropped with what they view.

use std::sync::Arc;

use crate::support::fixtures::*;
use crate::support::world::World;

#[tokio::test]
async fn a_snapshot_keeps_the_views_of_what_did_not_change_and_rebuilds_the_rest() {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    world.job(&JobBuilder::new("a"));
    world.job(&JobBuilder::new("b"));
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let first = world.caches.snapshot(0.0, vec![]);
    let second = world.caches.snapshot(1.0, vec![]);
    assert_eq!(first.jobs.len(), 2);
    for (before, after) in first.jobs.iter().zip(&second.jobs) {
        assert!(Arc::ptr_eq(before, after), "job {} rebuilt", after.id);
    }
    for (before, after) in first.nodes.iter().zip(&second.nodes) {
        assert!(Arc::ptr_eq(before, after), "node {} rebuilt", after.name);
    }
    assert!(Arc::ptr_eq(&first.node_sets, &second.node_sets));

    // b's pod is bound to n2: b's view and n2's change, a's and n1's do not.
    world.pod(pod("b", "main-0", 0, Some("n2")));
    let third = world.caches.snapshot(2.0, vec![]);
    let job = |s: &switchyard_core::model::Snapshot, id: &str| {
        s.jobs.iter().find(|j| j.id == id).cloned().unwrap()
    };
    assert!(Arc::ptr_eq(&job(&second, "ml/a"), &job(&third, "ml/a")));
    assert!(!Arc::ptr_eq(&job(&second, "ml/b"), &job(&third, "ml/b")));
    assert_eq!(
        job(&third, "ml/b").tasks[0].node.as_deref(),
        Some("n2"),
        "the rebuilt view shows the binding"
    );
    assert!(Arc::ptr_eq(&second.nodes[0], &third.nodes[0]), "n1 kept");
    assert!(
        !Arc::ptr_eq(&second.nodes[1], &third.nodes[1]),
        "n2 rebuilt"
    );
    assert_eq!(third.node("n2").unwrap().requested.cpu_millis, 2000);

    // A loss sample changes the job's view.
    world.caches.record_sample("ml/a", 3.0, Some(10), 1.5);
    let fourth = world.caches.snapshot(3.0, vec![]);
    assert_eq!(job(&fourth, "ml/a").loss.len(), 1);

    // A's pod goes: its requests are no longer kept, and n1 is free again.
    world.pod_gone(pod("a", "main-0", 0, Some("n1")));
    let fifth = world.caches.snapshot(4.0, vec![]);
    assert_eq!(fifth.node("n1").unwrap().requested.cpu_millis, 0);
    let (pods, nodes, jobs) = world.caches.views.lock().unwrap().kept();
    assert_eq!((pods, nodes, jobs), (1, 2, 2));
}
