//! Scenarios against the scripted API server: each drives the real backend code and
//! returns what it accessed, so the RBAC test can check `deploy/rbac.yaml` against the
//! union of them. Tests run with paused time, so grace periods and back-off pass at
//! once while their order is still checked.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use switchyard_core::{JobPhase, TaskPhase};
use switchyard_kube::Caches;
use switchyard_kube::LogPattern;
use switchyard_kube::{
    CheckpointMethod, PendingRestart, Phase, RestartAction, TaskTarget, TrainingJob,
    TrainingJobStatus,
};
use switchyard_kube::{Migration, RestartProgress};
use switchyard_kube::{MoveKindRecord, MoveRecord};
use switchyard_kube::{PLACEMENT_GATE, trim_job, trim_node, trim_pod};
use tokio::sync::Notify;

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};

fn gang() -> JobBuilder {
    JobBuilder::new("a")
        .ps_worker(2, 1, 4)
        .checkpoint(CheckpointMethod::Signal, 10)
}

fn three(task_nodes: [(&str, &str); 3]) -> Vec<(String, String)> {
    task_nodes
        .iter()
        .map(|(t, n)| (t.to_string(), n.to_string()))
        .collect()
}

pub(crate) async fn releasing_a_gang() -> Vec<Access> {
    let job = gang();
    let placed = job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![
            placement("ps-0", "a-ps-0-0", "n1"),
            placement("worker-0", "a-worker-0-0", "n1"),
            placement("worker-1", "a-worker-1-0", "n2"),
        ],
        ..TrainingJobStatus::default()
    });
    let mut script = vec![
        service("a"),
        budget("a"),
        // Every pod made held by the placement gate first, then every one released.
        create("a-ps-0-0", "a", "ps-0", "ps"),
        create("a-worker-0-0", "a", "worker-0", "worker"),
        create("a-worker-1-0", "a", "worker-1", "worker"),
        release("a-ps-0-0", "n1"),
        release("a-worker-0-0", "n1"),
        release("a-worker-1-0", "n2"),
    ];
    script.extend(status_write(
        &job,
        json!({"metadata": {"resourceVersion": "5"}, "status": {"phase": "Running", "placements": [
            {"task": "ps-0", "pod": "a-ps-0-0", "node": "n1"},
            {"task": "worker-0", "pod": "a-worker-0-0", "node": "n1"},
            {"task": "worker-1", "pod": "a-worker-1-0", "node": "n2"}],
            "conditions": [{"type": "PodsCreated", "status": "True", "reason": "Released"}]}}),
        &placed,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &three([("ps-0", "n1"), ("worker-0", "n1"), ("worker-1", "n2")]),
            "the gang fits on n1 and n2",
            at(0),
        )
        .await
        .expect("the gang is placed");
    server.finish().await
}

pub(crate) async fn rolling_back_a_failed_gang_release() -> Vec<Access> {
    let job = gang();
    let (client, server) = MockServer::start(vec![
        service("a"),
        budget("a"),
        create("a-ps-0-0", "a", "ps-0", "ps"),
        create("a-worker-0-0", "a", "worker-0", "worker"),
        create("a-worker-1-0", "a", "worker-1", "worker"),
        release("a-ps-0-0", "n1"),
        Expect::patch(&format!("{PODS}/a-worker-0-0")).fail(
            503,
            "ServiceUnavailable",
            "etcdserver: leader changed",
        ),
        // Each pod this call created or released goes, with its UID and its own grace
        // period: no member of a gang released alone.
        delete("a-ps-0-0", None),
        delete("a-worker-0-0", None),
        delete("a-worker-1-0", None),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "PlacementFailed", "message": "*", "lastTransitionTime": "*"}]}}),
            )
            .ok(job.json()),
        event("PlacementFailed", "Place", "Warning"),
    ]);
    let error = actor(client)
        .place(
            &job.build(),
            &three([("ps-0", "n1"), ("worker-0", "n1"), ("worker-1", "n2")]),
            "fits",
            at(0),
        )
        .await
        .expect_err("a failed release fails the placement");
    assert!(
        error
            .to_string()
            .contains("releasing pod a-worker-0-0 to the scheduler on node n1"),
        "{error}"
    );
    server.finish().await
}

/// A pod that already existed: released to `node` (`Some`), or still held by the
/// placement gate.
fn existing(name: &str, task: &str, node: Option<&str>) -> [Expect; 2] {
    let found = match node {
        Some(node) => released(pod("a", task, 0, None), node, 0),
        None => held(pod("a", task, 0, None)),
    };
    let mut found = serde_json::to_value(found).unwrap();
    found["metadata"]["resourceVersion"] = json!("1");
    [
        Expect::post(PODS).fail(
            409,
            "AlreadyExists",
            &format!("pods \"{name}\" already exists"),
        ),
        Expect::get(&format!("{PODS}/{name}")).ok(found),
    ]
}

