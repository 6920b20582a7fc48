//! The snapshot's views of nodes and jobs are kept from one round to the next until
//! what they are made of changes, and dropped with what they view. What changed is what
//! the watch events said: each test feeds the caches as the reflectors do, event by
//! event, and checks that the next snapshot (or pass) shows it.

use std::sync::Arc;

use switchyard_control::{Advance, Cluster, Leader};
use switchyard_core::{Snapshot, TaskPhase, Trigger};

use crate::support::fixtures::*;
use crate::support::mock::MockServer;
use crate::support::world::{World, blocking};

fn job(s: &Snapshot, id: &str) -> Arc<switchyard_core::Job> {
    s.jobs.iter().find(|j| j.id == id).cloned().unwrap()
}

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

    // A loss sample changes the job's view, and nothing but its series: the new view
    // shares the kept one's tasks, so the host's diff sees by identity that they are
    // the same.
    world.caches.record_sample("ml/a", 3.0, Some(10), 1.5);
    let fourth = world.caches.snapshot(3.0, vec![]);
    assert_eq!(job(&fourth, "ml/a").loss.len(), 1);
    assert!(Arc::ptr_eq(&job(&third, "ml/b"), &job(&fourth, "ml/b")));
    assert!(Arc::ptr_eq(
        &job(&third, "ml/a").tasks,
        &job(&fourth, "ml/a").tasks
    ));
    world.caches.record_sample("ml/a", 3.5, Some(20), 1.2);
    let relossed = world.caches.snapshot(3.5, vec![]);
    let (before, after) = (job(&fourth, "ml/a"), job(&relossed, "ml/a"));
    assert_eq!(
        after.loss.iter().map(|s| s.value).collect::<Vec<_>>(),
        [1.5, 1.2]
    );
    assert!(Arc::ptr_eq(&before.tasks, &after.tasks));
    let whole = switchyard_core::Job {
        loss: after.loss.clone(),
        ..(*before).clone()
    };
    assert_eq!(*after, whole, "only the series moved on");
    // A pod change and a sample together rebuild the view from the pods.
    world.pod(pod("a", "main-0", 0, Some("n2")));
    world.caches.record_sample("ml/a", 3.7, Some(30), 1.1);
    let moved = world.caches.snapshot(3.7, vec![]);
    assert_eq!(job(&moved, "ml/a").tasks[0].node.as_deref(), Some("n2"));
    assert_eq!(job(&moved, "ml/a").loss.len(), 3);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let fourth = world.caches.snapshot(3.8, vec![]);
    assert_eq!(job(&fourth, "ml/a").tasks[0].node.as_deref(), Some("n1"));

    // A's pod goes: n1 is free again.
    world.pod_gone(pod("a", "main-0", 0, Some("n1")));
    let fifth = world.caches.snapshot(4.0, vec![]);
    assert_eq!(fifth.node("n1").unwrap().requested.cpu_millis, 0);
    assert_eq!(world.caches.views.lock().unwrap().kept(), (2, 2));
}

#[tokio::test]
async fn a_pod_added_changed_or_deleted_by_a_watch_event_shows_in_the_next_snapshot() {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    world.job(&JobBuilder::new("a"));
    world.job(&JobBuilder::new("b"));
    let first = world.caches.snapshot(0.0, vec![]);
    assert_eq!(job(&first, "ml/a").tasks[0].phase, TaskPhase::Pending);
    let untouched = job(&first, "ml/b");

    // Added: a's pod, bound to n1.
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let added = world.caches.snapshot(1.0, vec![]);
    let a = job(&added, "ml/a");
    assert_eq!(
        (a.tasks[0].phase, a.tasks[0].node.as_deref()),
        (TaskPhase::Running, Some("n1"))
    );
    assert_eq!(added.node("n1").unwrap().requested.cpu_millis, 2000);

    // Changed: the pod failed; it no longer holds n1, and its task is being replaced.
    let mut failed = pod("a", "main-0", 0, Some("n1"));
    failed.status.as_mut().unwrap().phase = Some("Failed".into());
    world.pod(failed);
    let changed = world.caches.snapshot(2.0, vec![]);
    assert_eq!(job(&changed, "ml/a").tasks[0].phase, TaskPhase::Restarting);
    assert_eq!(changed.node("n1").unwrap().requested.cpu_millis, 0);

    // Deleted: the task waits again.
    world.pod_gone(pod("a", "main-0", 0, Some("n1")));
    let deleted = world.caches.snapshot(3.0, vec![]);
    let a = job(&deleted, "ml/a");
    assert_eq!(
        (a.tasks[0].phase, a.tasks[0].node.as_deref()),
        (TaskPhase::Pending, None)
    );

    // b saw none of it: its view is the same `Arc` throughout, and so is n2's.
    for snapshot in [&added, &changed, &deleted] {
        assert!(Arc::ptr_eq(&untouched, &job(snapshot, "ml/b")));
        assert!(Arc::ptr_eq(&first.nodes[1], &snapshot.nodes[1]));
    }
}

