//! A gang on a real cluster, with the test-support kube-scheduler binding what the
//! controller releases: a placement the scheduler refuses (a resource the policy cannot
//! see, a node selector admission added) comes back to the policy and the job backs off
//! before it is offered again; a member drained, deleted or gone restarts the whole gang
//! from its checkpoint; a crash-looping member consumes the job's failure budget; a
//! status write that was lost is written again from the pods.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use switchyard_control::{Advance, Cluster, Leader};
use switchyard_core::{JobPhase, Trigger};
use switchyard_core::{Rejection, check_decision};
use switchyard_kube::{
    CheckpointMethod, PLACEMENT_REFUSED_LABEL, Phase, Refusal, TrainingJobStatus,
};

use crate::cluster::default_round;
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::scheduler::{Scheduled, Scheduler};
use crate::support::world::{World, blocking, event_on, first_placement, status_write_of};

/// `pod` whose training container also asks for `amount` of extended resource `name`.
fn asking(mut pod: Pod, name: &str, amount: &str) -> Pod {
    let requests = pod.spec.as_mut().unwrap().containers[0]
        .resources
        .get_or_insert_with(Default::default)
        .requests
        .get_or_insert_with(Default::default);
    requests.insert(
        name.into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(amount.into()),
    );
    pod
}

/// Job `a` with one `main` task, placed on `node` and released there.
fn placed_on(job: &JobBuilder, node: &str) -> JobBuilder {
    job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![placement("main-0", "a-main-0-0", node)],
        ..TrainingJobStatus::default()
    })
}

/// The leader's pass at `t` seconds.
async fn pass_at(
    cluster: switchyard_kube::KubeCluster,
    world: &World,
    t: i64,
) -> (switchyard_kube::KubeCluster, Advance) {
    world.set_clock(t);
    blocking(cluster, move |c| c.advance(Some(at(t).as_second() as f64))).await
}

/// The policy places job `a` (`job`) on n1; the scheduler refuses `admitted` (the pod as
/// the API server holds it once released there) with a message containing `why`; the
/// gang is taken back once the refusal has lasted its grace, the job is held through
/// its back-off, and then it waits in the queue again, with the refused node named in
/// its labels and a trigger for the policy.
async fn refused_and_backed_off(
    mut world: World,
    job: JobBuilder,
    admitted: Pod,
    why: &str,
) -> Vec<Access> {
    world.job(&job);
    let mut script = first_placement(&job, "main-0", "main", "n1");
    let refused_status = json!({"status": {"phase": "Restarting", "generation": 1,
        "refusal": {"nodes": ["n1"], "reason": "Unschedulable", "count": 1},
        "conditions": [{"type": "PodsScheduled", "status": "False", "reason": "Unschedulable"}],
        "restart": {"action": "Recover", "stopping": ["a-main-0-0"],
            "retryAfter": "2026-01-01T00:00:41Z"}}});
    script.extend(status_write_of("a", &job, refused_status));
    script.push(delete("a-main-0-0", None));
    script.push(
        event_on("a", "PlacementRefused", "Recover")
            .body(json!({"type": "Warning", "note": "the scheduler refused pod a-main-0-0 on n1: Unschedulable*"})),
    );
    let (backing_off, refusal) = refused_and_held(
        &job,
        "n1",
        "Unschedulable",
        &format!("the scheduler refused pod a-main-0-0 on n1: Unschedulable ({why})"),
        31,
        &["a-main-0-0"],
    );
    script.extend(status_write_of(
        "a",
        &backing_off,
        json!({"status": {"phase": "Waiting", "refusal": {"nodes": ["n1"], "count": 1}}}),
    ));
    script.push(event_on("a", "Requeued", "Recover"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, record) = blocking(cluster, default_round).await;
    assert_eq!(record.arm_a.accepted.len(), 1, "{record:#?}");

    // The API server holds the placement; the scheduler looks at the pod and refuses it.
    world.job(&placed_on(&job, "n1"));
    world.pod(admitted);
    let scheduled = Scheduler::new().schedule(&mut world);
    let [Scheduled::Refused { message, .. }] = scheduled.as_slice() else {
        panic!("the scheduler refuses the pod: {scheduled:?}");
    };
    assert!(message.contains(why), "{message}");
    let snapshot = world.caches.snapshot(1.0, vec![]);
    assert_eq!(
        snapshot.job("ml/a").unwrap().phase,
        JobPhase::Running,
        "released, the task is where the policy put it until the refusal is taken as final"
    );
    let placed = server.served();
    let (cluster, _) = pass_at(cluster, &world, 20).await;
    assert_eq!(
        server.served(),
        placed,
        "within the grace: a refusal may pass"
    );
    let (cluster, _) = pass_at(cluster, &world, 31).await;
    assert_eq!(
        server.served(),
        placed + 4,
        "taken back: recorded, deleted, announced"
    );

    // Its pod gone, the job backs off before it is offered again.
    world.job(&backing_off);
    let refused_pod = world.caches.pods.state()[0].as_ref().clone();
    world.pod_gone(refused_pod);
    let (cluster, _) = pass_at(cluster, &world, 35).await;
    assert_eq!(server.served(), placed + 4, "nothing during the back-off");
    let held = world.caches.snapshot(35.0, vec![]);
    assert_eq!(held.job("ml/a").unwrap().phase, JobPhase::Restarting);
    let again = check_decision(&held, &place_on("n2"));
    assert!(
        matches!(again.rejected[0].reason, Rejection::WrongPhase { .. }),
        "no placement during the back-off: {again:?}"
    );
    let (_, advanced) = pass_at(cluster, &world, 42).await;
    assert_eq!(
        advanced,
        Advance::Events(vec![Trigger::JobPreempted("ml/a".into())]),
        "the policy is called: the job waits again"
    );
    world.job(&job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Waiting),
        generation: 1,
        refusal: Some(refusal),
        ..TrainingJobStatus::default()
    }));
    let waiting = world.caches.snapshot(42.0, vec![]);
    let a = waiting.job("ml/a").unwrap();
    assert_eq!(a.phase, JobPhase::Waiting);
    assert_eq!(
        a.labels.get(PLACEMENT_REFUSED_LABEL).map(String::as_str),
        Some("n1"),
        "the policy sees which node was refused"
    );
    server.finish().await
}

