//! What wedges a job, or would run a task twice: a gate another controller put on a
//! pod (it stays for its owner to lift, and the job counts as placed), an old pod on a
//! node that stopped answering (never replaced until the node is gone, declared out of
//! service, or the pod is confirmed stopped: the StatefulSet rule), and a resize the API
//! server accepted but the node never carried out.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_core::{JobPhase, TaskPhase};
use switchyard_kube::{CheckpointMethod, Condition, PLACEMENT_GATE, Phase, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, event_on, status_write_of};

fn gated(mut pod: Pod) -> Pod {
    pod.spec.as_mut().unwrap().scheduling_gates = Some(vec![
        serde_json::from_value(json!({"name": "example.com/quota"})).unwrap(),
    ]);
    pod
}

pub(crate) async fn a_gate_a_webhook_added_stays_for_its_owner_to_lift() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let mut answered = created_json("a-main-0-0");
    // A webhook (a quota system, say) gated the pod as it was created.
    answered["spec"]["schedulingGates"] =
        json!([{"name": PLACEMENT_GATE}, {"name": "example.com/quota"}]);
    let mut script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main").respond(201, answered),
        // Only the placement gate goes; the quota's stays for the quota system.
        Expect::patch(&format!("{PODS}/a-main-0-0"))
            .body(
                json!({"spec": {"schedulingGates": [{"name": "example.com/quota"}],
                "affinity": pin("n1")}}),
            )
            .ok(pod_json("a-main-0-0")),
    ];
    script.extend(status_write(
        &job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}]}}),
        &job,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    place_main_on_n1(client, &job)
        .await
        .expect("the policy's part is done; the quota system lifts its own gate");
    server.finish().await
}

#[test]
fn a_job_whose_released_pod_waits_for_another_gate_stays_placed_on_its_node() {
    let mut world = World::new().node(node("n1", 8));
    world.job(&JobBuilder::new("a").push_progress());
    world.pod(gated(released(pod("a", "main-0", 0, None), "n1", 0)));
    let snapshot = world.caches.snapshot(0.0, vec![]);
    let job = snapshot.job("ml/a").unwrap();
    assert_eq!(job.phase, JobPhase::Running, "placed, not placeable again");
    assert_eq!(job.tasks[0].node.as_deref(), Some("n1"));
    assert_eq!(
        snapshot.node("n1").unwrap().requested.cpu_millis,
        2000,
        "its room on n1 is taken"
    );
    world.pod(held(pod("a", "main-0", 0, None)));
    let job = world
        .caches
        .snapshot(1.0, vec![])
        .job("ml/a")
        .cloned()
        .unwrap();
    assert_eq!(
        job.tasks[0].phase,
        TaskPhase::Pending,
        "still held by the placement gate: placeable, and the next placement takes the pod"
    );
}

/// A node that stopped answering: its Ready condition is `Unknown`.
fn unreachable(name: &str) -> Node {
    let mut lost = serde_json::to_value(node(name, 8)).unwrap();
    lost["status"]["conditions"] = json!([{"type": "Ready", "status": "Unknown"}]);
    lost["metadata"]["resourceVersion"] = json!("2");
    serde_json::from_value(lost).unwrap()
}

/// `name` tainted `node.kubernetes.io/out-of-service`: an operator says it is gone.
fn out_of_service(name: &str) -> Node {
    let mut gone = serde_json::to_value(unreachable(name)).unwrap();
    gone["spec"]["taints"] = json!([{"key": "node.kubernetes.io/out-of-service",
        "value": "nodeshutdown", "effect": "NoExecute"}]);
    gone["metadata"]["resourceVersion"] = json!("3");
    serde_json::from_value(gone).unwrap()
}

/// Job `a` moving from n1 to n2, its old pod (`old`) being deleted on n1, which stopped
/// answering: the process on it may still run and write the checkpoint.
fn partitioned(old: Pod) -> (World, JobBuilder) {
    let mut world = World::new().node(node("n2", 8)).node(unreachable("n1"));
    let job = moving_main(
        &JobBuilder::new("a")
            .push_progress()
            .checkpoint(CheckpointMethod::Signal, 30),
        "n2",
        None,
        TrainingJobStatus {
            migrations: 1,
            ..TrainingJobStatus::default()
        },
    );
    world.job(&job);
    world.pod(old);
    (world, job)
}

/// The replacement of job `a`'s task on n2: made, released, recorded, announced.
fn replaced_on_n2(job: &JobBuilder) -> Vec<Expect> {
    let mut script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-1", "a", "main-0", "main"),
        release("a-main-0-1", "n2"),
    ];
    script.extend(status_write_of(
        "a",
        job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-1", "node": "n2"}]}}),
    ));
    script.push(event("CheckpointTimedOut", "Migrate", "Warning"));
    script.push(event("Migrated", "Migrate", "Normal"));
    script
}

