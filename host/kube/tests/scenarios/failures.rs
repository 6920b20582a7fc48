//! Failed pods, Job-controller style: a pod the node's kubelet refused is a refused
//! placement that sends its gang back to the queue after the refusal's back-off, named
//! to the policy and counted against nothing; a pod that failed on its own is counted
//! against `backoffLimit`, and the gang is queued again after a back-off until the limit
//! is passed, when the job fails and its pods are deleted. One failed pod never leaves
//! the rest of its gang holding resources.

use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_core::{Action, Assignment, JobPhase, Operation, Resources, TaskPhase};
use switchyard_kube::{
    PLACEMENT_REFUSED_LABEL, PendingRestart, Phase, RestartAction, TrainingJobStatus,
};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, status_write_of};

fn warning_on_a(reason: &str) -> Expect {
    event(reason, "Recover", "Warning")
}

pub(crate) async fn a_pod_the_kubelet_refused_sends_its_gang_back_to_the_queue() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = ps_and_worker();
    let ps = pod("a", "ps-0", 0, Some("n1"));
    let worker = failed(pod("a", "worker-0", 0, Some("n2")), "OutOfnvidia.com/gpu");
    world.job(&job);
    world.pod(ps.clone());
    world.pod(worker.clone());
    let why = "the kubelet refused pod a-worker-0-0 on n2: OutOfnvidia.com/gpu (Pod was rejected: OutOfnvidia.com/gpu)";
    let (recovering, refusal) = refused_and_held(
        &job,
        "n2",
        "OutOfnvidia.com/gpu",
        why,
        0,
        &["a-ps-0-0", "a-worker-0-0"],
    );
    let requeued = job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Waiting),
        generation: 1,
        refusal: Some(refusal),
        ..TrainingJobStatus::default()
    });
    let mut script = Vec::new();
    // Recorded first: a refused placement, not a failure, and the gang stops.
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Restarting", "generation": 1, "disruptions": 0, "failures": 0,
            "refusal": {"nodes": ["n2"], "reason": "OutOfnvidia.com/gpu", "count": 1},
            "conditions": [{"type": "PodsScheduled", "status": "False", "reason": "OutOfnvidia.com/gpu"}],
            "restart": {"action": "Recover", "stopping": ["a-ps-0-0", "a-worker-0-0"], "targets": [],
                "retryAfter": "2026-01-01T00:00:10Z"}}}),
    ));
    script.push(delete("a-ps-0-0", Some(20)));
    script.push(delete("a-worker-0-0", Some(20)));
    script.push(warning_on_a("PlacementRefused"));
    // Once both are gone and the back-off has passed, the job waits in the queue again.
    script.extend(status_write_of(
        "a",
        &recovering,
        json!({"status": {"phase": "Waiting", "generation": 1, "refusal": {"nodes": ["n2"]}}}),
    ));
    script.push(event("Requeued", "Recover", "Normal"));
    // And the policy's next placement, away from the node that refused, makes
    // generation 1's pods.
    script.push(service("a"));
    script.push(budget("a"));
    script.push(create("a-ps-0-1", "a", "ps-0", "ps"));
    script.push(create("a-worker-0-1", "a", "worker-0", "worker"));
    script.push(release("a-ps-0-1", "n1"));
    script.push(release("a-worker-0-1", "n1"));
    script.extend(status_write_of(
        "a",
        &requeued,
        json!({"status": {"phase": "Running", "placements": [
            {"task": "ps-0", "pod": "a-ps-0-1", "node": "n1"},
            {"task": "worker-0", "pod": "a-worker-0-1", "node": "n1"}]}}),
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));

    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    assert_eq!(server.served(), 5, "recorded, both pods deleted, announced");
    world.job(&recovering);
    world.pod(terminating(ps.clone()));
    world.pod_gone(worker);
    world.set_clock(1);
    let (cluster, snapshot) = blocking(cluster, |c| {
        c.advance(Some(at(1).as_second() as f64));
        c.snapshot(Vec::new())
    })
    .await;
    assert_eq!(server.served(), 5, "nothing while the ps stops");
    let a = snapshot.job("ml/a").unwrap();
    assert_eq!(a.phase, JobPhase::Restarting, "not failed, not placeable");

    // Both pods gone: the same placement is not made again at once, round after round.
    world.pod_gone(ps);
    world.set_clock(9);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(9).as_second() as f64))).await;
    assert_eq!(server.served(), 5, "nothing within the back-off");
    world.set_clock(10);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(10).as_second() as f64))).await;
    world.job(&requeued);
    let (cluster, snapshot) = blocking(cluster, |c| c.snapshot(Vec::new())).await;
    let a = snapshot.job("ml/a").unwrap();
    assert_eq!(a.phase, JobPhase::Waiting);
    assert!(a.tasks.iter().all(|t| t.phase == TaskPhase::Pending));
    assert_eq!(
        a.labels.get(PLACEMENT_REFUSED_LABEL).map(String::as_str),
        Some("n2"),
        "the policy sees which node refused"
    );
    let place = vec![Action {
        op: Operation::Place {
            job: "ml/a".into(),
            assignments: vec![
                Assignment {
                    task: "ps-0".into(),
                    node: "n1".into(),
                },
                Assignment {
                    task: "worker-0".into(),
                    node: "n1".into(),
                },
            ],
        },
        reason: "fits".into(),
    }];
    let (_, outcomes) = blocking(cluster, move |c| c.apply(&place, &[])).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    server.finish().await
}

