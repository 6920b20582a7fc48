//! Restarts (migrations, rescales) happen at most once and each step survives a change
//! of leader: the restart is recorded only on the status the decision saw, a pod is
//! deleted only after it was asked to checkpoint and had its grace period, and the old
//! pods of a restart are deleted even when they exited on their own.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_core::TaskPhase;
use switchyard_kube::Error;
use switchyard_kube::Migration;
use switchyard_kube::{CheckpointMethod, Phase, RestartAction, TaskTarget, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, status_write_of};

/// The checkpoint request on pod `pod`, asked at `time`.
fn annotate(pod: &str, time: &str) -> Expect {
    Expect::patch(&format!("{PODS}/{pod}"))
        .body(json!({"metadata": {"annotations": {"switchyard.dev/checkpoint-requested": time}}}))
        .ok(pod_json(pod))
}

pub(crate) async fn a_successor_asks_for_the_checkpoint_its_predecessor_recorded_but_never_asked()
-> Vec<Access> {
    // The previous leader recorded the migration (checkpoint by annotation, 30 s) and
    // stopped before it annotated the pod.
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = reallocating(&annotated_single(), "n2", Some(at(30)));
    world.job(&job);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let (client, server) = MockServer::start(vec![
        annotate("a-main-0-0", "2026-01-01T00:00:40Z"),
        delete("a-main-0-0", None),
    ]);
    // The new leader takes over 40 s in, past the recorded deleteAfter.
    world.set_clock(40);
    let cluster = world.cluster(client, Leader::always("switchyard-1"));
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(40).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        1,
        "the pod is asked to checkpoint, not deleted"
    );
    world.set_clock(69);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(69).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        1,
        "its grace period runs from when it was asked"
    );
    world.set_clock(70);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(70).as_second() as f64))).await;
    server.finish().await
}

pub(crate) async fn a_migration_decided_on_a_stale_cache_starts_no_second_restart() -> Vec<Access> {
    // The cache still shows a running; another leader has already moved it.
    let cached = running_single(CheckpointMethod::Annotation, 30);
    let moved = moving_main(
        &cached,
        "n3",
        Some(at(30)),
        TrainingJobStatus {
            moves: vec![migrated_for("reallocate", "n1", "n2")],
            migrations: 1,
            ..TrainingJobStatus::default()
        },
    );
    let (client, server) = MockServer::start(vec![
        Expect::get(STATUS).ok(moved.json()),
        // The refused action is reported on the job, once.
        event("MigrateFailed", "Migrate", "Warning"),
    ]);
    let error = actor(client)
        .migrate(
            &cached.build(),
            &[pod("a", "main-0", 0, Some("n1"))],
            Migration {
                task: None,
                node: "n2",
                purpose: "reallocate",
                reason: "loss flattened",
            },
            at(0),
        )
        .await
        .expect_err("the status read afresh refuses a second restart");
    assert!(matches!(error, Error::Stale { .. }), "{error}");
    assert_eq!(error.metric_label(), "stale");
    server.finish().await
}

pub(crate) async fn a_rescale_decided_on_a_stale_cache_starts_no_second_restart() -> Vec<Access> {
    let cached = JobBuilder::new("a")
        .ps_worker(2, 1, 4)
        .checkpoint(CheckpointMethod::Signal, 10)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            ..TrainingJobStatus::default()
        });
    let mut newer = cached.json();
    newer["status"]["generation"] = json!(1);
    newer["status"]["replicas"] = json!(3);
    let (client, server) = MockServer::start(vec![
        Expect::get(STATUS).ok(newer),
        event("ScaleFailed", "Scale", "Warning"),
    ]);
    let error = actor(client)
        .scale(
            &cached.build(),
            &[pod("a", "ps-0", 0, Some("n1"))],
            4,
            &["n3".into(), "n4".into()],
            "more workers",
            at(0),
        )
        .await
        .expect_err("a rescale on an old generation is refused");
    assert!(matches!(error, Error::Stale { .. }), "{error}");
    server.finish().await
}

/// a (a ps and one worker, checkpoint by annotation, 30 s) is being rescaled to two
/// workers; its pods were asked to checkpoint at 0.
fn rescaling() -> JobBuilder {
    let mut rescale = migration("a-worker-0-0", "worker-0", "n1", Some(at(30)));
    rescale.action = RestartAction::Scale;
    rescale.stopping = vec!["a-ps-0-0".into(), "a-worker-0-0".into()];
    rescale.targets = [("ps-0", "n1"), ("worker-0", "n1"), ("worker-1", "n2")]
        .iter()
        .map(|(task, node)| TaskTarget {
            task: task.to_string(),
            node: node.to_string(),
        })
        .collect();
    restarting(
        &JobBuilder::new("a")
            .push_progress()
            .ps_worker(1, 1, 2)
            .checkpoint(CheckpointMethod::Annotation, 30),
        TrainingJobStatus {
            placements: vec![
                placement("ps-0", "a-ps-0-0", "n1"),
                placement("worker-0", "a-worker-0-0", "n1"),
            ],
            replicas: Some(2),
            rescales: 1,
            generation: 1,
            ..TrainingJobStatus::default()
        },
        rescale,
    )
}

