//! A job owns the pods whose controller owner reference names its UID, not every pod
//! with its name in a label: a job deleted and created again under the same name never
//! takes the old one's pods for its own. And a controller acts only on the jobs of its
//! class (`spec.managedBy`): two installations never act on one job.

use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_core::{JobPhase, Trigger};

use crate::support::fixtures::*;
use crate::support::mock::{Access, MockServer};
use crate::support::world::{World, blocking};

pub(crate) async fn a_job_created_again_under_the_same_name_adopts_nothing() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    // Job a ran, succeeded and was deleted; its pod (owned by uid-a) is still there,
    // waiting for the garbage collector. A new job a (uid-a2) has just been created.
    let mut value = JobBuilder::new("a").push_progress().json();
    value["metadata"]["uid"] = json!("uid-a2");
    let again = JobBuilder::from_json(value);
    world.job(&again);
    let old = succeeded(pod("a", "main-0", 0, Some("n1")));
    world.pod(old.clone());
    // Not marked Succeeded, nothing deleted or created while the old pod is there.
    let (client, server) = MockServer::start(vec![]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, snapshot) = blocking(cluster, |c| {
        c.advance(Some(at(0).as_second() as f64));
        c.snapshot(Vec::new())
    })
    .await;
    let a = snapshot.job("ml/a").expect("the new job is active");
    assert_eq!(
        a.phase,
        JobPhase::Restarting,
        "held until the old job's pods are gone: their names would collide"
    );
    assert!(a.tasks.iter().all(|t| t.node.is_none()));
    world.pod_gone(old);
    let (_, snapshot) = blocking(cluster, |c| c.snapshot(Vec::new())).await;
    assert_eq!(snapshot.job("ml/a").unwrap().phase, JobPhase::Waiting);
    server.finish().await
}

pub(crate) async fn another_installation_s_job_is_neither_seen_nor_touched() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let mut value = JobBuilder::new("a").push_progress().json();
    value["spec"]["managedBy"] = json!("other.example/controller");
    let theirs = JobBuilder::from_json(value);
    world.job(&theirs);
    // Its pod failed: for its own controller to deal with, not for this one.
    world.pod(failed(pod("a", "main-0", 0, Some("n1")), "Error"));
    let (client, server) = MockServer::start(vec![]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, (advanced, snapshot)) = blocking(cluster, |c| {
        let advanced = c.advance(Some(at(0).as_second() as f64));
        (advanced, c.snapshot(Vec::new()))
    })
    .await;
    assert!(snapshot.job("ml/a").is_none(), "not this controller's job");
    // Changed since (a round that visits only what changed): still not.
    world.job(&theirs);
    let changed = world.caches.snapshot(1.0, vec![]);
    assert!(changed.job("ml/a").is_none(), "nor after a change to it");
    let arrived = |t: &Trigger| matches!(t, Trigger::JobArrived(_));
    assert!(
        !matches!(&advanced, switchyard_control::Advance::Events(t) if t.iter().any(arrived)),
        "no arrival: {advanced:?}"
    );
    // The installation of its class sees it.
    let mut other = World::new().node(node("n1", 8));
    other.caches = other.caches.of_class("other.example/controller");
    other.job(&theirs);
    assert!(other.caches.snapshot(0.0, vec![]).job("ml/a").is_some());
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_of_another_controller_class_is_not_in_the_snapshot_and_nothing_is_done_to_it() {
    another_installation_s_job_is_neither_seen_nor_touched().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_deleted_and_created_again_under_the_same_name_does_not_adopt_the_old_pods() {
    a_job_created_again_under_the_same_name_adopts_nothing().await;
}