fn place_on(node: &str) -> switchyard_core::Decision {
    switchyard_core::Decision {
        actions: vec![switchyard_core::Action {
            op: switchyard_core::Operation::Place {
                job: "ml/a".into(),
                assignments: vec![switchyard_core::Assignment {
                    task: "main-0".into(),
                    node: node.into(),
                }],
            },
            reason: "test".into(),
        }],
        ..Default::default()
    }
}

pub(crate) async fn a_placement_needing_an_unknown_extended_resource_comes_back_and_backs_off()
-> Vec<Access> {
    let world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = JobBuilder::new("a").push_progress();
    let admitted = asking(
        released(pod("a", "main-0", 0, None), "n1", 0),
        "example.com/fpga",
        "1",
    );
    refused_and_backed_off(world, job, admitted, "1 Insufficient example.com/fpga").await
}

pub(crate) async fn a_placement_against_a_node_selector_admission_added_comes_back() -> Vec<Access>
{
    let world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = JobBuilder::new("a").push_progress();
    // A namespace policy (PodNodeSelector) gave the pod a selector no node matches.
    let mut admitted = released(pod("a", "main-0", 0, None), "n1", 0);
    admitted.spec.as_mut().unwrap().node_selector =
        Some([("pool".to_string(), "cpu-only".to_string())].into());
    refused_and_backed_off(
        world,
        job,
        admitted,
        "2 node(s) didn't match Pod's node affinity/selector",
    )
    .await
}

/// `pod` evicted through the eviction API (a drain, a scale-down): being deleted, with
/// the `DisruptionTarget` condition the API server sets.
fn evicted(pod: Pod) -> Pod {
    let mut pod = terminating(pod);
    pod.status.get_or_insert_with(Default::default).conditions = Some(vec![
        serde_json::from_value(json!({"type": "DisruptionTarget", "status": "True",
            "reason": "EvictionByEvictionAPI"}))
        .unwrap(),
    ]);
    pod
}

