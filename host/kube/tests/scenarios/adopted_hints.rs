//! What an adopted job's pods say about where they may run, beyond their node rules,
//! read from the pods the team's operator made: pods that repel their own job per node
//! or spread one per node make the job one task per node; a hard topology spread or a
//! required pod affinity keeps its tasks off nodes without the topology key; claims
//! narrow the nodes or hold the job with the claim named; and what those hints cannot
//! say (a spread's skew, anti-affinity per zone) is refused before any pod is released,
//! with the rule named. The views are kept between rounds, and a change in the caches
//! shows in the next one.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};
use switchyard_control::{Cluster, Leader};
use switchyard_core::{
    Action, Decision, ONE_TASK_PER_NODE_LABEL, Rejection, Snapshot, TaskPhase, check_decision,
};
use switchyard_kube::Integration;

use crate::support::fixtures::*;
use crate::support::mock::{Access, MockServer};
use crate::support::owners::*;
use crate::support::world::{World, blocking};

const ID: &str = "job:ml/sweep";
const ZONE: &str = "topology.kubernetes.io/zone";

/// Indexed Job `sweep` of `n` pods whose pod template's spec also has `extra` (its
/// top-level fields).
fn sweep(n: u32, extra: Value) -> Job {
    let mut job = serde_json::to_value(indexed_job("sweep", n, "default")).unwrap();
    for (key, value) in extra.as_object().unwrap() {
        job["spec"]["template"]["spec"][key] = value.clone();
    }
    serde_json::from_value(job).unwrap()
}

/// The selector of every pod of Job `sweep`, by the label its Job controller sets.
fn own_pods() -> Value {
    json!({"matchLabels": {"batch.kubernetes.io/job-name": "sweep"}})
}

/// A node with 16 CPUs in zone `zone` (none: a node without the zone label).
fn zoned(name: &str, zone: Option<&str>) -> Node {
    let mut n = node(name, 16);
    if let Some(zone) = zone {
        n.metadata
            .labels
            .get_or_insert_default()
            .insert(ZONE.into(), zone.into());
    }
    n
}

/// A world adopting batch Jobs, with `job` and its `n` pods made by its controller.
fn adopting(world: &mut World, job: &Job, n: u32) -> Owners {
    let mut owners = world.adopting(&[Integration::Job], "default");
    owners.job(job);
    let pods: Vec<_> = (0..n).map(|i| job_pod(job, i, 0)).collect();
    owners.pods(&pods);
    owners
}

fn place(pairs: &[(&str, &str)]) -> Action {
    place_action(ID, pairs)
}

/// The names of the nodes `task` of the adopted job may be placed on.
fn eligible_nodes(snapshot: &Snapshot, task: &str) -> Vec<String> {
    eligible_node_names(snapshot, ID, task)
}

fn one_task_per_node(snapshot: &Snapshot) -> bool {
    snapshot
        .job(ID)
        .expect("the adopted job is in the snapshot")
        .labels
        .get(ONE_TASK_PER_NODE_LABEL)
        .is_some_and(|v| v == "true")
}

/// Whether the adopted job of pods made with `extra` in their spec is one task per node.
fn one_task_per_node_with(extra: Value) -> bool {
    let mut world = World::new().node(node("n1", 16)).node(node("n2", 16));
    adopting(&mut world, &sweep(2, extra), 2);
    one_task_per_node(&world.caches.snapshot(0.0, vec![]))
}

#[test]
fn pods_that_repel_their_own_job_per_node_make_the_adopted_job_one_task_per_node() {
    let apart = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": own_pods()}]}});
    let mut world = World::new().node(node("n1", 16)).node(node("n2", 16));
    adopting(&mut world, &sweep(2, json!({"affinity": apart})), 2);
    let snapshot = world.caches.snapshot(0.0, vec![]);
    assert!(one_task_per_node(&snapshot));
    let decision = Decision {
        actions: vec![place(&[("job-0", "n1"), ("job-1", "n1")])],
        ..Decision::default()
    };
    let checked = check_decision(&snapshot, &decision);
    assert!(
        matches!(&checked.rejected[0].reason, Rejection::SharedNode { node, .. } if node == "n1"),
        "{checked:?}"
    );

    let host_port = json!([{"name": "train", "image": "ghcr.io/example/train:1",
        "ports": [{"containerPort": 29500, "hostPort": 29500}]}]);
    assert!(one_task_per_node_with(json!({"containers": host_port})));
    // Apart per zone, or from another app's pods: not one per node.
    assert!(!one_task_per_node_with(
        json!({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": ZONE, "labelSelector": own_pods()}]}}})
    ));
    assert!(!one_task_per_node_with(
        json!({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"app": "web"}}}]}}})
    ));
}

