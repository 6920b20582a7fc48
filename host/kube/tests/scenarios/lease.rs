//! Leader election over a Lease: acquire, renew, take over, lose a race, release, and
//! stop acting when a renewal hangs.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use serde_json::json;
use switchyard_control::Leader;

use crate::support::mock::{Expect, MockServer};
use switchyard_kube::*;

const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/switchyard/leases/switchyard-leader";

fn lock(client: kube::Client) -> LeaseLock {
    LeaseLock::new(
        Api::namespaced(client, "switchyard"),
        "switchyard-leader",
        "controller-a",
        Duration::from_secs(15),
    )
}

fn lease(holder: &str, renewed: &str, version: &str, transitions: i32) -> serde_json::Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "switchyard-leader", "namespace": "switchyard", "resourceVersion": version},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renewed,
            "acquireTime": renewed, "leaseTransitions": transitions}})
}

fn at(time: &str) -> Timestamp {
    time.parse().unwrap()
}

#[tokio::test]
async fn a_missing_lease_is_created_with_this_replica_as_holder() {
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).fail(404, "NotFound", "leases \"switchyard-leader\" not found"),
        Expect::post("/apis/coordination.k8s.io/v1/namespaces/switchyard/leases")
            .body(json!({"metadata": {"name": "switchyard-leader"},
                "spec": {"holderIdentity": "controller-a", "leaseDurationSeconds": 15, "leaseTransitions": 0}}))
            .respond(201, lease("controller-a", "2026-01-01T00:00:00Z", "1", 0)),
    ]);
    let outcome = lock(client)
        .try_acquire_or_renew(at("2026-01-01T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(outcome, Leadership::Leading);
    server.finish().await;
}

#[tokio::test]
async fn the_holder_renews_with_the_resource_version_it_read() {
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).ok(lease("controller-a", "2026-01-01T00:00:00Z", "7", 0)),
        Expect::put(PATH)
            .body(json!({"metadata": {"resourceVersion": "7"},
                "spec": {"holderIdentity": "controller-a", "renewTime": "2026-01-01T00:00:05.000000Z", "leaseTransitions": 0}}))
            .ok(lease("controller-a", "2026-01-01T00:00:05Z", "8", 0)),
    ]);
    let outcome = lock(client)
        .try_acquire_or_renew(at("2026-01-01T00:00:05Z"))
        .await
        .unwrap();
    assert_eq!(outcome, Leadership::Leading);
    server.finish().await;
}

#[tokio::test]
async fn a_lease_held_by_another_live_replica_is_left_alone() {
    let (client, server) = MockServer::start(vec![Expect::get(PATH).ok(lease(
        "controller-b",
        "2026-01-01T00:00:00Z",
        "7",
        3,
    ))]);
    let outcome = lock(client)
        .try_acquire_or_renew(at("2026-01-01T00:00:10Z"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Leadership::Following {
            holder: "controller-b".into()
        }
    );
    server.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_lease_unchanged_for_its_duration_by_the_local_clock_is_taken_over_and_the_transition_counted()
 {
    let stale = || lease("controller-b", "2026-01-01T00:00:00Z", "7", 3);
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).ok(stale()),
        Expect::get(PATH).ok(stale()),
        Expect::get(PATH).ok(stale()),
        Expect::put(PATH)
            .body(json!({"metadata": {"resourceVersion": "7"},
                "spec": {"holderIdentity": "controller-a", "acquireTime": "2026-01-01T00:00:16.000000Z", "leaseTransitions": 4}}))
            .ok(lease("controller-a", "2026-01-01T00:00:16Z", "8", 4)),
    ]);
    let lock = lock(client);
    let now = at("2026-01-01T00:00:16Z");
    assert!(
        matches!(
            lock.try_acquire_or_renew(now).await.unwrap(),
            Leadership::Following { .. }
        ),
        "first seen: this replica cannot tell how long it has been unchanged"
    );
    tokio::time::advance(Duration::from_secs(14)).await;
    assert!(matches!(
        lock.try_acquire_or_renew(now).await.unwrap(),
        Leadership::Following { .. }
    ));
    assert_eq!(lock.term().get(), None, "no term before this replica leads");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        lock.try_acquire_or_renew(now).await.unwrap(),
        Leadership::Leading,
        "unchanged for 15 s by this replica's clock"
    );
    assert_eq!(
        lock.term().get(),
        Some(4),
        "its term is the transition it wrote, later than the previous holder's"
    );
    server.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_lease_renewed_by_a_holder_whose_clock_is_behind_is_never_taken_over() {
    // The holder's clock is an hour behind: every renewTime it writes looks expired.
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).ok(lease("controller-b", "2025-12-31T23:00:00Z", "7", 3)),
        Expect::get(PATH).ok(lease("controller-b", "2025-12-31T23:00:05Z", "8", 3)),
        Expect::get(PATH).ok(lease("controller-b", "2025-12-31T23:00:10Z", "9", 3)),
        Expect::get(PATH).ok(lease("controller-b", "2025-12-31T23:00:15Z", "10", 3)),
    ]);
    let lock = lock(client);
    for second in [0, 5, 10, 15] {
        let now = at("2026-01-01T00:00:00Z") + k8s_openapi::jiff::SignedDuration::from_secs(second);
        assert_eq!(
            lock.try_acquire_or_renew(now).await.unwrap(),
            Leadership::Following {
                holder: "controller-b".into()
            },
            "{second} s: the holder keeps renewing"
        );
        tokio::time::advance(Duration::from_secs(5)).await;
    }
    server.finish().await;
}