fn asked_at_zero(mut pod: Pod) -> Pod {
    pod.metadata.annotations = Some(
        [(
            "switchyard.dev/checkpoint-requested".to_string(),
            "2026-01-01T00:00:00Z".to_string(),
        )]
        .into(),
    );
    pod
}

pub(crate) async fn restart_pods_that_exited_on_their_own_are_deleted() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    world.job(&rescaling());
    // The worker saved its checkpoint and exited at once; the ps still runs.
    world.pod(asked_at_zero(pod("a", "ps-0", 0, Some("n1"))));
    world.pod(asked_at_zero(succeeded(pod(
        "a",
        "worker-0",
        0,
        Some("n1"),
    ))));
    let (client, server) = MockServer::start(vec![
        // The worker that exited is deleted at once; the ps after its grace period.
        delete("a-worker-0-0", None),
        delete("a-ps-0-0", None),
    ]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    world.set_clock(5);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(5).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        1,
        "the exited worker is deleted, the ps not yet"
    );
    world.set_clock(30);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(30).as_second() as f64))).await;
    server.finish().await
}

pub(crate) async fn old_pods_that_succeeded_do_not_make_a_rescaled_job_succeed() -> Vec<Access> {
    // The rescale is done: generation 1's pods run; generation 0's exited with success
    // when asked to stop, and are still in the cache.
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = JobBuilder::new("a")
        .push_progress()
        .ps_worker(1, 1, 2)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![
                placement("ps-0", "a-ps-0-1", "n1"),
                placement("worker-0", "a-worker-0-1", "n1"),
            ],
            generation: 1,
            ..TrainingJobStatus::default()
        });
    world.job(&job);
    for task in ["ps-0", "worker-0"] {
        world.pod(succeeded(pod("a", task, 0, Some("n1"))));
        world.pod(pod("a", task, 1, Some("n1")));
    }
    let (client, server) = MockServer::start(vec![]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, snapshot) = blocking(cluster, |c| {
        c.advance(Some(at(0).as_second() as f64));
        c.snapshot(Vec::new())
    })
    .await;
    let a = snapshot.job("ml/a").expect("a is still active");
    assert!(a.tasks.iter().all(|t| t.phase == TaskPhase::Running));
    server.finish().await
}

pub(crate) async fn a_job_whose_workers_succeeded_succeeds_and_its_ps_is_stopped() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let mut value = JobBuilder::new("a")
        .push_progress()
        .ps_worker(1, 1, 2)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![
                placement("ps-0", "a-ps-0-0", "n1"),
                placement("worker-0", "a-worker-0-0", "n1"),
            ],
            ..TrainingJobStatus::default()
        })
        .json();
    value["spec"]["successPolicy"] = json!({"roles": ["worker"]});
    let job = JobBuilder::from_json(value);
    world.job(&job);
    world.pod(pod("a", "ps-0", 0, Some("n1")));
    world.pod(succeeded(pod("a", "worker-0", 0, Some("n1"))));
    let done = job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Succeeded),
        ..TrainingJobStatus::default()
    });
    let mut script = Vec::new();
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Succeeded"}}),
    ));
    // A parameter server never exits on its own: it is stopped.
    script.push(delete("a-ps-0-0", None));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    world.job(&done);
    world.set_clock(1);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(1).as_second() as f64))).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_stopped_between_recording_a_restart_and_asking_for_the_checkpoint_leaves_a_successor_that_asks_first()
 {
    a_successor_asks_for_the_checkpoint_its_predecessor_recorded_but_never_asked().await;
}

#[tokio::test(start_paused = true)]
async fn a_migration_decided_on_a_cache_that_is_behind_is_refused_by_the_status_it_reads() {
    a_migration_decided_on_a_stale_cache_starts_no_second_restart().await;
}

#[tokio::test(start_paused = true)]
async fn a_rescale_decided_on_a_cache_that_is_behind_is_refused_by_the_status_it_reads() {
    a_rescale_decided_on_a_stale_cache_starts_no_second_restart().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_pods_of_a_restart_that_exited_on_their_own_are_deleted_at_once() {
    restart_pods_that_exited_on_their_own_are_deleted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_pods_that_succeeded_when_stopped_do_not_make_a_rescaled_job_succeed() {
    old_pods_that_succeeded_do_not_make_a_rescaled_job_succeed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_succeeds_once_the_roles_of_its_success_policy_have_and_its_parameter_server_is_stopped()
 {
    a_job_whose_workers_succeeded_succeeds_and_its_ps_is_stopped().await;
}

/// A ps on n1 and two workers on n1 and n2, placed; the worker role scales between
/// `min` and `max`.
fn gang_of_three(min: u32, max: u32) -> JobBuilder {
    JobBuilder::new("a")
        .ps_worker(2, min, max)
        .checkpoint(CheckpointMethod::Signal, 10)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![
                placement("ps-0", "a-ps-0-0", "n1"),
                placement("worker-0", "a-worker-0-0", "n1"),
                placement("worker-1", "a-worker-1-0", "n2"),
            ],
            ..TrainingJobStatus::default()
        })
}

fn gang_pods() -> [Pod; 3] {
    [
        pod("a", "ps-0", 0, Some("n1")),
        pod("a", "worker-0", 0, Some("n1")),
        pod("a", "worker-1", 0, Some("n2")),
    ]
}

fn move_worker_1_to_n3() -> Migration<'static> {
    Migration {
        task: Some("worker-1"),
        node: "n3",
        purpose: "rebalance",
        reason: "n2 is hot",
    }
}