pub(crate) async fn rolling_back_leaves_the_pods_that_were_there_before() -> Vec<Access> {
    let job = gang();
    let mut script = vec![service("a"), budget("a")];
    // A controller stopped half-way: the ps was created and released, worker-0 created.
    script.extend(existing("a-ps-0-0", "ps-0", Some("n1")));
    script.extend(existing("a-worker-0-0", "worker-0", None));
    script.push(create("a-worker-1-0", "a", "worker-1", "worker"));
    script.push(release("a-worker-0-0", "n1"));
    script.push(Expect::patch(&format!("{PODS}/a-worker-1-0")).fail(
        404,
        "NotFound",
        "pods \"a-worker-1-0\" not found",
    ));
    // This call released worker-0 and created worker-1: those two go. The ps was
    // released before, and may run: it stays.
    script.push(delete("a-worker-0-0", None));
    script.push(delete("a-worker-1-0", None));
    script.push(Expect::get(STATUS).ok(job.json()));
    script.push(Expect::put(STATUS).ok(job.json()));
    script.push(event("PlacementFailed", "Place", "Warning"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &three([("ps-0", "n1"), ("worker-0", "n1"), ("worker-1", "n2")]),
            "fits",
            at(0),
        )
        .await
        .expect_err("the failed release fails the placement");
    server.finish().await
}

pub(crate) async fn a_release_that_races_another_write_pins_the_pod_as_it_is_now() -> Vec<Access> {
    let job = JobBuilder::new("a");
    // A webhook added a gate of its own after the pod was created.
    let mut changed = created_json("a-main-0-0");
    changed["metadata"]["resourceVersion"] = json!("2");
    changed["spec"]["schedulingGates"] =
        json!([{"name": PLACEMENT_GATE}, {"name": "example.com/quota"}]);
    let mut script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main"),
        Expect::patch(&format!("{PODS}/a-main-0-0")).fail(
            409,
            "Conflict",
            "Operation cannot be fulfilled on pods \"a-main-0-0\": the object has been modified",
        ),
        Expect::get(&format!("{PODS}/a-main-0-0")).ok(changed),
        // Pinned again from what it is now: its other gate stays, for its owner to lift.
        Expect::patch(&format!("{PODS}/a-main-0-0"))
            .body(json!({"metadata": {"resourceVersion": "2"},
                "spec": {"schedulingGates": [{"name": "example.com/quota"}], "affinity": pin("n1")}}))
            .ok(pod_json("a-main-0-0")),
    ];
    script.extend(status_write(
        &job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}]}}),
        &job,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &[("main-0".to_string(), "n1".to_string())],
            "fits",
            at(0),
        )
        .await
        .expect("the pod is released as it is now, not rolled back");
    server.finish().await
}

pub(crate) async fn a_pod_released_elsewhere_by_someone_else_fails_the_placement() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let mut script = vec![service("a"), budget("a")];
    script.extend(existing("a-main-0-0", "main-0", Some("n7")));
    // Not made here, so not deleted here either.
    script.push(Expect::get(STATUS).ok(job.json()));
    script.push(Expect::put(STATUS).ok(job.json()));
    script.push(event("PlacementFailed", "Place", "Warning"));
    let (client, server) = MockServer::start(script);
    let error = actor(client)
        .place(
            &job.build(),
            &[("main-0".to_string(), "n1".to_string())],
            "fits",
            at(0),
        )
        .await
        .expect_err("a pod pinned elsewhere fails the placement");
    assert!(
        error.to_string().contains("placed on n7, not n1"),
        "{error}"
    );
    server.finish().await
}

pub(crate) async fn placing_again_after_a_restart_reuses_a_held_pod() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let placed = job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![placement("main-0", "a-main-0-0", "n1")],
        ..TrainingJobStatus::default()
    });
    let mut script = vec![service("a"), budget("a")];
    script.extend(existing("a-main-0-0", "main-0", None));
    script.push(release("a-main-0-0", "n1"));
    script.extend(status_write(
        &job,
        json!({"status": {"placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}]}}),
        &placed,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &[("main-0".to_string(), "n1".to_string())],
            "fits",
            at(0),
        )
        .await
        .expect("the leftover pod is released, not duplicated");
    server.finish().await
}

pub(crate) async fn a_template_the_api_server_refuses_becomes_a_condition() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let (client, server) = MockServer::start(vec![
        service("a"),
        budget("a"),
        Expect::post(PODS).fail(
            422,
            "Invalid",
            "Pod \"a-main-0-0\" is invalid: spec.containers[0].image: Required value",
        ),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "TemplateRejected", "message": "*", "lastTransitionTime": "*"}]}}),
            )
            .ok(job.json()),
        event("TemplateRejected", "Place", "Warning"),
    ]);
    let error = actor(client)
        .place(
            &job.build(),
            &[("main-0".to_string(), "n1".to_string())],
            "fits",
            at(0),
        )
        .await
        .expect_err("a refused template fails the placement");
    assert!(
        error.to_string().contains("spec.containers[0].image"),
        "{error}"
    );
    server.finish().await
}