#[test]
fn a_spread_of_one_per_node_that_kube_scheduler_enforces_on_a_pinned_pod_makes_it_one_task_per_node()
 {
    let spread = |extra: Value| {
        let mut constraint = json!({"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": own_pods()});
        for (key, value) in extra.as_object().unwrap() {
            constraint[key] = value.clone();
        }
        json!({"topologySpreadConstraints": [constraint]})
    };
    // Every node a domain: at most one more than the emptiest node.
    assert!(one_task_per_node_with(spread(
        json!({"nodeAffinityPolicy": "Ignore"})
    )));
    // Under the default Honor, a pinned pod's node is its one domain: minDomains above
    // 1 makes the minimum 0, so one matching pod per node.
    assert!(one_task_per_node_with(spread(json!({"minDomains": 3}))));
    // Without it, kube-scheduler refuses a pinned pod nothing for this spread.
    assert!(!one_task_per_node_with(spread(json!({}))));
    assert!(!one_task_per_node_with(spread(
        json!({"nodeAffinityPolicy": "Ignore", "whenUnsatisfiable": "ScheduleAnyway"})
    )));
    // The job's own pods picked by matchLabelKeys, on an empty selector.
    assert!(one_task_per_node_with(spread(json!({"minDomains": 2,
        "labelSelector": {}, "matchLabelKeys": ["batch.kubernetes.io/job-name"]}))));
}

#[test]
fn a_hard_spread_or_a_pod_affinity_keeps_the_tasks_off_nodes_without_its_topology_key() {
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": own_pods()}]});
    let near = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": ZONE, "labelSelector": own_pods()}]}}});
    for extra in [spread, near] {
        let mut world = World::new()
            .node(zoned("n1", Some("a")))
            .node(zoned("n2", Some("b")))
            .node(zoned("n3", None));
        adopting(&mut world, &sweep(2, extra.clone()), 2);
        let snapshot = world.caches.snapshot(0.0, vec![]);
        assert_eq!(eligible_nodes(&snapshot, "job-0"), ["n1", "n2"], "{extra}");
    }
    // A soft spread restricts nothing.
    let mut world = World::new()
        .node(zoned("n1", Some("a")))
        .node(zoned("n3", None));
    let soft = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": own_pods()}]});
    adopting(&mut world, &sweep(2, soft), 2);
    let snapshot = world.caches.snapshot(0.0, vec![]);
    assert_eq!(eligible_nodes(&snapshot, "job-0"), ["n1", "n3"]);
}