pub(crate) async fn moving_one_member_of_a_gang_restarts_every_member() -> Vec<Access> {
    // Two workers exactly: the processes cannot go on without one of them.
    let job = gang_of_three(2, 2);
    let mut script = status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Restarting", "migrations": 1,
            "moves": [{"kind": "Migrated", "fromNodes": ["n2"], "toNodes": ["n3"]}],
            "restart": {"action": "Migrate",
                "stopping": ["a-ps-0-0", "a-worker-0-0", "a-worker-1-0"],
                "targets": [{"task": "ps-0", "node": "n1"}, {"task": "worker-0", "node": "n1"},
                    {"task": "worker-1", "node": "n3"}]}}}),
    )
    .to_vec();
    for pod in ["a-ps-0-0", "a-worker-0-0", "a-worker-1-0"] {
        script.push(delete(pod, Some(10)));
    }
    let (client, server) = MockServer::start(script);
    actor(client)
        .migrate(&job.build(), &gang_pods(), move_worker_1_to_n3(), at(0))
        .await
        .expect("the migration starts");
    server.finish().await
}

pub(crate) async fn moving_one_member_of_an_elastic_job_restarts_that_member_alone() -> Vec<Access>
{
    let job = gang_of_three(1, 4);
    let mut script = status_write_of(
        "a",
        &job,
        json!({"status": {"restart": {"action": "Migrate", "stopping": ["a-worker-1-0"],
            "targets": [{"task": "worker-1", "node": "n3"}]}}}),
    )
    .to_vec();
    script.push(delete("a-worker-1-0", Some(10)));
    let (client, server) = MockServer::start(script);
    actor(client)
        .migrate(&job.build(), &gang_pods(), move_worker_1_to_n3(), at(0))
        .await
        .expect("the migration starts");
    server.finish().await
}

pub(crate) async fn a_restart_is_refused_while_the_cache_lacks_a_pod_the_status_names()
-> Vec<Access> {
    // worker-1's pod was made a moment ago: the status names it, the cache not yet.
    let job = gang_of_three(2, 2);
    let (client, server) = MockServer::start(vec![
        Expect::get(STATUS).ok(job.json()),
        event("MigrateFailed", "Migrate", "Warning"),
    ]);
    let [ps, worker, _] = gang_pods();
    let error = actor(client)
        .migrate(
            &job.build(),
            &[ps, worker],
            Migration {
                task: Some("worker-0"),
                node: "n3",
                purpose: "rebalance",
                reason: "n1 is hot",
            },
            at(0),
        )
        .await
        .expect_err("a restart that would leave worker-1's pod running is refused");
    assert!(matches!(error, Error::Stale { .. }), "{error}");
    assert!(error.to_string().contains("a-worker-1-0"), "{error}");
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn moving_one_member_of_a_gang_that_cannot_lose_one_restarts_every_member_where_it_ran() {
    moving_one_member_of_a_gang_restarts_every_member().await;
}

#[tokio::test(start_paused = true)]
async fn moving_one_member_of_an_elastic_job_restarts_only_that_member() {
    moving_one_member_of_an_elastic_job_restarts_that_member_alone().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_never_leaves_a_pod_newer_than_the_cache_running_beside_its_replacement() {
    a_restart_is_refused_while_the_cache_lacks_a_pod_the_status_names().await;
}

#[tokio::test(start_paused = true)]
async fn a_checkpoint_request_is_not_sent_by_a_replica_that_stopped_leading() {
    // The restart was recorded; the lead is lost before the pod is asked.
    let job = moving_main(
        &annotated_single(),
        "n2",
        Some(at(30)),
        TrainingJobStatus::default(),
    );
    let (client, server) = MockServer::start(vec![]);
    let follower = std::sync::Arc::new(Leader::elected("switchyard-1"));
    let error = actor(client)
        .fenced_by(follower)
        .advance_restart(&job.build(), &[pod("a", "main-0", 0, Some("n1"))], at(40))
        .await
        .expect_err("a follower sends nothing");
    assert!(matches!(error, Error::NotLeading { .. }), "{error}");
    server.finish().await;
}