pub(crate) async fn migrating_with_a_checkpoint_annotation() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Annotation, 30);
    let marked = restarting(
        &job,
        TrainingJobStatus {
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            moves: vec![migrated_for("reallocate", "n1", "n2")],
            migrations: 1,
            generation: 1,
            ..TrainingJobStatus::default()
        },
        migration("a-main-0-0", "main-0", "n2", Some(at(30))),
    );
    let mut script = Vec::new();
    script.extend(status_write(
        &job,
        json!({"status": {"moves": [{"kind": "Migrated", "purpose": "reallocate", "fromNodes": ["n1"], "toNodes": ["n2"], "time": "*"}], "migrations": 1, "generation": 1, "phase": "Restarting",
            "restart": {"action": "Migrate", "stopping": ["a-main-0-0"], "targets": [{"task": "main-0", "node": "n2"}],
                "requestedAt": "2026-01-01T00:00:00Z", "deleteAfter": "2026-01-01T00:00:30Z", "reason": "loss flattened"}}}),
        &marked,
    ));
    script.push(
        Expect::patch(&format!("{PODS}/a-main-0-0"))
            .body(json!({"metadata": {"annotations": {"switchyard.dev/checkpoint-requested": "2026-01-01T00:00:00Z"}}}))
            .ok(pod_json("a-main-0-0")),
    );
    script.push(delete("a-main-0-0", None));
    script.push(service("a"));
    script.push(budget("a"));
    script.push(create("a-main-0-1", "a", "main-0", "main"));
    script.push(release("a-main-0-1", "n2"));
    script.extend(status_write(
        &marked,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-1", "node": "n2"}],
            "conditions": [{"type": "PodsCreated", "status": "True", "reason": "Released", "message": "*", "lastTransitionTime": "*"}]}}),
        &marked,
    ));
    script.push(event("Migrated", "Migrate", "Normal"));
    let (client, server) = MockServer::start(script);
    let actor = actor(client);
    let old = pod("a", "main-0", 0, Some("n1"));
    let started = tokio::time::Instant::now();
    actor
        .migrate(
            &job.build(),
            std::slice::from_ref(&old),
            Migration {
                task: None,
                node: "n2",
                purpose: "reallocate",
                reason: "loss flattened",
            },
            at(0),
        )
        .await
        .expect("the migration starts");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "starting a migration does not wait out the grace period"
    );
    let marked = marked.build();
    let asked = server.served();
    let progress = actor
        .advance_restart(&marked, std::slice::from_ref(&old), at(10))
        .await;
    assert_eq!(progress.unwrap(), RestartProgress::Waiting);
    assert_eq!(
        server.served(),
        asked,
        "nothing happens within the grace period"
    );
    let progress = actor
        .advance_restart(&marked, std::slice::from_ref(&old), at(30))
        .await;
    assert_eq!(progress.unwrap(), RestartProgress::Waiting);
    let deleted = server.served();
    assert_eq!(
        deleted,
        asked + 1,
        "the pod is deleted once the grace period is over"
    );
    let progress = actor
        .advance_restart(&marked, &[terminating(old)], at(31))
        .await;
    assert_eq!(progress.unwrap(), RestartProgress::Waiting);
    assert_eq!(
        server.served(),
        deleted,
        "no replacement while the old pod terminates, and no second delete"
    );
    let progress = actor.advance_restart(&marked, &[], at(40)).await;
    assert_eq!(progress.unwrap(), RestartProgress::Done);
    server.finish().await
}