pub(crate) async fn a_task_on_a_partitioned_node_is_not_replaced_until_the_node_is_out_of_service()
-> Vec<Access> {
    // Its grace period ran out long ago (the fixture's deletion time is 0).
    let (mut world, job) = partitioned(terminating(pod("a", "main-0", 0, Some("n1"))));
    // Said once, with what would let the restart go on.
    let mut script = vec![
        event_on("a", "WaitingForNode", "Recover").body(json!({"type": "Warning",
            "note": "pod ml/a-main-0-0 on node n1, which is not Ready, may still run*"})),
    ];
    script.extend(replaced_on_n2(&job));
    let (client, server) = MockServer::start(script);
    let mut cluster = world.cluster(client, Leader::always("switchyard-0"));
    for t in [60, 600, 3600] {
        world.set_clock(t);
        (cluster, _) = blocking(cluster, move |c| c.advance(Some(at(t).as_second() as f64))).await;
        assert_eq!(
            server.served(),
            1,
            "no replacement while n1 may run the task (t={t})"
        );
    }
    let waiting = world.caches.snapshot(0.0, vec![]);
    assert_eq!(waiting.job("ml/a").unwrap().phase, JobPhase::Restarting);
    // The operator declares n1 out of service: its pods are gone for good.
    world = world.node(out_of_service("n1"));
    world.set_clock(3601);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(3601).as_second() as f64))).await;
    server.finish().await
}

pub(crate) async fn a_task_confirmed_stopped_on_a_partitioned_node_is_replaced() -> Vec<Access> {
    // The kubelet reported the container terminated before the node stopped answering.
    let mut stopped = serde_json::to_value(terminating(pod("a", "main-0", 0, Some("n1")))).unwrap();
    stopped["status"]["containerStatuses"] = json!([{"name": "trainer", "image": "i",
        "imageID": "", "ready": false, "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]);
    let (world, job) = partitioned(serde_json::from_value(stopped).unwrap());
    let (client, server) = MockServer::start(replaced_on_n2(&job));
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    world.set_clock(60);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(60).as_second() as f64))).await;
    server.finish().await
}

pub(crate) async fn a_resize_the_node_cannot_fit_is_reported_infeasible() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let requested = Condition {
        type_: "CpuWeightApplied".into(),
        status: "Unknown".into(),
        reason: "ResizeRequested".into(),
        message: "pod a-main-0-0 asked to run with 4000m CPU".into(),
        last_transition_time: "2026-01-01T00:00:00Z".into(),
    };
    let job = JobBuilder::new("a")
        .push_progress()
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            conditions: vec![requested],
            ..TrainingJobStatus::default()
        });
    world.job(&job);
    // Asked for 1 CPU (weight 0.5); the kubelet still runs it with 2 and says why.
    let mut resized = serde_json::to_value(pod("a", "main-0", 0, Some("n1"))).unwrap();
    resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
    resized["status"]["conditions"] = json!([{"type": "PodResizePending", "status": "True",
        "reason": "Infeasible", "message": "Node didn't have enough capacity: cpu"}]);
    resized["status"]["containerStatuses"] = json!([{"name": "trainer", "image": "x", "imageID": "",
        "ready": true, "restartCount": 0, "resources": {"requests": {"cpu": "2"}}}]);
    world.pod(serde_json::from_value(resized).unwrap());
    let mut script = Vec::new();
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"conditions": [{"type": "CpuWeightApplied", "status": "False",
            "reason": "ResizeInfeasible"}]}}),
    ));
    script.push(event("ResizeInfeasible", "SetCpuWeight", "Warning"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, snapshot) = blocking(cluster, |c| {
        c.advance(Some(at(0).as_second() as f64));
        c.snapshot(Vec::new())
    })
    .await;
    let weight = snapshot.job("ml/a").unwrap().tasks[0].cpu_weight;
    assert_eq!(
        weight, 1.0,
        "the weight is what the kubelet applied, not what was asked"
    );
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn a_gate_another_controller_put_on_a_pod_is_kept_when_the_placement_gate_is_lifted() {
    a_gate_a_webhook_added_stays_for_its_owner_to_lift().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_on_a_node_that_stopped_answering_is_replaced_only_once_the_node_is_out_of_service() {
    a_task_on_a_partitioned_node_is_not_replaced_until_the_node_is_out_of_service().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_the_kubelet_confirmed_stopped_is_replaced_though_its_node_stopped_answering() {
    a_task_confirmed_stopped_on_a_partitioned_node_is_replaced().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_the_node_cannot_fit_is_reported_infeasible_and_the_weight_is_what_runs() {
    a_resize_the_node_cannot_fit_is_reported_infeasible().await;
}