/// Job `a` (`job`) loses a member; the first pass restarts the gang: `recorded` in the
/// status, the members still there `deleted` with the checkpoint's grace, `announced`
/// as an Event.
async fn the_gang_restarts(
    world: World,
    job: &JobBuilder,
    recorded: Value,
    deleted: &[&str],
    announced: Expect,
) -> Vec<Access> {
    let mut script = status_write_of("a", job, recorded).to_vec();
    for pod in deleted {
        script.push(delete(pod, Some(20)));
    }
    script.push(announced);
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, _) = pass_at(cluster, &world, 0).await;
    server.finish().await
}

pub(crate) async fn a_drained_member_restarts_the_gang() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = ps_and_worker();
    world.job(&job);
    world.pod(pod("a", "ps-0", 0, Some("n1")));
    world.pod(evicted(pod("a", "worker-0", 0, Some("n2"))));
    the_gang_restarts(
        world,
        &job,
        json!({"status": {"phase": "Restarting", "generation": 1, "disruptions": 1, "failures": 0,
            "restart": {"action": "Recover", "stopping": ["a-ps-0-0"], "targets": []}}}),
        &["a-ps-0-0"],
        event_on("a", "Disrupted", "Recover").body(json!({"type": "Warning",
            "note": "pod a-worker-0-0 on n2: being deleted (EvictionByEvictionAPI)*"})),
    )
    .await
}

pub(crate) async fn a_member_gone_from_the_cluster_restarts_the_gang() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let job = ps_and_worker();
    world.job(&job);
    // The worker was force-deleted (by hand, or by the pod garbage collector).
    world.pod(pod("a", "ps-0", 0, Some("n1")));
    the_gang_restarts(
        world,
        &job,
        json!({"status": {"phase": "Restarting", "generation": 1, "disruptions": 1,
            "restart": {"action": "Recover", "stopping": ["a-ps-0-0"]}}}),
        &["a-ps-0-0"],
        event_on("a", "Disrupted", "Recover").body(json!({"type": "Warning",
            "note": "pod a-worker-0-0 on n2: gone*"})),
    )
    .await
}

/// `pod` whose training container the kubelet restarted `times` times (a process that
/// exits non-zero under `restartPolicy: OnFailure`).
fn crash_looping(mut pod: Pod, times: i32) -> Pod {
    pod.status.get_or_insert_with(Default::default).container_statuses = Some(vec![
        serde_json::from_value(json!({"name": "trainer", "image": "i", "imageID": "",
            "ready": false, "restartCount": times, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}))
        .unwrap(),
    ]);
    pod
}

pub(crate) async fn a_crash_loop_consumes_the_failure_budget() -> Vec<Access> {
    // Within the budget: counted, and the gang restarts after a back-off.
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let mut limited = ps_and_worker().json();
    limited["spec"]["backoffLimit"] = json!(1);
    let job = JobBuilder::from_json(limited);
    world.job(&job);
    world.pod(pod("a", "ps-0", 0, Some("n1")));
    world.pod(crash_looping(pod("a", "worker-0", 0, Some("n2")), 1));
    let mut accesses = the_gang_restarts(
        world,
        &job,
        json!({"status": {"phase": "Restarting", "generation": 1, "failures": 1,
            "restart": {"action": "Recover", "stopping": ["a-ps-0-0", "a-worker-0-0"],
                "retryAfter": "2026-01-01T00:00:10Z"}}}),
        &["a-ps-0-0", "a-worker-0-0"],
        event_on("a", "PodFailed", "Recover").body(json!({"type": "Warning",
            "note": "pod a-worker-0-0 on n2: crash-looping: 1 container restart(s), last container trainer exited 1 (Error)*"})),
    )
    .await;

    // Its next gang crash-loops too: two more failures are past the budget of one.
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let mut again = job.json();
    again["status"] = json!({"phase": "Running", "generation": 1, "failures": 1, "placements": [
        {"task": "ps-0", "pod": "a-ps-0-1", "node": "n1"},
        {"task": "worker-0", "pod": "a-worker-0-1", "node": "n2"}]});
    let job = JobBuilder::from_json(again);
    world.job(&job);
    world.pod(pod("a", "ps-0", 1, Some("n1")));
    world.pod(crash_looping(pod("a", "worker-0", 1, Some("n2")), 2));
    let mut script = status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Failed", "failures": 3,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}),
    )
    .to_vec();
    script.push(delete("a-ps-0-1", Some(20)));
    script.push(delete("a-worker-0-1", Some(20)));
    script.push(
        event_on("a", "BackoffLimitExceeded", "Recover").body(json!({"type": "Warning",
            "reason": "BackoffLimitExceeded", "note": "pod a-worker-0-1 on n2: crash-looping: 2 container restart(s)*"})),
    );
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, _) = pass_at(cluster, &world, 0).await;
    accesses.extend(server.finish().await);
    accesses
}