pub(crate) async fn migrating_with_the_stop_signal() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 45);
    let marked = restarting(
        &job,
        TrainingJobStatus {
            moves: vec![migrated_for("rebalance", "n1", "n3")],
            migrations: 1,
            generation: 1,
            ..TrainingJobStatus::default()
        },
        migration("a-main-0-0", "main-0", "n3", None),
    );
    let mut script = Vec::new();
    script.extend(status_write(
        &job,
        json!({"status": {"moves": [{"kind": "Migrated", "purpose": "rebalance", "fromNodes": ["n1"], "toNodes": ["n3"], "time": "*"}],
            "restart": {"action": "Migrate", "stopping": ["a-main-0-0"], "targets": [{"task": "main-0", "node": "n3"}]}}}),
        &marked,
    ));
    script.push(delete("a-main-0-0", Some(45)));
    script.push(service("a"));
    script.push(budget("a"));
    script.push(create("a-main-0-1", "a", "main-0", "main"));
    script.push(release("a-main-0-1", "n3"));
    script.extend(status_write(
        &marked,
        json!({"status": {"phase": "Running"}}),
        &marked,
    ));
    script.push(event("Migrated", "Migrate", "Normal"));
    let (client, server) = MockServer::start(script);
    let actor = actor(client);
    let old = pod("a", "main-0", 0, Some("n1"));
    actor
        .migrate(
            &job.build(),
            std::slice::from_ref(&old),
            Migration {
                task: Some("main-0"),
                node: "n3",
                purpose: "rebalance",
                reason: "even out",
            },
            at(0),
        )
        .await
        .expect("the migration starts");
    let deleted = server.served();
    let marked = marked.build();
    for (pods, t) in [(vec![old.clone()], 1), (vec![terminating(old)], 20)] {
        let progress = actor.advance_restart(&marked, &pods, at(t)).await;
        assert_eq!(progress.unwrap(), RestartProgress::Waiting);
        assert_eq!(
            server.served(),
            deleted,
            "the replacement waits until the old pod has terminated"
        );
    }
    let progress = actor.advance_restart(&marked, &[], at(50)).await;
    assert_eq!(progress.unwrap(), RestartProgress::Done);
    server.finish().await
}

pub(crate) async fn migrating_to_the_current_node_only_marks() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 45);
    let marked = job.clone_with(TrainingJobStatus {
        moves: vec![migrated_for("reallocate", "n1", "n1")],
        ..TrainingJobStatus::default()
    });
    let mut script = Vec::new();
    script.extend(status_write(
        &job,
        json!({"status": {"moves": [{"kind": "Migrated", "purpose": "reallocate", "fromNodes": ["n1"], "toNodes": ["n1"], "time": "*"}], "migrations": 0, "generation": 0, "phase": "Running"}}),
        &marked,
    ));
    script.push(event("Marked", "Migrate", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .migrate(
            &job.build(),
            &[pod("a", "main-0", 0, Some("n1"))],
            Migration {
                task: None,
                node: "n1",
                purpose: "reallocate",
                reason: "stay",
            },
            at(0),
        )
        .await
        .expect("the job is marked");
    server.finish().await
}

pub(crate) async fn resizing_a_pods_cpu() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 10);
    let mut script = vec![
        Expect::patch(&format!("{PODS}/a-main-0-0/resize"))
            .body(json!({"spec": {"containers": [{"name": "trainer", "resources": {"requests": {"cpu": "500m"}}}]}}))
            .ok(pod_json("a-main-0-0")),
    ];
    script.extend(status_write(
        &job,
        json!({"status": {"conditions": [{"type": "CpuWeightApplied", "status": "Unknown", "reason": "ResizeRequested", "message": "*", "lastTransitionTime": "*"}]}}),
        &job,
    ));
    script.push(event("ResizeRequested", "SetCpuWeight", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .set_cpu_weight(
            &job.build(),
            &pod("a", "main-0", 0, Some("n1")),
            0.25,
            "converged",
        )
        .await
        .expect("the resize is applied");
    server.finish().await
}

pub(crate) async fn a_refused_resize_becomes_a_condition_twice() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 10);
    let refused = || {
        Expect::patch(&format!("{PODS}/a-main-0-0/resize")).fail(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let condition = json!({"status": {"conditions": [{"type": "CpuWeightApplied", "status": "False", "reason": "ResizeRefused"}]}});
    let mut script = vec![refused()];
    script.extend(status_write(&job, condition.clone(), &job));
    script.push(event("ResizeRefused", "SetCpuWeight", "Warning"));
    script.push(refused());
    script.extend(status_write(&job, condition, &job));
    // The recorder folds the repeat into the first Event's series.
    script.push(
        Expect::patch(&format!("{EVENTS}/a.*"))
            .body(json!({"series": {"count": 2}}))
            .ok(event_json()),
    );
    let (client, server) = MockServer::start(script);
    let actor = actor(client);
    let (job, p) = (job.build(), pod("a", "main-0", 0, Some("n1")));
    for _ in 0..2 {
        actor
            .set_cpu_weight(&job, &p, 0.5, "converged")
            .await
            .expect_err("a refusal is a failed action, reported on the job");
    }
    server.finish().await
}

pub(crate) async fn scaling_restarts_the_job_with_more_workers() -> Vec<Access> {
    let job = gang().with_status(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![
            placement("ps-0", "a-ps-0-0", "n1"),
            placement("worker-0", "a-worker-0-0", "n1"),
            placement("worker-1", "a-worker-1-0", "n2"),
        ],
        ..TrainingJobStatus::default()
    });
    let target = |task: &str, node: &str| TaskTarget {
        task: task.into(),
        node: node.into(),
    };
    let scaled = restarting(
        &job,
        TrainingJobStatus {
            rescales: 1,
            replicas: Some(3),
            generation: 1,
            ..TrainingJobStatus::default()
        },
        PendingRestart {
            action: RestartAction::Scale,
            stopping: vec![
                "a-ps-0-0".into(),
                "a-worker-0-0".into(),
                "a-worker-1-0".into(),
            ],
            targets: vec![
                target("ps-0", "n1"),
                target("worker-0", "n1"),
                target("worker-1", "n2"),
                target("worker-2", "n3"),
            ],
            requested_at: at(0).to_string(),
            delete_after: None,
            retry_after: None,
            reason: "throughput grows with workers".into(),
        },
    );
    let mut script = Vec::new();
    script.extend(status_write(
        &job,
        json!({"status": {"rescales": 1, "replicas": 3, "generation": 1, "phase": "Restarting",
            "restart": {"action": "Scale", "stopping": ["a-ps-0-0", "a-worker-0-0", "a-worker-1-0"],
                "targets": [{"task": "ps-0", "node": "n1"}, {"task": "worker-0", "node": "n1"},
                    {"task": "worker-1", "node": "n2"}, {"task": "worker-2", "node": "n3"}]}}}),
        &scaled,
    ));
    for p in ["a-ps-0-0", "a-worker-0-0", "a-worker-1-0"] {
        script.push(delete(p, Some(10)));
    }
    script.push(service("a"));
    script.push(budget("a"));
    script.push(create("a-ps-0-1", "a", "ps-0", "ps"));
    for i in 0..3 {
        script.push(create(
            &format!("a-worker-{i}-1"),
            "a",
            &format!("worker-{i}"),
            "worker",
        ));
    }
    for (p, n) in [
        ("a-ps-0-1", "n1"),
        ("a-worker-0-1", "n1"),
        ("a-worker-1-1", "n2"),
        ("a-worker-2-1", "n3"),
    ] {
        script.push(release(p, n));
    }
    script.extend(status_write(
        &scaled,
        json!({"status": {"phase": "Running", "replicas": 3, "placements": [
            {"task": "ps-0", "pod": "a-ps-0-1", "node": "n1"}, {"task": "worker-0", "pod": "a-worker-0-1", "node": "n1"},
            {"task": "worker-1", "pod": "a-worker-1-1", "node": "n2"}, {"task": "worker-2", "pod": "a-worker-2-1", "node": "n3"}]}}),
        &scaled,
    ));
    script.push(event("Rescaled", "Scale", "Normal"));
    let (client, server) = MockServer::start(script);
    let pods = [
        pod("a", "ps-0", 0, Some("n1")),
        pod("a", "worker-0", 0, Some("n1")),
        pod("a", "worker-1", 0, Some("n2")),
    ];
    let actor = actor(client);
    actor
        .scale(
            &job.build(),
            &pods,
            3,
            &["n3".to_string()],
            "throughput grows with workers",
            at(0),
        )
        .await
        .expect("the rescale starts");
    let progress = actor.advance_restart(&scaled.build(), &[], at(15)).await;
    assert_eq!(progress.unwrap(), RestartProgress::Done);
    server.finish().await
}

