//! Acknowledged checkpoints on the scripted API server: a TrainingJob preempted with a
//! checkpoint by annotation whose pod prints `switchyard: checkpoint-complete` after
//! the request is deleted at once, long before its grace period ends, and its status,
//! condition and Event say `CheckpointAcknowledged`; one whose pod does not (its only
//! such line predates the request) is deleted at the grace period's end with
//! `CheckpointTimedOut`; an acknowledgement over the API does what the log line does;
//! and the policy then sees `switchyard.dev/checkpoint-kept` on the job.

use std::time::Duration;

use serde_json::json;
use switchyard_control::{
    AckRefused, CHECKPOINT_KEPT_LABEL, CheckpointAck, Cluster, Leader, LiveCluster,
};
use switchyard_core::{Action, Operation};
use switchyard_kube::{
    CheckpointMethod, CheckpointRecord, CheckpointResult, KubeCluster, PendingRestart, Phase,
    RestartAction, TrainingJobStatus,
};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking};

/// Job `a`, one `main` task running on n1 that reports through its log and
/// checkpoints by annotation with a 30 s grace period.
fn trainer() -> JobBuilder {
    running_single(CheckpointMethod::Annotation, 30)
}

/// `job` once its preemption at `at(0)` is recorded.
fn preempting(job: &JobBuilder) -> JobBuilder {
    restarting(
        job,
        TrainingJobStatus {
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            generation: 1,
            ..TrainingJobStatus::default()
        },
        PendingRestart {
            action: RestartAction::Preempt,
            stopping: vec!["a-main-0-0".into()],
            targets: Vec::new(),
            requested_at: at(0).to_string(),
            delete_after: Some(at(30).to_string()),
            retry_after: None,
            reason: "make room".into(),
        },
    )
}

/// The trainer running on n1 with its pod, the job as its preemption records it, and
/// the script so far: its log answered with `log`, then the preemption asked.
fn trainer_being_preempted(log: &str) -> (World, JobBuilder, JobBuilder, Vec<Expect>) {
    let mut world = World::new().node(node("n1", 8));
    let job = trainer();
    world.job(&job);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let stopping = preempting(&job);
    let mut script = vec![log_now(log)];
    script.extend(preemption_asked(&job, &stopping));
    (world, job, stopping, script)
}

/// The log of the trainer's pod, answered at once with `text`.
fn log_now(text: &str) -> Expect {
    Expect::get(&format!("{PODS}/a-main-0-0/log?*")).text(text)
}

/// The follower that starts again once the first stream ended: it waits for good, and
/// comes in any order with the request before it (a task of its own).
fn log_silent() -> Expect {
    Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
        .after(Duration::from_secs(3600))
        .text("")
        .either_order_with_previous()
}

/// The recorded preemption and the annotation that asks for the checkpoint.
fn preemption_asked(job: &JobBuilder, stopping: &JobBuilder) -> Vec<Expect> {
    let mut script = status_write(
        job,
        json!({"status": {"phase": "Restarting",
            "restart": {"action": "Preempt", "stopping": ["a-main-0-0"]}}}),
        stopping,
    )
    .to_vec();
    script.push(
        Expect::patch(&format!("{PODS}/a-main-0-0"))
            .body(json!({"metadata": {"annotations":
            {"switchyard.dev/checkpoint-requested": "2026-01-01T00:00:00Z"}}}))
            .ok(pod_json("a-main-0-0")),
    );
    script
}

/// Once the old pod is gone: `stopping` queued again with `last` as its last
/// checkpoint and the condition `(status, reason)`, the checkpoint's Event of that
/// reason and type, then the preemption's.
fn requeued_after(
    stopping: &JobBuilder,
    last: serde_json::Value,
    (status, reason, type_): (&str, &str, &str),
) -> Vec<Expect> {
    let mut script = status_write(
        stopping,
        json!({"status": {"phase": "Waiting", "lastCheckpoint": last,
            "conditions": [{"type": "Checkpointed", "status": status, "reason": reason}]}}),
        stopping,
    )
    .to_vec();
    script.push(event(reason, "Preempt", type_));
    script.push(event("Preempted", "Preempt", "Normal"));
    script
}

fn preempt() -> Action {
    Action {
        op: Operation::Preempt { job: "ml/a".into() },
        reason: "make room".into(),
    }
}