/// Four nodes, two in zone a and two in zone b, adopting `sweep` of 4 pods made with
/// `extra`; a placement of them all in zone a is refused before anything is released,
/// with `rule` in the reason.
async fn all_in_one_zone_is_refused(extra: Value, rule: &str) -> Vec<Access> {
    let mut world = World::new()
        .node(zoned("a1", Some("a")))
        .node(zoned("a2", Some("a")))
        .node(zoned("b1", Some("b")))
        .node(zoned("b2", Some("b")));
    adopting(&mut world, &sweep(4, extra), 4);
    let (client, server) = MockServer::start(Vec::new());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let packed = place(&[
        ("job-0", "a1"),
        ("job-1", "a1"),
        ("job-2", "a2"),
        ("job-3", "a2"),
    ]);
    let (_, outcomes) = blocking(cluster, move |c| c.apply(&[packed], &[])).await;
    let failure = outcomes[0].as_ref().expect_err("refused before release");
    let message = failure.to_string();
    assert!(
        message.contains(rule) && message.contains("not released"),
        "{message}"
    );
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_that_would_skew_a_hard_zone_spread_is_refused_before_release() {
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule", "nodeAffinityPolicy": "Ignore",
        "labelSelector": own_pods()}]});
    let accessed = all_in_one_zone_is_refused(spread.clone(), "maxSkew 1").await;
    assert!(accessed.is_empty(), "nothing released: {accessed:?}");

    // Two per zone: kube-scheduler binds them all, one after another; released whole.
    let mut world = World::new()
        .node(zoned("a1", Some("a")))
        .node(zoned("a2", Some("a")))
        .node(zoned("b1", Some("b")))
        .node(zoned("b2", Some("b")));
    let job = sweep(4, spread);
    adopting(&mut world, &job, 4);
    let pairs = [
        ("job-0", "a1"),
        ("job-1", "a2"),
        ("job-2", "b1"),
        ("job-3", "b2"),
    ];
    let mut script: Vec<_> = pairs
        .iter()
        .enumerate()
        .map(|(i, (_, node))| {
            let expect = release_adopted(&job_pod(&job, i as u32, 0), node);
            match i {
                0 => expect,
                _ => expect.either_order_with_previous(),
            }
        })
        .collect();
    script.push(event_on_owner("Job", "sweep", "Placed", "Normal"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, outcomes) = blocking(cluster, move |c| c.apply(&[place(&pairs)], &[])).await;
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    server.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_that_repel_their_own_job_per_zone_are_refused_in_one_zone_before_release() {
    let apart = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": ZONE, "labelSelector": own_pods()}]}}});
    let accessed = all_in_one_zone_is_refused(apart, "podAntiAffinity").await;
    assert!(accessed.is_empty(), "nothing released: {accessed:?}");
}

/// A world of nodes n1 (zone a) and n2 (zone b) whose volume `pv-data` is in zone b,
/// adopting `sweep` of 2 pods that mount claim `data`.
fn mounting_data(world: World) -> (World, Owners) {
    let mut world = world
        .node(zoned("n1", Some("a")))
        .node(zoned("n2", Some("b")))
        .zonal_volume("pv-data", "b");
    let volumes = json!({"volumes": [{"name": "data",
        "persistentVolumeClaim": {"claimName": "data"}}]});
    let owners = adopting(&mut world, &sweep(2, volumes), 2);
    (world, owners)
}

#[test]
fn a_claim_bound_to_a_zonal_volume_keeps_the_adopted_tasks_in_its_zone() {
    let (mut world, _owners) = mounting_data(World::new());
    world.claim(
        "data",
        json!({"spec": {"volumeName": "pv-data"}, "status": {"phase": "Bound"}}),
    );
    let snapshot = world.caches.snapshot(0.0, vec![]);
    assert_eq!(eligible_nodes(&snapshot, "job-0"), ["n2"]);
    assert_eq!(eligible_nodes(&snapshot, "job-1"), ["n2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_claim_holds_the_adopted_job_names_the_claim_and_refuses_its_release() {
    let (world, _owners) = mounting_data(World::new());
    let snapshot = world.caches.snapshot(0.0, vec![]);
    let job = snapshot.job(ID).unwrap();
    assert!(
        job.tasks.iter().all(|t| t.phase != TaskPhase::Pending),
        "not placeable while its claim is missing: {:?}",
        job.tasks
    );
    let held = job
        .labels
        .get("switchyard.dev/volumes-held")
        .expect("the job says why it waits");
    assert!(
        held.starts_with("ClaimNotFound") && held.contains("ml/data"),
        "{held}"
    );
    let (client, server) = MockServer::start(Vec::new());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let pairs = place(&[("job-0", "n2"), ("job-1", "n2")]);
    let (_, outcomes) = blocking(cluster, move |c| c.apply(&[pairs], &[])).await;
    let failure = outcomes[0].as_ref().expect_err("not released");
    assert_eq!(failure.reason.label(), "waiting-for-volume", "{failure:?}");
    assert!(failure.to_string().contains("ml/data"), "{failure}");
    assert!(server.finish().await.is_empty());
}

#[test]
fn an_adopted_job_s_view_is_kept_while_nothing_changes_and_a_change_shows_in_the_next_round() {
    let mut world = World::new().node(node("n1", 16)).node(node("n2", 16));
    let job = sweep(3, json!({}));
    let mut owners = adopting(&mut world, &job, 3);
    let view = |world: &World| {
        let snapshot = world.caches.snapshot(0.0, vec![]);
        snapshot.jobs.iter().find(|j| j.id == ID).cloned()
    };
    let first = view(&world).expect("adopted");
    let again = view(&world).expect("adopted");
    assert!(Arc::ptr_eq(&first, &again), "kept while nothing changed");

    // A pod bound by kube-scheduler: its task runs there in the next round.
    owners.pod(&bound(&job_pod(&job, 1, 0), "n2"));
    let changed = view(&world).expect("adopted");
    let task = changed.tasks.iter().find(|t| t.name == "job-1").unwrap();
    assert_eq!(
        (task.phase, task.node.as_deref()),
        (TaskPhase::Running, Some("n2"))
    );

    // A pod gone: its task is no longer offered.
    owners.pod_gone(&job_pod(&job, 2, 0));
    let gone = view(&world).expect("adopted");
    assert!(
        gone.tasks
            .iter()
            .all(|t| t.name != "job-2" && t.phase != TaskPhase::Pending),
        "{:?}",
        gone.tasks
    );
    // Its owner gone with every pod: the job leaves the snapshot.
    owners.pod_gone(&job_pod(&job, 0, 0));
    owners.pod_gone(&bound(&job_pod(&job, 1, 0), "n2"));
    assert!(view(&world).is_none());
}