pub(crate) async fn a_status_update_recovers_from_a_409_conflict() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 10);
    let mut newer = job.json();
    newer["metadata"]["resourceVersion"] = json!("6");
    let labelled = json!({"status": {"policyLabels": {"category": "CC"}}});
    let (client, server) = MockServer::start(vec![
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(json!({"metadata": {"resourceVersion": "5"}}))
            .fail(409, "Conflict", "Operation cannot be fulfilled on trainingjobs.switchyard.dev \"a\": the object has been modified"),
        Expect::get(STATUS).ok(newer.clone()),
        Expect::put(STATUS).body(json!({"metadata": {"resourceVersion": "6"}, "status": labelled["status"].clone()})).ok(newer),
    ]);
    actor(client)
        .update_status(&job.build(), |s| {
            s.policy_labels = BTreeMap::from([("category".to_string(), "CC".to_string())])
        })
        .await
        .expect("the retry succeeds");
    server.finish().await
}

pub(crate) async fn policy_labels_are_one_merge_patch() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 10).with_status(TrainingJobStatus {
        policy_labels: BTreeMap::from([
            ("category".to_string(), "PC".to_string()),
            ("old".to_string(), "x".to_string()),
        ]),
        ..TrainingJobStatus::default()
    });
    let (client, server) = MockServer::start(vec![
        Expect::patch(STATUS)
            .body(json!({"status": {"policyLabels": {"category": "CC", "old": null}}}))
            .ok(job.json()),
    ]);
    let labels = BTreeMap::from([("category".to_string(), "CC".to_string())]);
    actor(client)
        .set_policy_labels(&job.build(), labels)
        .await
        .expect("the labels are patched");
    server.finish().await
}

