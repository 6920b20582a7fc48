//! Honest outcomes: an accepted action whose API calls fail is reported as failed, with
//! the kind of failure, in the decision record (through the control loop) and as a
//! Warning Event on the TrainingJob, and the loop asks for a retry round. And
//! preemption, carried out as a staged restart that ends with the job queued again.

use serde_json::json;
use switchyard_control::{Advance, Cluster, ControlLoop, FailureReason, Leader, RETRY_FIRST, Step};
use switchyard_core::{Action, Operation, Trigger};
use switchyard_kube::{
    CheckpointMethod, MoveKindRecord, MoveRecord, PendingRestart, Phase, RestartAction,
    TrainingJobStatus,
};

use crate::cluster::{default_policy, runtime};
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking};

const WEBHOOK_DENIAL: &str =
    "admission webhook \"gpu-quota.example.com\" denied the request: team ml is over its GPU quota";

/// A Warning Event on job `a` whose note starts with `note`.
fn warning(reason: &str, action: &str, note: &str) -> Expect {
    Expect::post(EVENTS)
        .body(
            json!({"reason": reason, "action": action, "type": "Warning", "note": note,
            "regarding": {"kind": "TrainingJob", "name": "a", "namespace": NS}}),
        )
        .respond(201, event_json())
}

pub(crate) async fn a_release_an_admission_webhook_denies_is_a_failed_action() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let job = JobBuilder::new("a");
    world.job(&job);
    let (client, server) = MockServer::start(vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main"),
        // A webhook guarding pod updates denies the release.
        Expect::patch(&format!("{PODS}/a-main-0-0")).fail(400, "BadRequest", WEBHOOK_DENIAL),
        // The half-done placement is undone: the pod it created goes.
        delete("a-main-0-0", None),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "PlacementFailed"}]}}),
            )
            .ok(job.json()),
        warning("PlacementFailed", "Place", "admission-refused: *"),
    ]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, (record, now, next_tick)) = blocking(cluster, |cluster| {
        let slot = default_policy(&runtime());
        let mut control = ControlLoop::new(slot.clone(), slot, 0);
        let Step::Round { triggers, .. } = control.wait_for_round(cluster) else {
            panic!("the new job makes a round due");
        };
        let record = control.decide_round(cluster, triggers).record;
        (record, cluster.now(), control.next_tick())
    })
    .await;
    assert!(record.arm_a.accepted.is_empty(), "{record:#?}");
    let [failed] = record.arm_a.failed.as_slice() else {
        panic!("one failed action: {record:#?}");
    };
    assert!(matches!(&failed.action.op, Operation::Place { job, .. } if job == "ml/a"));
    assert_eq!(failed.failure, FailureReason::AdmissionRefused);
    assert!(
        failed
            .failed_because
            .contains("releasing pod a-main-0-0 to the scheduler on node n1")
            && failed.failed_because.contains("over its GPU quota"),
        "{}",
        failed.failed_because
    );
    assert_eq!(
        next_tick,
        Some(now + RETRY_FIRST),
        "the policy is asked again soon"
    );
    server.finish().await
}