pub(crate) async fn a_lost_status_write_is_written_again_from_the_pods() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    // The pod was released to n1, but the status write after it was lost.
    let job = JobBuilder::new("a").push_progress();
    world.job(&job);
    world.pod(released(pod("a", "main-0", 0, None), "n1", 0));
    let script = status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}]}}),
    );
    let (client, server) = MockServer::start(script.to_vec());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, _) = pass_at(cluster, &world, 0).await;
    server.finish().await
}

pub(crate) async fn a_refusal_is_cleared_once_the_gang_is_bound_whole() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let job =
        placed_on(&JobBuilder::new("a").push_progress(), "n2").with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-1", "n2")],
            generation: 1,
            refusal: Some(Refusal {
                nodes: vec!["n1".into()],
                reason: "Unschedulable".into(),
                message: "0/2 nodes are available".into(),
                count: 2,
                time: at(0).to_string(),
            }),
            ..TrainingJobStatus::default()
        });
    world.job(&job);
    world.pod(pod("a", "main-0", 1, Some("n2")));
    let script = status_write_of(
        "a",
        &job,
        json!({"status": {"conditions": [{"type": "PodsScheduled", "status": "True", "reason": "Bound",
            "message": "bound: a-main-0-1 on n2"}]}}),
    );
    let (client, server) = MockServer::start(script.to_vec());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, _) = pass_at(cluster, &world, 0).await;
    server.finish().await
}

#[test]
fn a_placement_and_a_move_of_one_job_in_one_round_are_not_both_accepted() {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    // The ps runs on n1; the worker waits for a node.
    let job = JobBuilder::new("a")
        .push_progress()
        .ps_worker(1, 1, 2)
        .checkpoint(CheckpointMethod::Signal, 20)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("ps-0", "a-ps-0-0", "n1")],
            ..TrainingJobStatus::default()
        });
    world.job(&job);
    world.pod(pod("a", "ps-0", 0, Some("n1")));
    let snapshot = world.caches.snapshot(0.0, vec![]);
    use switchyard_core::{Action, Assignment, Decision, Operation};
    let place = Action {
        op: Operation::Place {
            job: "ml/a".into(),
            assignments: vec![Assignment {
                task: "worker-0".into(),
                node: "n2".into(),
            }],
        },
        reason: "fits".into(),
    };
    let migrate = Action {
        op: Operation::Migrate {
            job: "ml/a".into(),
            task: Some("ps-0".into()),
            node: "n2".into(),
            purpose: String::new(),
        },
        reason: "closer".into(),
    };
    let checked = check_decision(
        &snapshot,
        &Decision {
            actions: vec![place.clone(), migrate],
            ..Decision::default()
        },
    );
    assert_eq!(checked.accepted, [place]);
    assert!(
        matches!(
            checked.rejected[0].reason,
            Rejection::ConflictingAction { .. }
        ),
        "{checked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_the_scheduler_refuses_for_an_unknown_extended_resource_reaches_the_policy_and_backs_off()
 {
    a_placement_needing_an_unknown_extended_resource_comes_back_and_backs_off().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_the_scheduler_refuses_for_a_selector_admission_added_comes_back_to_the_policy()
{
    a_placement_against_a_node_selector_admission_added_comes_back().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_evicted_by_a_drain_restarts_the_whole_gang_as_a_disruption() {
    a_drained_member_restarts_the_gang().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_deleted_for_good_restarts_the_whole_gang() {
    a_member_gone_from_the_cluster_restarts_the_gang().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_member_restarts_the_gang_and_consumes_the_failure_budget() {
    a_crash_loop_consumes_the_failure_budget().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placements_whose_status_write_was_lost_are_written_from_the_released_pods() {
    a_lost_status_write_is_written_again_from_the_pods().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_cleared_once_every_member_is_bound() {
    a_refusal_is_cleared_once_the_gang_is_bound_whole().await;
}