/// Serves one LIST and one WATCH of `path`, then waits for the store to hold `expect` objects.
pub(crate) async fn reflect<K>(
    api: impl FnOnce(kube::Client) -> Api<K>,
    path: &str,
    trim: fn(&mut K),
    items: Vec<Value>,
) -> (kube::runtime::reflector::Store<K>, Vec<Access>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let count = items.len();
    let (client, server) = MockServer::start(vec![
        Expect::get(path).query_has(&[]).ok(json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "10"}, "items": items})),
        Expect::get(path).query_has(&["watch=true", "resourceVersion=10"]).text(""),
        // The watcher comes back at once; that watch stays open until the test ends.
        Expect::get(path)
            .query_has(&["watch=true"])
            .after(std::time::Duration::from_secs(3600))
            .text(""),
    ]);
    let (store, driver) = switchyard_kube::reflect(
        api(client),
        watcher::Config::default(),
        trim,
        Arc::new(Notify::new()),
    );
    let task = tokio::spawn(driver);
    let seen = server.finish().await;
    wait_for(|| store.state().len() == count).await;
    task.abort();
    (store, seen)
}

async fn wait_for(mut condition: impl FnMut() -> bool) {
    tokio::time::timeout(crate::support::mock::TIMEOUT, async {
        while !condition() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the caches caught up");
}

pub(crate) async fn a_dropped_node_watch_restarts_where_it_left_off() -> Vec<Access> {
    let n1 = serde_json::to_value(node("n1", 8)).unwrap();
    let mut n2 = serde_json::to_value(node("n2", 16)).unwrap();
    n2["metadata"]["resourceVersion"] = json!("11");
    let mut cordoned = n1.clone();
    cordoned["metadata"]["resourceVersion"] = json!("12");
    cordoned["spec"] = json!({"unschedulable": true});
    let (client, server) = MockServer::start(vec![
        Expect::get("/api/v1/nodes?*").ok(json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "10"}, "items": [n1]})),
        // The first watch delivers one event, then the server drops the connection.
        Expect::get("/api/v1/nodes?*")
            .query_has(&["watch=true", "resourceVersion=10"])
            .text(&format!("{}\n", json!({"type": "ADDED", "object": n2}))),
        // The watcher comes back from the last version it saw, without listing again.
        Expect::get("/api/v1/nodes?*")
            .query_has(&["watch=true", "resourceVersion=11"])
            .text(&format!("{}\n", json!({"type": "MODIFIED", "object": cordoned}))),
        Expect::get("/api/v1/nodes?*")
            .query_has(&["watch=true", "resourceVersion=12"])
            .after(std::time::Duration::from_secs(3600))
            .text(""),
    ]);
    let changed = Arc::new(Notify::new());
    let (store, driver) = switchyard_kube::reflect(
        Api::<Node>::all(client),
        watcher::Config::default(),
        trim_node,
        changed,
    );
    let task = tokio::spawn(driver);
    let seen = server.finish().await;
    wait_for(|| {
        store.state().len() == 2
            && store
                .state()
                .iter()
                .any(|n| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true))
    })
    .await;
    task.abort();
    seen
}

pub(crate) async fn the_snapshot_comes_from_the_caches() -> Vec<Access> {
    let mut seen = Vec::new();
    let (nodes, s) = reflect(
        Api::<Node>::all,
        "/api/v1/nodes?*",
        trim_node,
        vec![
            serde_json::to_value(node("n1", 8)).unwrap(),
            serde_json::to_value(node("n2", 8)).unwrap(),
            tainted_control_plane(),
        ],
    )
    .await;
    seen.extend(s);
    let other: Value = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default", "resourceVersion": "3"},
        "spec": {"nodeName": "n2", "containers": [{"name": "web", "resources": {"requests": {"cpu": "500m"}}}]}, "status": {"phase": "Running"}});
    let pods_json = vec![
        serde_json::to_value(pod("a", "ps-0", 0, Some("n1"))).unwrap(),
        serde_json::to_value(pod("a", "worker-0", 0, None)).unwrap(),
        other,
    ];
    let (pods, s) = reflect(Api::<Pod>::all, "/api/v1/pods?*", trim_pod, pods_json).await;
    seen.extend(s);
    let job = gang().with_status(TrainingJobStatus {
        moves: vec![migrated_for("reallocate", "n1", "n2")],
        ..TrainingJobStatus::default()
    });
    let (jobs, s) = reflect(
        Api::<TrainingJob>::all,
        "/apis/switchyard.dev/v1alpha1/trainingjobs?*",
        trim_job,
        vec![job.json()],
    )
    .await;
    seen.extend(s);
    let caches = Caches::new(nodes, pods, jobs);
    let snapshot = caches.snapshot(100.0, vec![]);
    assert_eq!(snapshot.nodes.len(), 3);
    assert_eq!(
        snapshot.node("n1").unwrap().requested.cpu_millis,
        2000,
        "the job's bound ps counts on n1"
    );
    assert_eq!(
        snapshot.node("n2").unwrap().requested.cpu_millis,
        500,
        "another scheduler's pod counts on n2"
    );
    assert_eq!(
        snapshot.node("n1").unwrap().usage,
        None,
        "no metrics server: no usage"
    );
    let job = snapshot.job("ml/a").expect("the job is in the snapshot");
    let phases: Vec<(&str, TaskPhase)> = job
        .tasks
        .iter()
        .map(|t| (t.name.as_str(), t.phase))
        .collect();
    assert_eq!(
        phases,
        vec![
            ("ps-0", TaskPhase::Running),
            ("worker-0", TaskPhase::Pending),
            ("worker-1", TaskPhase::Pending)
        ]
    );
    assert_eq!(job.phase, JobPhase::Running);
    assert!(job.checkpointable);
    // The gang's template tolerates nothing: its tasks may run on n1 and n2 only.
    let set = job.tasks[0]
        .eligible
        .expect("the tainted node excludes something");
    assert!(job.tasks.iter().all(|t| t.eligible == Some(set)));
    let allowed: Vec<&str> = snapshot
        .node_set(set)
        .expect("the set is in the snapshot")
        .nodes
        .iter()
        .map(|&i| snapshot.nodes[i as usize].name.as_str())
        .collect();
    assert_eq!(allowed, ["n1", "n2"]);
    let moves: Vec<(&str, &[String])> = job
        .moves
        .iter()
        .map(|m| (m.purpose.as_str(), m.to_nodes.as_slice()))
        .collect();
    assert_eq!(
        moves,
        [("reallocate", &["n2".to_string()][..])],
        "the history comes from the status"
    );
    assert_eq!(
        (
            job.replicas.role.as_str(),
            job.replicas.current,
            job.replicas.min,
            job.replicas.max
        ),
        ("worker", 2, 1, 4)
    );
    seen
}