/// `job` waiting again after its preemption, its last checkpoint `record`.
fn requeued(job: &JobBuilder, record: CheckpointRecord) -> JobBuilder {
    job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Waiting),
        generation: 1,
        last_checkpoint: Some(record),
        ..TrainingJobStatus::default()
    })
}

/// Waits until the follower's first read of the log was answered, and a moment for
/// it to take in the lines and end.
async fn log_read(server: &MockServer) {
    tokio::time::timeout(crate::support::mock::TIMEOUT, async {
        while server.served() < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the follower read the log");
    tokio::time::sleep(Duration::from_millis(200)).await;
}

async fn pass_at(cluster: KubeCluster, world: &World, t: i64) -> KubeCluster {
    world.set_clock(t);
    blocking(cluster, move |c| c.advance(Some(at(t).as_second() as f64)))
        .await
        .0
}

/// Preempts the trainer at `at(0)` on `cluster`, its pod annotated; the world shows
/// the restart from then on.
async fn preempted(cluster: KubeCluster, world: &mut World, job: &JobBuilder) -> KubeCluster {
    let (cluster, outcomes) = blocking(cluster, |c| c.apply(&[preempt()], &[])).await;
    assert!(matches!(outcomes[..], [Ok(())]), "{outcomes:?}");
    world.job(&preempting(job));
    let mut asked = pod("a", "main-0", 0, Some("n1"));
    asked.metadata.annotations = Some(
        [(
            "switchyard.dev/checkpoint-requested".to_string(),
            at(0).to_string(),
        )]
        .into(),
    );
    world.pod(asked);
    cluster
}

pub(crate) async fn a_pod_that_prints_checkpoint_complete_is_deleted_before_its_grace_period()
-> Vec<Access> {
    let (mut world, job, stopping, mut script) = trainer_being_preempted(
        "2026-01-01T00:00:05.000000000Z switchyard: checkpoint-complete step=40 path=/ckpt/a 40.pt\n",
    );
    // Every asked pod has written its checkpoint: deleted at once, 25 s before its
    // grace period would end.
    script.push(delete("a-main-0-0", None));
    script.push(log_silent());
    // Once it is gone: queued again, the checkpoint's end in the status and an Event.
    script.extend(requeued_after(
        &stopping,
        json!({"outcome": "Acknowledged", "seconds": 5.0, "path": "/ckpt/a 40.pt",
            "requestedAt": "2026-01-01T00:00:00Z"}),
        ("True", "CheckpointAcknowledged", "Normal"),
    ));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let cluster = pass_at(cluster, &world, 0).await;
    log_read(&server).await;
    let cluster = preempted(cluster, &mut world, &job).await;
    let served = server.served();
    let cluster = pass_at(cluster, &world, 6).await;
    assert!(
        server.served() > served,
        "deleted 6 s after the request, not at 30 s"
    );
    world.pod_gone(pod("a", "main-0", 0, Some("n1")));
    let _ = pass_at(cluster, &world, 7).await;
    let record = CheckpointRecord {
        outcome: CheckpointResult::Acknowledged,
        seconds: 5.0,
        path: Some("/ckpt/a 40.pt".into()),
        requested_at: at(0).to_string(),
        not_acknowledged: Vec::new(),
    };
    world.job(&requeued(&job, record));
    let snapshot = world.caches.snapshot(at(8).as_second() as f64, vec![]);
    assert_eq!(
        snapshot.job("ml/a").unwrap().labels[CHECKPOINT_KEPT_LABEL],
        "true",
        "the policy sees the restart kept its checkpoint"
    );
    server.finish().await
}

pub(crate) async fn a_pod_that_never_acknowledges_is_deleted_at_the_end_of_its_grace_period()
-> Vec<Access> {
    // A checkpoint the process completed before this request says nothing of it.
    let (mut world, job, stopping, mut script) = trainer_being_preempted(
        "2025-12-31T23:59:50.000000000Z switchyard: checkpoint-complete step=10 path=/ckpt/10\n",
    );
    script.push(log_silent());
    // The follower starts again at the first look after its stream ended, in a task of
    // its own: before or after the delete.
    script.push(delete("a-main-0-0", None).either_order_with_previous());
    script.extend(requeued_after(
        &stopping,
        json!({"outcome": "TimedOut", "seconds": 30.0, "requestedAt": "2026-01-01T00:00:00Z",
            "notAcknowledged": ["main-0"]}),
        ("False", "CheckpointTimedOut", "Warning"),
    ));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let cluster = pass_at(cluster, &world, 0).await;
    log_read(&server).await;
    let cluster = preempted(cluster, &mut world, &job).await;
    let asked = server.served();
    let cluster = pass_at(cluster, &world, 29).await;
    // At most the follower again: the pod is not deleted before its grace period ends.
    assert!(server.served() <= asked + 1, "nothing deleted at 29 s");
    let cluster = pass_at(cluster, &world, 30).await;
    world.pod_gone(pod("a", "main-0", 0, Some("n1")));
    let _ = pass_at(cluster, &world, 31).await;
    let record = CheckpointRecord {
        outcome: CheckpointResult::TimedOut,
        seconds: 30.0,
        path: None,
        requested_at: at(0).to_string(),
        not_acknowledged: vec!["main-0".into()],
    };
    world.job(&requeued(&job, record));
    let snapshot = world.caches.snapshot(at(32).as_second() as f64, vec![]);
    assert_eq!(
        snapshot.job("ml/a").unwrap().labels[CHECKPOINT_KEPT_LABEL],
        "false",
        "the policy sees the work since the previous checkpoint was lost"
    );
    server.finish().await
}

pub(crate) async fn an_acknowledgement_over_the_api_stops_the_pods_like_the_log_line() -> Vec<Access>
{
    let mut world = World::new().node(node("n1", 8));
    // Progress pushed: no log is followed, the script acknowledges over the API.
    let job = annotated_single().with_status(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![placement("main-0", "a-main-0-0", "n1")],
        ..TrainingJobStatus::default()
    });
    world.job(&job);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let stopping = preempting(&job);
    let mut script = preemption_asked(&job, &stopping);
    script.push(delete("a-main-0-0", None));
    script.extend(requeued_after(
        &stopping,
        json!({"outcome": "Acknowledged", "seconds": 3.0, "path": "/ckpt/api"}),
        ("True", "CheckpointAcknowledged", "Normal"),
    ));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let mut cluster = pass_at(cluster, &world, 0).await;
    let ack = |task: Option<&str>| CheckpointAck {
        path: "/ckpt/api".into(),
        step: Some(40),
        task: task.map(str::to_string),
    };
    assert_eq!(
        cluster.acknowledge_checkpoint("ml/a", ack(None)),
        Err(AckRefused::NotRequested { job: "ml/a".into() }),
        "nothing asked yet"
    );
    let cluster = preempted(cluster, &mut world, &job).await;
    world.set_clock(3);
    let (mut cluster, asked) = blocking(cluster, move |c| {
        let asked = c.checkpoint_request("ml/a");
        let refused = c.acknowledge_checkpoint("ml/a", ack(Some("worker-9")));
        let taken = c.acknowledge_checkpoint("ml/a", ack(Some("main-0")));
        (asked, refused, taken)
    })
    .await;
    let (asked, refused, taken) = asked;
    assert!(asked.requested);
    assert_eq!(asked.deadline, Some(at(30).as_second() as f64));
    assert!(
        matches!(refused, Err(AckRefused::UnknownTask { .. })),
        "{refused:?}"
    );
    let taken = taken.unwrap();
    assert!(taken.waiting_for.is_empty(), "{taken:?}");
    assert_eq!(taken.after_seconds, 3.0);
    cluster = pass_at(cluster, &world, 4).await;
    world.pod_gone(pod("a", "main-0", 0, Some("n1")));
    let _ = pass_at(cluster, &world, 5).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_job_whose_pod_prints_checkpoint_complete_is_stopped_at_once_and_reported_acknowledged()
 {
    a_pod_that_prints_checkpoint_complete_is_deleted_before_its_grace_period().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_job_that_never_acknowledges_is_stopped_at_its_grace_period_and_reported_timed_out()
 {
    a_pod_that_never_acknowledges_is_deleted_at_the_end_of_its_grace_period().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_over_the_api_stops_a_cluster_job_s_pods_at_once() {
    an_acknowledgement_over_the_api_stops_the_pods_like_the_log_line().await;
}
