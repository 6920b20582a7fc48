//! What used to wedge a job: scheduling gates (every bind refused, every round rolled
//! back), an old pod stuck terminating on a lost node (a restart waiting forever), and a
//! resize the API server accepted but the node never carried out.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_core::JobPhase;
use switchyard_kube::crd::{CheckpointMethod, Condition, Phase, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, status_write_of};

fn gated(mut pod: Pod) -> Pod {
    pod.spec.as_mut().unwrap().scheduling_gates = Some(vec![
        serde_json::from_value(json!({"name": "example.com/quota"})).unwrap(),
    ]);
    pod
}

pub(crate) async fn a_pod_created_with_scheduling_gates_waits_for_them_unbound() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let mut answered = serde_json::to_value(gated(pod("a", "main-0", 0, None))).unwrap();
    answered["metadata"]["uid"] = json!("uid-a-main-0-0");
    let (client, server) = MockServer::start(vec![
        service("a"),
        // A webhook (a quota system, say) gated the pod as it was created.
        create("a-main-0-0", "a", "main-0", "main").respond(201, answered),
        // No binding, no rollback: the pod waits for its gate to be lifted.
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "SchedulingGated"}]}}),
            )
            .ok(job.json()),
        event("SchedulingGated", "Place", "Warning"),
    ]);
    let error = actor(client)
        .place(
            &job.build(),
            &[("main-0".to_string(), "n1".to_string())],
            "fits",
        )
        .await
        .expect_err("a gated pod is not placed yet");
    assert_eq!(error.metric_label(), "gated");
    server.finish().await
}

#[test]
fn a_job_whose_pods_wait_for_their_scheduling_gates_is_not_offered_to_the_policy() {
    let mut world = World::new().node(node("n1", 8));
    world.job(&JobBuilder::new("a").push_progress());
    world.pod(gated(pod("a", "main-0", 0, None)));
    let phase = |w: &World| w.caches.snapshot(0.0, vec![]).job("ml/a").unwrap().phase;
    assert_eq!(phase(&world), JobPhase::Restarting, "held while gated");
    world.pod(pod("a", "main-0", 0, None));
    assert_eq!(phase(&world), JobPhase::Waiting, "placeable once lifted");
}

pub(crate) async fn a_restart_does_not_wait_for_a_pod_on_a_lost_node() -> Vec<Access> {
    // a moves from n1 to n2; n1 stopped answering, so its pod stays Terminating.
    let mut world = World::new().node(node("n2", 8));
    let mut lost = serde_json::to_value(node("n1", 8)).unwrap();
    lost["status"]["conditions"] = json!([{"type": "Ready", "status": "Unknown"}]);
    world = world.node(serde_json::from_value(lost).unwrap());
    let job = restarting(
        &JobBuilder::new("a")
            .push_progress()
            .checkpoint(CheckpointMethod::Signal, 30),
        TrainingJobStatus {
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            migrations: 1,
            generation: 1,
            ..TrainingJobStatus::default()
        },
        migration("a-main-0-0", "main-0", "n2", None),
    );
    world.job(&job);
    // Its grace period ran out at 0 (the fixture's deletion time).
    world.pod(terminating(pod("a", "main-0", 0, Some("n1"))));
    let mut script = vec![
        service("a"),
        create("a-main-0-1", "a", "main-0", "main"),
        bind("a-main-0-1", "n2"),
    ];
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-1", "node": "n2"}]}}),
    ));
    script.push(event("Migrated", "Migrate", "Normal"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    world.set_clock(-1);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(-1).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        0,
        "within its grace period the pod may still stop"
    );
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
async fn a_pod_created_with_scheduling_gates_is_left_unbound_for_them_to_be_lifted() {
    a_pod_created_with_scheduling_gates_waits_for_them_unbound().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_stops_waiting_for_an_old_pod_stuck_terminating_on_a_lost_node() {
    a_restart_does_not_wait_for_a_pod_on_a_lost_node().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_the_node_cannot_fit_is_reported_infeasible_and_the_weight_is_what_runs() {
    a_resize_the_node_cannot_fit_is_reported_infeasible().await;
}