pub(crate) async fn usage_comes_from_metrics_when_served() -> Vec<Access> {
    let (client, server) = MockServer::start(vec![
        Expect::get("/apis/metrics.k8s.io/v1beta1/nodes").ok(json!({"items": [{"metadata": {"name": "n1"}, "usage": {"cpu": "3500m", "memory": "10Gi"}}]})),
        Expect::get("/apis/metrics.k8s.io/v1beta1/pods?labelSelector=switchyard.dev%2Fjob").ok(json!({"items": [{"metadata": {"name": "a-ps-0-0", "namespace": NS},
            "containers": [{"name": "trainer", "usage": {"cpu": "1200m", "memory": "1Gi"}}, {"name": "sidecar", "usage": {"cpu": "100m", "memory": "0"}}]}]})),
        Expect::get("/apis/metrics.k8s.io/v1beta1/nodes").fail(404, "NotFound", "the server could not find the requested resource"),
    ]);
    let usage = switchyard_kube::fetch_usage(&client)
        .await
        .unwrap()
        .expect("metrics are served");
    assert_eq!(usage.nodes["n1"].cpu_millis, 3500);
    assert_eq!(
        usage.pods[&(NS.to_string(), "a-ps-0-0".to_string())].cpu_millis,
        1300
    );
    assert_eq!(
        switchyard_kube::fetch_usage(&client).await.unwrap(),
        None,
        "without metrics-server the usage is None"
    );
    server.finish().await
}

fn empty_caches() -> Caches {
    Caches::new(
        kube::runtime::reflector::store().0,
        kube::runtime::reflector::store().0,
        kube::runtime::reflector::store().0,
    )
}

