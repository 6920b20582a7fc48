//! Volumes, as kube-scheduler's volume binding judges them: a claim bound to a zonal
//! volume keeps its job in the volume's zone; a claim waiting for its first consumer is
//! provisioned for the node the policy chose, and the job is bound once the claim is; a
//! claim that does not exist holds the job with a condition naming it.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use serde_json::{Value, json};
use switchyard_control::{Advance, Cluster, ControlLoop, FailureReason, Leader};
use switchyard_core::{JobPhase, Snapshot, TaskPhase};
use switchyard_kube::crd::{Condition, TrainingJobStatus};
use switchyard_kube::trim;
use switchyard_kube::volumes::SELECTED_NODE_ANNOTATION;

use crate::act::reflect;
use crate::cluster::{default_policy, default_round, runtime};
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, event_on, first_placement, status_write_of};

const CLAIMS: &str = "/api/v1/namespaces/ml/persistentvolumeclaims";

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
    let job = snapshot.job("ml/a").expect("job a is in the snapshot");
    match job.tasks[0].eligible {
        None => snapshot.nodes.iter().map(|n| n.name.clone()).collect(),
        Some(set) => snapshot
            .node_set(set)
            .expect("the set is in the snapshot")
            .nodes
            .iter()
            .map(|&i| snapshot.nodes[i as usize].name.clone())
            .collect(),
    }
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

pub(crate) async fn a_claim_waiting_for_its_first_consumer_is_provisioned_for_the_chosen_node_then_bound()
-> Vec<Access> {
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
    assert_eq!(
        world
            .caches
            .snapshot(0.0, vec![])
            .job("ml/a")
            .unwrap()
            .phase,
        JobPhase::Waiting,
        "an unbound claim waiting for its consumer does not hold the job"
    );
    let mut script = vec![
        // The claim is annotated for the node chosen; no pod is made or bound yet.
        Expect::patch(&format!("{CLAIMS}/data"))
            .body(json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: "*"}}}))
            .ok(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": NS}})),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "WaitingForVolumes", "message": "TrainingJob `a`: provisioning PersistentVolumeClaims data on n*"}]}}),
            )
            .ok(job.json()),
        event_on("a", "WaitingForVolumes", "Place"),
    ];
    // Once the claim is bound, to a volume in zone b: placed there.
    script.extend(first_placement(&job, "main-0", "main", "n2"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, record) = blocking(cluster, default_round).await;
    let [failed] = record.arm_a.failed.as_slice() else {
        panic!("the placement waits for the volume: {record:#?}");
    };
    assert_eq!(failed.failure, FailureReason::WaitingForVolume);
    // The provisioner has the node; until the claim is bound the job is held.
    world.claim(
        "data",
        json!({"spec": {"storageClassName": "wffc"}, "status": {"phase": "Pending"},
            "annotations": {SELECTED_NODE_ANNOTATION: "n2"}}),
    );
    let held = world.caches.snapshot(1.0, vec![]);
    let job_view = held.job("ml/a").unwrap();
    assert_eq!(
        job_view.phase,
        JobPhase::Restarting,
        "held while provisioned"
    );
    assert!(
        job_view
            .tasks
            .iter()
            .all(|t| t.phase == TaskPhase::Restarting)
    );
    world = world.zonal_volume("pv-data", "b");
    world.claim(
        "data",
        json!({"spec": {"storageClassName": "wffc", "volumeName": "pv-data"},
            "status": {"phase": "Bound"}, "annotations": {SELECTED_NODE_ANNOTATION: "n2"}}),
    );
    let bound = world.caches.snapshot(2.0, vec![]);
    assert_eq!(bound.job("ml/a").unwrap().phase, JobPhase::Waiting);
    assert_eq!(eligible_nodes(&bound), ["n2"]);
    let (_, record) = blocking(cluster, |cluster| {
        let slot = default_policy(&runtime());
        let mut control = ControlLoop::new(slot.clone(), slot, 0);
        let triggers = vec![switchyard_core::Trigger::JobArrived("ml/a".into())];
        control.decide_round(cluster, triggers).record
    })
    .await;
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
        trim::claim,
        vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": NS, "resourceVersion": "3",
                "annotations": {SELECTED_NODE_ANNOTATION: "n1", "pv.kubernetes.io/bind-completed": "yes"},
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
        trim::volume,
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
        trim::class,
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
    assert_eq!(
        claim.metadata.annotations.as_ref().unwrap().len(),
        1,
        "only the selected node is kept"
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

pub(crate) async fn a_claim_waiting_for_its_consumer_is_bound_to_the_smallest_pre_provisioned_volume_the_node_can_mount()
-> Vec<Access> {
    let mut world = World::new()
        .node(node("n1", 8))
        .node(node("n2", 8))
        .local_class("local")
        .local_volume("pv-n1", ("local", "10Gi"), "n1", None)
        .local_volume("pv-n2-big", ("local", "1Ti"), "n2", None)
        .local_volume("pv-n2", ("local", "100Gi"), "n2", None);
    let data = json!({"spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "50Gi"}}}, "status": {"phase": "Pending"}});
    world.claim("data", data.clone());
    let job = JobBuilder::new("a").push_progress().mounting("data");
    world.job(&job);
    assert_eq!(
        eligible_nodes(&world.caches.snapshot(0.0, vec![])),
        ["n2"],
        "only n2 has a volume of 50Gi or more"
    );
    let script = vec![
        // The smallest volume that fits is promised to the claim, on the version seen.
        Expect::patch("/api/v1/persistentvolumes/pv-n2")
            .body(json!({"metadata": {"resourceVersion": "*",
                    "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
                "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": "data"}}}))
            .ok(json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-n2"}})),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "WaitingForVolumes",
                "message": "TrainingJob `a`: provisioning PersistentVolumeClaims data to PersistentVolume pv-n2 on n2*"}]}}),
            )
            .ok(job.json()),
        event_on("a", "WaitingForVolumes", "Place"),
    ];
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, default_round).await;
    let [failed] = record.arm_a.failed.as_slice() else {
        panic!("the placement waits for the volume: {record:#?}");
    };
    assert_eq!(failed.failure, FailureReason::WaitingForVolume);
    // Promised, not yet bound: the job is held, and no other volume is promised.
    world = world.local_volume("pv-n2", ("local", "100Gi"), "n2", Some("data"));
    let held = world.caches.snapshot(1.0, vec![]);
    assert_eq!(held.job("ml/a").unwrap().phase, JobPhase::Restarting);
    server.finish().await
}