pub(crate) async fn a_resize_the_api_server_forbids_is_a_failed_action() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let job = running_single(CheckpointMethod::Signal, 10);
    world.job(&job);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let mut script = vec![Expect::patch(&format!("{PODS}/a-main-0-0/resize")).fail(
        403,
        "Forbidden",
        "pods \"a-main-0-0\" is forbidden: User \"system:serviceaccount:switchyard:switchyard\" cannot patch resource \"pods/resize\"",
    )];
    script.extend(status_write(
        &job,
        json!({"status": {"conditions": [{"type": "CpuWeightApplied", "status": "False", "reason": "ResizeRefused"}]}}),
        &job,
    ));
    script.push(warning("ResizeRefused", "SetCpuWeight", "forbidden: *"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let resize = Action {
        op: Operation::SetCpuWeight {
            job: "ml/a".into(),
            task: "main-0".into(),
            weight: 0.5,
        },
        reason: "converged".into(),
    };
    let (_, outcomes) = blocking(cluster, move |c| c.apply(&[resize], &[])).await;
    let [Err(failure)] = outcomes.as_slice() else {
        panic!("one failed outcome: {outcomes:?}");
    };
    assert_eq!(failure.reason, FailureReason::Forbidden);
    assert!(
        failure.message.contains("pods/resize"),
        "{}",
        failure.message
    );
    server.finish().await
}

pub(crate) async fn a_preemption_checkpoints_stops_and_requeues_the_job() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    // Progress is pushed, so no log is followed while the cluster waits.
    let job = JobBuilder::new("a")
        .push_progress()
        .checkpoint(CheckpointMethod::Signal, 10)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            ..TrainingJobStatus::default()
        });
    let old = pod("a", "main-0", 0, Some("n1"));
    world.job(&job);
    world.pod(old.clone());
    let stopping = restarting(
        &job,
        TrainingJobStatus {
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            moves: vec![preempted_from("n1")],
            generation: 1,
            ..TrainingJobStatus::default()
        },
        PendingRestart {
            action: RestartAction::Preempt,
            stopping: vec!["a-main-0-0".into()],
            targets: Vec::new(),
            requested_at: at(0).to_string(),
            delete_after: None,
            retry_after: None,
            reason: "make room".into(),
        },
    );
    let mut script = Vec::new();
    // Recorded first, on the status the decision saw; then the stop signal, with the
    // checkpoint's grace period.
    script.extend(status_write(
        &job,
        json!({"status": {"phase": "Restarting", "generation": 1,
            "moves": [{"kind": "Preempted", "fromNodes": ["n1"]}],
            "restart": {"action": "Preempt", "stopping": ["a-main-0-0"], "targets": [], "reason": "make room"}}}),
        &stopping,
    ));
    script.push(delete("a-main-0-0", Some(10)));
    // Once the pod is gone, the job waits again with nothing placed, its work kept.
    script.extend(status_write(
        &stopping,
        json!({"status": {"phase": "Waiting", "generation": 1}}),
        &stopping,
    ));
    // Its process exited on the signal without saying its checkpoint was written.
    script.push(event("CheckpointTimedOut", "Preempt", "Warning"));
    script.push(event("Preempted", "Preempt", "Normal"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    // The first look hears of the job and the node.
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    let preempt = Action {
        op: Operation::Preempt { job: "ml/a".into() },
        reason: "make room".into(),
    };
    let (cluster, outcomes) = blocking(cluster, move |c| c.apply(&[preempt], &[])).await;
    assert!(matches!(outcomes[..], [Ok(())]), "{outcomes:?}");
    assert_eq!(
        server.served(),
        3,
        "recorded and asked to stop, nothing more"
    );

    world.job(&stopping);
    world.pod(terminating(old.clone()));
    world.set_clock(1);
    let (cluster, advance) = blocking(cluster, |c| c.advance(Some(at(1).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        3,
        "nothing while the pod saves its checkpoint"
    );
    assert_eq!(advance, Advance::Reached { quiescent: false });

    world.pod_gone(old);
    world.set_clock(2);
    let (_, advance) = blocking(cluster, |c| c.advance(Some(at(5).as_second() as f64))).await;
    assert_eq!(
        advance,
        Advance::Events(vec![Trigger::JobPreempted("ml/a".into())]),
        "the policy hears that the job's nodes are free"
    );
    server.finish().await
}

/// The move history entry of a preemption from `node` at the fixtures' time 0.
fn preempted_from(node: &str) -> MoveRecord {
    MoveRecord {
        time: at(0).as_second() as f64,
        kind: MoveKindRecord::Preempted,
        purpose: String::new(),
        from_nodes: vec![node.into()],
        to_nodes: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_an_admission_webhook_denies_is_recorded_failed_with_its_reason_and_a_warning_event()
{
    a_release_an_admission_webhook_denies_is_a_failed_action().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_resize_is_a_failed_outcome_with_its_reason_and_a_warning_event() {
    a_resize_the_api_server_forbids_is_a_failed_action().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_job_checkpoints_releases_its_pods_waits_again_and_the_policy_hears_of_it() {
    a_preemption_checkpoints_stops_and_requeues_the_job().await;
}