pub(crate) async fn failing_past_the_backoff_limit_fails_the_job_and_frees_its_gang() -> Vec<Access>
{
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let mut value = ps_and_worker().json();
    value["spec"]["backoffLimit"] = json!(1);
    value["status"]["failures"] = json!(1);
    let job = JobBuilder::from_json(value);
    world.job(&job);
    world.pod(pod("a", "ps-0", 0, Some("n1")));
    world.pod(failed(pod("a", "worker-0", 0, Some("n2")), "Error"));
    let mut script = Vec::new();
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Failed", "failures": 2, "disruptions": 0,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}),
    ));
    script.push(delete("a-ps-0-0", Some(20)));
    script.push(delete("a-worker-0-0", Some(20)));
    script.push(warning_on_a("BackoffLimitExceeded"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    server.finish().await
}

pub(crate) async fn a_failure_within_the_limit_queues_the_gang_after_a_back_off() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = ps_and_worker();
    let worker = failed(pod("a", "worker-0", 0, Some("n2")), "Error");
    world.job(&job);
    world.pod(worker.clone());
    let recovering = restarting(
        &job,
        TrainingJobStatus {
            generation: 1,
            failures: 1,
            ..TrainingJobStatus::default()
        },
        PendingRestart {
            action: RestartAction::Recover,
            stopping: vec!["a-worker-0-0".into()],
            targets: vec![],
            requested_at: at(0).to_string(),
            delete_after: None,
            retry_after: Some(at(10).to_string()),
            reason: "pod a-worker-0-0 on n2: Error".into(),
        },
    );
    let mut script = Vec::new();
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Restarting", "failures": 1,
            "restart": {"action": "Recover", "retryAfter": "2026-01-01T00:00:10Z"}}}),
    ));
    script.push(delete("a-worker-0-0", Some(20)));
    script.push(warning_on_a("PodFailed"));
    script.extend(status_write_of(
        "a",
        &recovering,
        json!({"status": {"phase": "Waiting", "failures": 1}}),
    ));
    script.push(event("Requeued", "Recover", "Normal"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    world.job(&recovering);
    world.pod_gone(worker);
    world.set_clock(9);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(9).as_second() as f64))).await;
    assert_eq!(server.served(), 4, "not queued again within the back-off");
    world.set_clock(10);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(10).as_second() as f64))).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_the_kubelet_refused_backs_its_gang_off_names_the_node_to_the_policy_and_does_not_fail_the_job()
 {
    a_pod_the_kubelet_refused_sends_its_gang_back_to_the_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_pods_failed_more_often_than_its_backoff_limit_fails_and_frees_its_gang() {
    failing_past_the_backoff_limit_fails_the_job_and_frees_its_gang().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pod_within_the_backoff_limit_queues_its_gang_again_after_the_back_off() {
    a_failure_within_the_limit_queues_the_gang_after_a_back_off().await;
}

/// What the snapshot charges to a node, so that the policy does not place into room
/// that is taken and have the kubelet refuse the pod.
#[test]
fn a_node_is_charged_for_pods_just_bound_for_restart_targets_and_for_init_steps_sidecars_and_overhead()
 {
    let mut world = World::new()
        .node(node("n1", 16))
        .node(node("n2", 16))
        .node(node("n3", 16));
    // b was released to n1 by this replica a moment ago; the pod cache has not seen it.
    let b = JobBuilder::new("b").push_progress();
    world.job(&b);
    let two_cpus = Resources {
        cpu_millis: 2000,
        memory_bytes: 4 << 30,
        gpus: 0,
    };
    world
        .caches
        .assumed
        .lock()
        .unwrap()
        .released(NS, "b-main-0-0", "n1", two_cpus);
    // a is moving from n1 to n2, waiting out its checkpoint's grace period.
    let a = moving_main(
        &annotated_single(),
        "n2",
        Some(at(30)),
        TrainingJobStatus::default(),
    );
    world.job(&a);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    // Another scheduler's pod on n3: a setup step larger than its container, a sidecar
    // proxy, and its runtime class's overhead.
    world.pod(
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"},
            "spec": {"nodeName": "n3",
                "initContainers": [
                    {"name": "setup", "resources": {"requests": {"cpu": "3"}}},
                    {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}],
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}],
                "overhead": {"cpu": "250m"}},
            "status": {"phase": "Running"}}))
        .unwrap(),
    );
    let cpu = |world: &World, n: &str| {
        world
            .caches
            .snapshot(0.0, vec![])
            .node(n)
            .unwrap()
            .requested
            .cpu_millis
    };
    assert_eq!(cpu(&world, "n1"), 4000, "a's old pod, and b's just bound");
    assert_eq!(cpu(&world, "n2"), 2000, "a's replacement's room is held");
    assert_eq!(
        cpu(&world, "n3"),
        3250,
        "the setup step (3) outweighs app and proxy (1.5), plus overhead"
    );
    world.pod(pod("b", "main-0", 0, Some("n1")));
    assert_eq!(cpu(&world, "n1"), 4000, "b counted once the cache shows it");
}
