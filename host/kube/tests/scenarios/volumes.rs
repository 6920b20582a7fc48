//! Volumes as the policy's hints, kube-scheduler's volume binding being the final word:
//! a claim bound to a zonal volume keeps its job in the volume's zone; a claim waiting
//! for its first consumer is offered the nodes it could get a volume on, and its job is
//! placed like any other (kube-scheduler provisions or binds its volume for the node it
//! binds the pod to); an ephemeral volume's claim is the ephemeral volume controller's;
//! a claim that does not exist holds the job with a condition naming it.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use serde_json::{Value, json};
use switchyard_control::{Advance, Cluster, Leader};
use switchyard_core::{JobPhase, Snapshot};
use switchyard_kube::{Condition, TrainingJobStatus, trim_claim, trim_class, trim_volume};

use crate::cluster::default_round;
use crate::snapshot::reflect;
use crate::support::fixtures::*;
use crate::support::mock::{Access, MockServer};
use crate::support::world::{World, blocking, first_placement, status_write_of};

/// A node with 8 CPUs in zone `zone`.
fn zoned(name: &str, zone: &str) -> Node {
    let mut n = node(name, 8);
    n.metadata
        .labels
        .get_or_insert_default()
        .insert("topology.kubernetes.io/zone".into(), zone.into());
    n
}

/// The names of the nodes job `ml/a`'s tasks may be placed on (all of them: no set).
fn eligible_nodes(snapshot: &Snapshot) -> Vec<String> {
    eligible_node_names(snapshot, "ml/a", "main-0")
}

pub(crate) async fn a_claim_bound_to_a_zonal_volume_keeps_the_job_in_its_zone() -> Vec<Access> {
    let mut world = World::new()
        .node(zoned("n1", "a"))
        .node(zoned("n2", "b"))
        .node(zoned("n3", "a"))
        .zonal_volume("pv-data", "b");
    world.claim(
        "data",
        json!({"spec": {"storageClassName": "zonal", "volumeName": "pv-data"},
            "status": {"phase": "Bound"}}),
    );
    let job = JobBuilder::new("a").push_progress().mounting("data");
    world.job(&job);
    assert_eq!(
        eligible_nodes(&world.caches.snapshot(0.0, vec![])),
        ["n2"],
        "only zone b can mount the volume"
    );
    let script = first_placement(&job, "main-0", "main", "n2");
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, default_round).await;
    assert_eq!(record.arm_a.accepted.len(), 1, "{record:#?}");
    server.finish().await
}

pub(crate) async fn a_claim_waiting_for_its_first_consumer_is_left_to_the_scheduler() -> Vec<Access>
{
    let mut world = World::new()
        .node(zoned("n1", "a"))
        .node(zoned("n2", "b"))
        .class("wffc", "WaitForFirstConsumer");
    world.claim(
        "data",
        json!({"spec": {"storageClassName": "wffc"}, "status": {"phase": "Pending"}}),
    );
    let job = JobBuilder::new("a").push_progress().mounting("data");
    world.job(&job);
    let snapshot = world.caches.snapshot(0.0, vec![]);
    assert_eq!(
        snapshot.job("ml/a").unwrap().phase,
        JobPhase::Waiting,
        "an unbound claim waiting for its consumer does not hold the job"
    );
    // Placed like any other job: no claim is touched, the scheduler binds the volume.
    let (client, server) = MockServer::start(first_placement(&job, "main-0", "main", "n1"));
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, default_round).await;
    assert_eq!(record.arm_a.accepted.len(), 1, "{record:#?}");
    server.finish().await
}

/// Runs a round on `world`, whose job `a` (`job`) its volumes hold: the leader's pass
/// writes the `VolumesReady=False` condition `condition` once, and nothing is placed.
async fn held_by_its_volumes(mut world: World, job: &JobBuilder, condition: Value) -> Vec<Access> {
    world.job(job);
    let script = status_write_of("a", job, json!({"status": {"conditions": [condition]}}));
    let (client, server) = MockServer::start(script.to_vec());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, default_round).await;
    assert!(
        record.arm_a.accepted.is_empty() && record.arm_a.failed.is_empty(),
        "{record:#?}"
    );
    let snapshot = world.caches.snapshot(0.0, vec![]);
    assert_eq!(snapshot.job("ml/a").unwrap().phase, JobPhase::Restarting);
    server.finish().await
}

