//! Acting on a move: a migration by checkpoint annotation or by stop signal, a migration
//! to the node a job is on, a CPU weight resized in place (and refused), a rescale that
//! checkpoints and restarts the job with its new replica count.
//!
//! Each scenario drives the real backend code against the scripted API server and returns
//! what it accessed, so the RBAC test can check `deploy/rbac.yaml` against the union of
//! them. Tests run with paused time, so grace periods and back-off pass at once while
//! their order is still checked.

use serde_json::json;
use switchyard_kube::{
    CheckpointMethod, PendingRestart, Phase, RestartAction, TaskTarget, TrainingJobStatus,
};
use switchyard_kube::{Migration, RestartProgress};

use crate::releases::gang;
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};

pub(crate) async fn migrating_with_a_checkpoint_annotation() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Annotation, 30);
    let marked = reallocating(&job, "n2", Some(at(30)));
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
            "conditions": [{"type": "PodsCreated", "status": "True", "reason": "Released", "message": "*", "lastTransitionTime": "*"},
                {"type": "Checkpointed", "status": "False", "reason": "CheckpointTimedOut"}]}}),
        &marked,
    ));
    // Its process never said its checkpoint was written.
    script.push(event("CheckpointTimedOut", "Migrate", "Warning"));
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
    script.push(event("CheckpointTimedOut", "Migrate", "Warning"));
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
    script.push(event("CheckpointTimedOut", "Scale", "Warning"));
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