/// The claim of pod `a-main-0-0`'s ephemeral volume `scratch`, as made for `node`.
fn ephemeral_claim(node: &str) -> Value {
    json!({"metadata": {"name": "a-main-0-0-scratch", "namespace": NS,
        "labels": {"kind": "scratch"},
        "annotations": {SELECTED_NODE_ANNOTATION: node},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "a-main-0-0",
            "uid": "uid-a-main-0-0", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"storageClassName": "wffc", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}}}})
}

/// Places task `main-0` of job `a` (with an ephemeral volume) on `n2`, the API server
/// answering the claim's creation with `claim_calls` between the pod's creation and
/// its binding.
async fn place_with_ephemeral_volume(claim_calls: Vec<Expect>) -> Vec<Access> {
    let job = JobBuilder::new("a").ephemeral("wffc");
    let mut script = vec![service("a"), create("a-main-0-0", "a", "main-0", "main")];
    script.extend(claim_calls);
    script.push(bind("a-main-0-0", "n2"));
    script.extend(status_write(
        &job,
        json!({"status": {"placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n2"}]}}),
        &job,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(&job.build(), &[("main-0".into(), "n2".into())], "fits")
        .await
        .expect("placed, its volume to be provisioned on n2");
    server.finish().await
}

pub(crate) async fn an_ephemeral_volume_s_claim_is_made_for_the_pod_s_node_before_it_is_bound()
-> Vec<Access> {
    place_with_ephemeral_volume(vec![
        Expect::post(CLAIMS)
            .body(ephemeral_claim("n2"))
            .respond(201, ephemeral_claim("n2")),
    ])
    .await
}