#[tokio::test]
async fn losing_the_write_race_with_a_409_means_not_leading() {
    let (client, server) = MockServer::start(vec![
        // Released: free to take at once.
        Expect::get(PATH).ok(lease("", "2026-01-01T00:00:00Z", "7", 3)),
        Expect::put(PATH).fail(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again"),
    ]);
    let outcome = lock(client)
        .try_acquire_or_renew(at("2026-01-01T00:01:00Z"))
        .await
        .unwrap();
    assert_eq!(outcome, Leadership::LostRace);
    server.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_loses_the_lead_ends_its_election_so_the_process_can_exit() {
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).fail(404, "NotFound", "not found"),
        Expect::post("/apis/coordination.k8s.io/v1/namespaces/switchyard/leases")
            .respond(201, lease("controller-a", "2026-01-01T00:00:00Z", "1", 0)),
        // Another replica holds it now (this one was cut off for a while).
        Expect::get(PATH).ok(lease("controller-b", "2026-01-01T00:00:05Z", "9", 1)),
    ]);
    let leader = Arc::new(Leader::elected("controller-a"));
    let lost = tokio::time::timeout(
        Duration::from_secs(60),
        keep_leading(lock(client), leader.clone()),
    )
    .await
    .expect("the election ends once the lead is lost");
    assert_eq!(lost, LeadershipLost);
    assert!(!leader.is_leading());
    assert_eq!(leader.holder().as_deref(), Some("controller-b"));
    server.finish().await;
}

#[tokio::test]
async fn releasing_on_shutdown_clears_the_holder() {
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).ok(lease("controller-a", "2026-01-01T00:00:00Z", "9", 0)),
        Expect::put(PATH)
            .body(json!({"metadata": {"resourceVersion": "9"},
                "spec": {"holderIdentity": "", "leaseDurationSeconds": 1}}))
            .ok(lease("", "2026-01-01T00:00:00Z", "10", 0)),
    ]);
    lock(client).release().await.unwrap();
    let seen = server.finish().await;
    assert_eq!(seen.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_replica_whose_renewal_hangs_stops_leading_when_its_lease_could_expire() {
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).fail(404, "NotFound", "not found"),
        Expect::post("/apis/coordination.k8s.io/v1/namespaces/switchyard/leases")
            .respond(201, lease("controller-a", "2026-01-01T00:00:00Z", "1", 0)),
        // The renewal's read never answers in time.
        Expect::get(PATH).after(Duration::from_secs(3600)).ok(lease(
            "controller-a",
            "2026-01-01T00:00:00Z",
            "1",
            0,
        )),
    ]);
    let leader = Arc::new(Leader::elected("controller-a"));
    let election = tokio::spawn(keep_leading(lock(client), leader.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(leader.is_leading(), "the Lease was acquired");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        leader.is_leading(),
        "11 s after the last renewal, within the 12 s grant"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !leader.is_leading(),
        "13 s after the last renewal the replica no longer acts, though no call has failed"
    );
    election.abort();
    drop(server);
}