#[tokio::test]
async fn a_relist_that_no_longer_lists_a_pod_a_job_or_a_node_removes_it() {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let (a, b) = (JobBuilder::new("a"), JobBuilder::new("b"));
    world.job(&a);
    world.job(&b);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    world.pod(pod("b", "main-0", 0, Some("n2")));
    let before = world.caches.snapshot(0.0, vec![]);
    assert_eq!(before.node("n2").unwrap().requested.cpu_millis, 2000);

    // The pod watch restarts; its list has a's pod and not b's: no Delete event came.
    world.pods_listed(vec![pod("a", "main-0", 0, Some("n1"))]);
    let relisted = world.caches.snapshot(1.0, vec![]);
    assert_eq!(job(&relisted, "ml/b").tasks[0].phase, TaskPhase::Pending);
    assert_eq!(job(&relisted, "ml/b").tasks[0].node, None);
    assert_eq!(relisted.node("n2").unwrap().requested.cpu_millis, 0);
    assert_eq!(job(&relisted, "ml/a").tasks[0].node.as_deref(), Some("n1"));

    // The job watch restarts without b, the node watch without n2.
    world.jobs_listed(&[&a]);
    world.nodes_listed(vec![node("n1", 8)]);
    let after = world.caches.snapshot(2.0, vec![]);
    assert_eq!(
        after.jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        ["ml/a"]
    );
    assert_eq!(
        after
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>(),
        ["n1"]
    );
    assert_eq!(world.caches.views.lock().unwrap().kept(), (1, 1));
}

#[tokio::test]
async fn the_leader_s_pass_hears_of_what_the_events_and_a_relist_changed() {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let (a, b) = (JobBuilder::new("a"), JobBuilder::new("b"));
    world.job(&a);
    world.job(&b);
    let (client, server) = MockServer::start(vec![]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let pass = |cluster| {
        blocking(cluster, |cluster| {
            let now = cluster.now();
            match cluster.advance(Some(now)) {
                Advance::Events(triggers) => triggers,
                _ => Vec::new(),
            }
        })
    };
    let (cluster, first) = pass(cluster).await;
    assert_eq!(
        first,
        [
            Trigger::JobArrived("ml/a".into()),
            Trigger::JobArrived("ml/b".into()),
            Trigger::NodeChanged("n1".into()),
            Trigger::NodeChanged("n2".into()),
        ]
    );
    let (cluster, steady) = pass(cluster).await;
    assert_eq!(steady, [], "nothing changed");

    // A new job by a watch event; b and n2 gone by a relist only.
    world.job(&JobBuilder::new("c"));
    let (cluster, arrived) = pass(cluster).await;
    assert_eq!(arrived, [Trigger::JobArrived("ml/c".into())]);
    world.jobs_listed(&[&a, &JobBuilder::new("c")]);
    let (cluster, job_gone) = pass(cluster).await;
    assert_eq!(job_gone, [Trigger::JobFinished("ml/b".into())]);
    world.nodes_listed(vec![node("n1", 8)]);
    let (_, node_gone) = pass(cluster).await;
    assert_eq!(node_gone, [Trigger::NodeChanged("n2".into())]);
    server.finish().await;
}