pub(crate) async fn a_claim_the_ephemeral_volume_controller_made_first_gets_the_node() -> Vec<Access>
{
    let mut made_first = ephemeral_claim("n2");
    made_first["metadata"]["annotations"] = json!({});
    place_with_ephemeral_volume(vec![
        Expect::post(CLAIMS).fail(
            409,
            "AlreadyExists",
            "persistentvolumeclaims \"a-main-0-0-scratch\" already exists",
        ),
        Expect::get(&format!("{CLAIMS}/a-main-0-0-scratch")).ok(made_first),
        Expect::patch(&format!("{CLAIMS}/a-main-0-0-scratch"))
            .body(json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: "n2"}}}))
            .ok(ephemeral_claim("n2")),
    ])
    .await
}

pub(crate) async fn a_claim_left_by_an_earlier_pod_of_the_same_name_fails_the_placement()
-> Vec<Access> {
    let job = JobBuilder::new("a").ephemeral("wffc");
    let mut earlier = ephemeral_claim("n1");
    earlier["metadata"]["ownerReferences"][0]["uid"] = json!("uid-of-an-earlier-pod");
    let mut script = vec![
        service("a"),
        create("a-main-0-0", "a", "main-0", "main"),
        Expect::post(CLAIMS).fail(
            409,
            "AlreadyExists",
            "persistentvolumeclaims \"a-main-0-0-scratch\" already exists",
        ),
        Expect::get(&format!("{CLAIMS}/a-main-0-0-scratch")).ok(earlier),
        // Not bound: the pod this call made goes again (its claim would go with it).
        delete("a-main-0-0", None),
    ];
    script.extend(status_write(
        &job,
        json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
            "reason": "PlacementFailed",
            "message": "PersistentVolumeClaim a-main-0-0-scratch exists and was not made for pod a-main-0-0*"}]}}),
        &job,
    ));
    script.push(event("PlacementFailed", "Place", "Warning"));
    let (client, server) = MockServer::start(script);
    let error = actor(client)
        .place(&job.build(), &[("main-0".into(), "n2".into())], "fits")
        .await
        .expect_err("the claim is another pod's");
    assert!(
        error.to_string().contains("waiting for it to go"),
        "{error}"
    );
    server.finish().await
}

pub(crate) async fn an_ephemeral_volume_of_a_class_that_binds_immediately_holds_the_job()
-> Vec<Access> {
    held_by_its_volumes(
        World::new().node(node("n1", 8)).class("fast", "Immediate"),
        &JobBuilder::new("a").push_progress().ephemeral("fast"),
        json!({"type": "VolumesReady", "status": "False", "reason": "BindsImmediately",
            "message": "role main's ephemeral volume scratch: its storage class fast binds Immediately*"}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_a_class_without_provisioner_is_bound_to_a_matching_local_volume_on_the_chosen_node()
 {
    a_claim_waiting_for_its_consumer_is_bound_to_the_smallest_pre_provisioned_volume_the_node_can_mount().await;
}

#[tokio::test]
async fn a_pod_s_ephemeral_volume_claim_is_made_for_its_node_owned_by_it_before_it_is_bound() {
    an_ephemeral_volume_s_claim_is_made_for_the_pod_s_node_before_it_is_bound().await;
}

#[tokio::test]
async fn when_the_ephemeral_volume_controller_made_the_claim_first_it_is_annotated_with_the_node() {
    a_claim_the_ephemeral_volume_controller_made_first_gets_the_node().await;
}

#[tokio::test]
async fn a_claim_left_by_an_earlier_pod_of_the_same_name_fails_the_placement_and_rolls_it_back() {
    a_claim_left_by_an_earlier_pod_of_the_same_name_fails_the_placement().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ephemeral_volume_whose_class_binds_immediately_holds_the_job_with_a_condition() {
    an_ephemeral_volume_of_a_class_that_binds_immediately_holds_the_job().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_claim_is_bound_to_a_zonal_volume_is_offered_and_bound_only_in_that_zone() {
    a_claim_bound_to_a_zonal_volume_keeps_the_job_in_its_zone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_first_consumer_claim_gets_the_chosen_node_and_the_job_is_bound_once_it_is_bound()
 {
    a_claim_waiting_for_its_first_consumer_is_provisioned_for_the_chosen_node_then_bound().await;
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