pub(crate) async fn a_missing_claim_holds_the_job_with_a_condition_naming_it() -> Vec<Access> {
    held_by_its_volumes(
        World::new().node(node("n1", 8)),
        &JobBuilder::new("a").push_progress().mounting("absent"),
        json!({"type": "VolumesReady", "status": "False", "reason": "ClaimNotFound",
            "message": "PersistentVolumeClaim ml/absent does not exist*"}),
    )
    .await
}

pub(crate) async fn a_claim_that_turns_up_lifts_the_hold_and_the_condition_says_so() -> Vec<Access>
{
    let mut world = World::new()
        .node(zoned("n1", "b"))
        .zonal_volume("pv-data", "b");
    let job = JobBuilder::new("a")
        .push_progress()
        .mounting("data")
        .with_status(TrainingJobStatus {
            conditions: vec![Condition {
                type_: "VolumesReady".into(),
                status: "False".into(),
                reason: "ClaimNotFound".into(),
                message: "PersistentVolumeClaim ml/data does not exist".into(),
                last_transition_time: "2026-01-01T00:00:00Z".into(),
            }],
            ..TrainingJobStatus::default()
        });
    world.job(&job);
    world.claim(
        "data",
        json!({"spec": {"volumeName": "pv-data"}, "status": {"phase": "Bound"}}),
    );
    let script = status_write_of(
        "a",
        &job,
        json!({"status": {"conditions": [{"type": "VolumesReady", "status": "True", "reason": "Ready"}]}}),
    );
    let (client, server) = MockServer::start(script.to_vec());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, advanced) = blocking(cluster, |cluster| cluster.advance(None)).await;
    assert!(matches!(advanced, Advance::Events(_)), "{advanced:?}");
    let snapshot = world.caches.snapshot(0.0, vec![]);
    assert_eq!(snapshot.job("ml/a").unwrap().phase, JobPhase::Waiting);
    server.finish().await
}