/// Acquire, renew and release in one script: every access the election makes.
pub(crate) async fn every_lease_access() -> Vec<crate::support::mock::Access> {
    let (client, server) = MockServer::start(vec![
        Expect::get(PATH).fail(404, "NotFound", "not found"),
        Expect::post("/apis/coordination.k8s.io/v1/namespaces/switchyard/leases")
            .respond(201, lease("controller-a", "2026-01-01T00:00:00Z", "1", 0)),
        Expect::get(PATH).ok(lease("controller-a", "2026-01-01T00:00:00Z", "1", 0)),
        Expect::put(PATH).ok(lease("controller-a", "2026-01-01T00:00:05Z", "2", 0)),
        Expect::get(PATH).ok(lease("controller-a", "2026-01-01T00:00:05Z", "2", 0)),
        Expect::put(PATH).ok(lease("", "2026-01-01T00:00:05Z", "3", 0)),
    ]);
    let lock = lock(client);
    for now in ["2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"] {
        assert_eq!(
            lock.try_acquire_or_renew(at(now)).await.unwrap(),
            Leadership::Leading
        );
    }
    lock.release().await.unwrap();
    server.finish().await
}

const OWN_POD: &str = "/api/v1/namespaces/switchyard/pods/controller-a";

fn pod_labelled(leader: Option<&str>) -> serde_json::Value {
    let mut labels = json!({"app.kubernetes.io/name": "switchyard"});
    if let Some(value) = leader {
        labels["switchyard.dev/leader"] = json!(value);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "controller-a", "namespace": "switchyard", "labels": labels}})
}

/// A process that starts takes the label off its own pod (a restarted container may
/// have led), labels it once its grant says it leads, and takes it off when the grant
/// runs out; a patch that fails is sent again.
pub(crate) async fn the_leader_label_follows_the_grant() -> Vec<crate::support::mock::Access> {
    use switchyard_kube::{LeaderLabel, keep_marked};
    let (client, server) = MockServer::start(vec![
        Expect::patch(OWN_POD)
            .body(json!({"metadata": {"labels": {"switchyard.dev/leader": null}}}))
            .ok(pod_labelled(None)),
        Expect::patch(OWN_POD)
            .body(json!({"metadata": {"labels": {"switchyard.dev/leader": "true"}}}))
            .fail(503, "ServiceUnavailable", "etcd is slow"),
        Expect::patch(OWN_POD)
            .body(json!({"metadata": {"labels": {"switchyard.dev/leader": "true"}}}))
            .ok(pod_labelled(Some("true"))),
        Expect::patch(OWN_POD)
            .body(json!({"metadata": {"labels": {"switchyard.dev/leader": null}}}))
            .ok(pod_labelled(None)),
    ]);
    let leader = Arc::new(Leader::elected("controller-a"));
    let label = LeaderLabel::new(Api::namespaced(client, "switchyard"), "controller-a");
    let every = Duration::from_millis(20);
    let task = tokio::spawn(keep_marked(label, leader.clone(), every));
    let wait_for = |n: usize| {
        let server = &server;
        async move {
            for _ in 0..500 {
                if server.served() >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("only {} of {n} calls came", server.served());
        }
    };
    wait_for(1).await;
    leader.lead_until(tokio::time::Instant::now() + Duration::from_secs(60));
    wait_for(3).await;
    leader.follow(Some("controller-b".into()));
    wait_for(4).await;
    // Nothing changes: no further patch.
    tokio::time::sleep(every * 5).await;
    task.abort();
    server.finish().await
}

#[tokio::test]
async fn the_leader_label_is_removed_at_start_set_while_leading_and_removed_after() {
    the_leader_label_follows_the_grant().await;
}
