//! A leader that starts (or restarts) acts only on complete caches: before its pod
//! reflector has listed, every job would look waiting and every restart's old pods gone.

use std::sync::atomic::{AtomicBool, Ordering};

use switchyard_control::{Advance, Cluster, ControlLoop, Leader, LiveCluster, Step};
use switchyard_core::{JobPhase, Trigger};
use switchyard_kube::{CheckpointMethod, Phase, TrainingJobStatus};

use crate::cluster::{default_policy, runtime};
use crate::support::fixtures::*;
use crate::support::mock::{Access, MockServer};
use crate::support::world::{World, blocking};

/// Job `a` runs on n1; job `b` is half-way through a migration to n1, its old pod
/// stopping on n2. Both pods exist, but the pod reflector has not listed them yet.
pub(crate) async fn a_leader_with_an_unlisted_pod_cache_waits_for_it() -> Vec<Access> {
    let mut world = World::pods_unlisted()
        .node(node("n1", 8))
        .node(node("n2", 8));
    let a = JobBuilder::new("a")
        .push_progress()
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            ..TrainingJobStatus::default()
        });
    let b = restarting(
        &JobBuilder::new("b")
            .push_progress()
            .checkpoint(CheckpointMethod::Signal, 30),
        TrainingJobStatus {
            placements: vec![placement("main-0", "b-main-0-0", "n2")],
            migrations: 1,
            generation: 1,
            ..TrainingJobStatus::default()
        },
        migration("b-main-0-0", "main-0", "n1", None),
    );
    world.job(&a);
    world.job(&b);
    // Nothing is created, bound or deleted, before or after the list comes back.
    let (client, server) = MockServer::start(vec![]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, (advance, synced)) = blocking(cluster, |c| {
        let stop = AtomicBool::new(false);
        let mut looks = 0;
        let advance = c.advance_live(None, &stop, &mut |_| {
            looks += 1;
            if looks == 40 {
                stop.store(true, Ordering::Relaxed);
            }
        });
        (advance, c.synced())
    })
    .await;
    assert_eq!(
        advance,
        Advance::Stopped,
        "no round before the pods are listed"
    );
    assert!(!synced, "the pod cache is not synced yet");

    world.pods_listed(vec![
        pod("a", "main-0", 0, Some("n1")),
        terminating(pod("b", "main-0", 0, Some("n2"))),
    ]);
    let (_, (triggers, snapshot, record)) = blocking(cluster, |c| {
        let slot = default_policy(&runtime());
        let mut control = ControlLoop::new(slot.clone(), slot, 0);
        let Step::Round { triggers, .. } = control.wait_for_round(c) else {
            panic!("the listed caches make a round due");
        };
        let snapshot = c.snapshot(Vec::new());
        let record = control.decide_round(c, triggers.clone()).record;
        (triggers, snapshot, record)
    })
    .await;
    assert!(triggers.contains(&Trigger::JobArrived("ml/a".into())));
    assert_eq!(snapshot.job("ml/a").unwrap().phase, JobPhase::Running);
    assert_eq!(snapshot.job("ml/b").unwrap().phase, JobPhase::Restarting);
    assert!(record.arm_a.accepted.is_empty(), "{record:?}");
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_pod_cache_has_not_listed_creates_deletes_and_places_nothing() {
    a_leader_with_an_unlisted_pod_cache_waits_for_it().await;
}