pub(crate) async fn claims_volumes_and_classes_are_watched_and_trimmed() -> Vec<Access> {
    let mut seen = Vec::new();
    let (claims, s) = reflect(
        Api::<PersistentVolumeClaim>::all,
        "/api/v1/persistentvolumeclaims?*",
        trim_claim,
        vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": NS, "resourceVersion": "3",
                "annotations": {"volume.kubernetes.io/selected-node": "n1", "pv.kubernetes.io/bind-completed": "yes"},
                "managedFields": [{"manager": "kube-controller-manager"}]},
            "spec": {"storageClassName": "wffc", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}}},
            "status": {"phase": "Pending"}})],
    )
    .await;
    seen.extend(s);
    let (volumes, s) = reflect(
        Api::<PersistentVolume>::all,
        "/api/v1/persistentvolumes?*",
        trim_volume,
        vec![json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pv-data", "resourceVersion": "4"},
            "spec": {"capacity": {"storage": "10Gi", "example.com/iops": "3000"},
                "csi": {"driver": "d", "volumeHandle": "h"}, "storageClassName": "wffc",
                "mountOptions": ["noatime"],
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}},
            "status": {"phase": "Bound"}})],
    )
    .await;
    seen.extend(s);
    let (classes, s) = reflect(
        Api::<StorageClass>::all,
        "/apis/storage.k8s.io/v1/storageclasses?*",
        trim_class,
        vec![
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "wffc", "resourceVersion": "5"},
            "provisioner": "pd.csi.storage.gke.io", "parameters": {"type": "pd-ssd"},
            "volumeBindingMode": "WaitForFirstConsumer"}),
        ],
    )
    .await;
    seen.extend(s);
    let claim = &claims.state()[0];
    assert!(
        claim.metadata.annotations.is_none(),
        "no annotation is read"
    );
    assert!(claim.metadata.managed_fields.is_none());
    assert_eq!(
        claim.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("wffc")
    );
    let volume = &volumes.state()[0];
    let spec = volume.spec.as_ref().unwrap();
    assert!(spec.node_affinity.is_some() && spec.csi.is_none() && spec.mount_options.is_none());
    // What matching a claim to a pre-provisioned volume reads stays.
    let capacity = spec.capacity.as_ref().expect("the size is kept");
    assert_eq!(capacity.keys().collect::<Vec<_>>(), ["storage"]);
    assert_eq!(spec.storage_class_name.as_deref(), Some("wffc"));
    assert_eq!(
        volume.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
    let class = &classes.state()[0];
    assert!(class.parameters.is_none());
    assert_eq!(
        class.volume_binding_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    seen
}

pub(crate) async fn a_claim_of_a_class_without_provisioner_is_offered_the_nodes_of_its_matching_volumes()
-> Vec<Access> {
    let mut world = World::new()
        .node(node("n1", 8))
        .node(node("n2", 8))
        .local_class("local")
        .local_volume("pv-n1", ("local", "10Gi"), "n1", None)
        .local_volume("pv-n2", ("local", "100Gi"), "n2", None);
    world.claim(
        "data",
        json!({"spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "50Gi"}}}, "status": {"phase": "Pending"}}),
    );
    let job = JobBuilder::new("a").push_progress().mounting("data");
    world.job(&job);
    assert_eq!(
        eligible_nodes(&world.caches.snapshot(0.0, vec![])),
        ["n2"],
        "only n2 has a volume of 50Gi or more"
    );
    let (client, server) = MockServer::start(first_placement(&job, "main-0", "main", "n2"));
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, default_round).await;
    assert_eq!(record.arm_a.accepted.len(), 1, "{record:#?}");
    server.finish().await
}

pub(crate) async fn a_pod_with_an_ephemeral_volume_is_made_and_released_like_any_other()
-> Vec<Access> {
    let job = JobBuilder::new("a").ephemeral("wffc");
    // The pod carries its claim template; the ephemeral volume controller makes the
    // claim once the pod exists, and the scheduler provisions it for the pinned node.
    let mut script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main").body(json!({"spec": {"volumes": [
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "wffc"}}}}]}})),
        release("a-main-0-0", "n2"),
    ];
    script.extend(status_write(
        &job,
        json!({"status": {"placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n2"}]}}),
        &job,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &[("main-0".into(), "n2".into())],
            "fits",
            at(0),
        )
        .await
        .expect("placed, its volume to be provisioned on n2");
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_a_class_without_provisioner_is_offered_only_the_nodes_of_the_volumes_that_match_it()
 {
    a_claim_of_a_class_without_provisioner_is_offered_the_nodes_of_its_matching_volumes().await;
}

#[tokio::test]
async fn a_pod_s_ephemeral_volume_is_left_to_the_ephemeral_volume_controller_and_the_scheduler() {
    a_pod_with_an_ephemeral_volume_is_made_and_released_like_any_other().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_claim_is_bound_to_a_zonal_volume_is_offered_and_bound_only_in_that_zone() {
    a_claim_bound_to_a_zonal_volume_keeps_the_job_in_its_zone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_first_consumer_claim_does_not_hold_its_job_and_is_left_to_the_scheduler() {
    a_claim_waiting_for_its_first_consumer_is_left_to_the_scheduler().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_mounting_a_claim_that_does_not_exist_is_not_placed_and_says_which_claim() {
    a_missing_claim_holds_the_job_with_a_condition_naming_it().await;
}

#[tokio::test]
async fn the_storage_caches_keep_only_what_volume_binding_reads() {
    claims_volumes_and_classes_are_watched_and_trimmed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_a_missing_claim_exists_and_is_bound_the_job_is_offered_again_and_volumes_ready_turns_true()
 {
    a_claim_that_turns_up_lifts_the_hold_and_the_condition_says_so().await;
}