pub(crate) async fn loss_samples_come_from_the_followed_log() -> Vec<Access> {
    let first = "2026-01-01T00:00:01.250000000Z Epoch [1/90] Step [100/5005] loss=2.9812\n\
                 2026-01-01T00:00:01.500000000Z noise\n\
                 2026-01-01T00:00:01.750000000Z Epoch [1/90] Step [200/5005] loss=2.7710\n";
    // The stream ended and the pod is followed again: the API server answers from the
    // start of the second asked for, so the line at .750 comes again.
    let second = "2026-01-01T00:00:01.750000000Z Epoch [1/90] Step [200/5005] loss=2.7710\n\
                  2026-01-01T00:00:02.100000000Z Epoch [1/90] Step [300/5005] loss=2.6001\n";
    let (client, server) = MockServer::start(vec![
        Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
            .query_has(&["container=trainer", "follow=true", "timestamps=true"])
            .text(first),
        Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
            .query_has(&[
                "follow=true",
                "timestamps=true",
                "sinceTime=2026-01-01T00%3A00%3A01Z",
            ])
            .text(second),
    ]);
    let caches = empty_caches();
    let pattern =
        LogPattern::compile("a", r"Step \[(?P<step>\d+)/\d+\] loss=(?P<value>[0-9.]+)").unwrap();
    let mut taken = Vec::new();
    for _ in 0..2 {
        let n = switchyard_kube::follow_log(
            Api::namespaced(client.clone(), NS),
            "a-main-0-0",
            Some("trainer".into()),
            pattern.clone(),
            &caches,
            "ml/a",
            || 42.0,
        )
        .await
        .unwrap();
        taken.push(n);
    }
    assert_eq!(taken, vec![2, 1], "the re-read line is not taken again");
    let loss = caches.loss.lock().unwrap().samples("ml/a").unwrap();
    let got: Vec<(u64, f64)> = loss.iter().map(|s| (s.step, s.value)).collect();
    assert_eq!(got, vec![(100, 2.9812), (200, 2.771), (300, 2.6001)]);
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn placing_a_gang_creates_every_pod_held_then_releases_each_pinned_and_records_the_placements()
 {
    releasing_a_gang().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_left_held_by_a_restarted_controller_is_released_not_created_twice() {
    placing_again_after_a_restart_reuses_a_held_pod().await;
}

#[tokio::test(start_paused = true)]
async fn a_template_the_api_server_refuses_is_reported_as_pods_created_false() {
    a_template_the_api_server_refuses_becomes_a_condition().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_release_deletes_every_pod_the_placement_created_or_released() {
    rolling_back_a_failed_gang_release().await;
}

#[tokio::test(start_paused = true)]
async fn a_rolled_back_placement_leaves_the_pods_that_were_released_before_it_alone() {
    rolling_back_leaves_the_pods_that_were_there_before().await;
}

#[tokio::test(start_paused = true)]
async fn a_release_that_conflicts_with_another_write_reads_the_pod_again_and_keeps_its_other_gates()
{
    a_release_that_races_another_write_pins_the_pod_as_it_is_now().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_found_pinned_to_another_node_fails_the_placement_and_is_left_alone() {
    a_pod_released_elsewhere_by_someone_else_fails_the_placement().await;
}

#[tokio::test(start_paused = true)]
async fn an_annotation_migration_marks_the_job_asks_for_a_checkpoint_and_deletes_only_after_the_grace_period()
 {
    migrating_with_a_checkpoint_annotation().await;
}

#[tokio::test(start_paused = true)]
async fn a_signal_migration_creates_the_replacement_only_once_the_old_pod_is_gone() {
    migrating_with_the_stop_signal().await;
}

#[tokio::test(start_paused = true)]
async fn migrating_to_the_node_the_job_is_on_only_marks_it() {
    migrating_to_the_current_node_only_marks().await;
}

#[tokio::test(start_paused = true)]
async fn a_cpu_weight_resizes_the_training_containers_request_in_place() {
    resizing_a_pods_cpu().await;
}

#[tokio::test(start_paused = true)]
async fn a_refused_resize_sets_a_condition_and_the_controller_keeps_going() {
    a_refused_resize_becomes_a_condition_twice().await;
}

#[tokio::test(start_paused = true)]
async fn scaling_checkpoints_deletes_and_recreates_the_job_with_the_new_replica_count() {
    scaling_restarts_the_job_with_more_workers().await;
}

#[tokio::test(start_paused = true)]
async fn the_policys_labels_are_written_as_one_merge_patch_that_removes_dropped_keys() {
    policy_labels_are_one_merge_patch().await;
}

#[tokio::test(start_paused = true)]
async fn a_conflicting_status_write_is_read_again_and_retried() {
    a_status_update_recovers_from_a_409_conflict().await;
}

#[tokio::test(start_paused = true)]
async fn a_dropped_watch_resumes_from_the_last_resource_version() {
    a_dropped_node_watch_restarts_where_it_left_off().await;
}

#[tokio::test(start_paused = true)]
async fn the_snapshot_counts_every_pod_on_a_node_and_the_jobs_tasks_from_its_spec() {
    the_snapshot_comes_from_the_caches().await;
}

#[tokio::test(start_paused = true)]
async fn usage_is_read_from_metrics_and_absent_without_a_metrics_server() {
    usage_comes_from_metrics_when_served().await;
}

#[tokio::test(start_paused = true)]
async fn a_log_followed_again_resumes_where_it_stopped_and_takes_no_sample_twice() {
    loss_samples_come_from_the_followed_log().await;
}

/// A migration with `purpose` from `from` to `to`, as the status records it.
pub(crate) fn migrated_for(purpose: &str, from: &str, to: &str) -> MoveRecord {
    MoveRecord {
        time: 1_767_225_600.0,
        kind: MoveKindRecord::Migrated,
        purpose: purpose.into(),
        from_nodes: vec![from.into()],
        to_nodes: vec![to.into()],
    }
}

/// A control-plane node, tainted as kubeadm taints it.
fn tainted_control_plane() -> Value {
    let mut node = serde_json::to_value(node("tainted", 8)).unwrap();
    node["spec"] = json!({"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]});
    node
}
