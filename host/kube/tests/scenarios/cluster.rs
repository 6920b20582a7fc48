//! Scenarios that drive `KubeCluster` the way the controller does (through the
//! control loop, `advance`, `apply` and loss pushes) against
//! the scripted API server. The caches are filled by hand, standing for the reflectors,
//! so each step sees exactly the cluster the test describes. The control loop is
//! synchronous and runs on a blocking thread, so these tests run in wall time, with the
//! cluster's clock set by the test.

use k8s_openapi::api::core::v1::Pod;

use serde_json::json;
use switchyard_control::{
    Cluster, ControlLoop, DecisionRecord, Leader, LiveCluster, LossAck, PolicySlot, Step,
};
use switchyard_core::{Action, Assignment, Operation, Trigger};
use switchyard_kube::{Phase, TrainingJobStatus};
use switchyard_runtime::{PolicyRef, Runtime};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, event_on, status_patch_of, status_write_of};

/// The policy runtime of the scenarios: a generous call deadline, because what they
/// check is what the host does with a policy's decisions, and a slow call on a loaded
/// machine must not turn a round into a fallback round.
pub(crate) fn runtime() -> Runtime {
    switchyard_test_support::generous_runtime()
}

pub(crate) fn default_policy(runtime: &Runtime) -> PolicySlot {
    let module = PolicyRef::parse("default")
        .unwrap()
        .load(runtime)
        .expect("the built-in default policy");
    PolicySlot::configure(module, &Default::default()).unwrap()
}

/// One round of the default policy through the control loop, from the wait for it:
/// the decision record.
pub(crate) fn default_round(cluster: &mut switchyard_kube::KubeCluster) -> DecisionRecord {
    let slot = default_policy(&runtime());
    let mut control = ControlLoop::new(slot.clone(), slot, 0);
    let Step::Round { triggers, .. } = control.wait_for_round(cluster) else {
        panic!("the new job makes a round due");
    };
    control.decide_round(cluster, triggers).record
}

pub(crate) async fn the_control_loop_places_a_waiting_job_through_the_cluster() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let job = JobBuilder::new("a").push_progress();
    world.job(&job);
    let mut script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main"),
        release("a-main-0-0", "n1"),
    ];
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}],
            "conditions": [{"type": "PodsCreated", "status": "True", "reason": "Released"}]}}),
    ));
    script.push(event_on("a", "Placed", "Place"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, |cluster| {
        let slot = default_policy(&runtime());
        let mut control = ControlLoop::new(slot.clone(), slot, 0);
        let Step::Round { triggers, .. } = control.wait_for_round(cluster) else {
            panic!("the new job makes a round due");
        };
        assert!(triggers.contains(&Trigger::JobArrived("ml/a".into())));
        control.decide_round(cluster, triggers).record
    })
    .await;
    assert_eq!(record.arm_a.policy, "default");
    assert_eq!(record.arm_a.accepted.len(), 1, "{record:?}");
    server.finish().await
}

/// Job `a` (annotation checkpoint, 30 s grace) runs on n1; job `b` waits.
fn migrating_world() -> (World, JobBuilder, JobBuilder, Pod) {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let a = annotated_single().with_status(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![placement("main-0", "a-main-0-0", "n1")],
        ..TrainingJobStatus::default()
    });
    let b = JobBuilder::new("b").push_progress();
    let old = pod("a", "main-0", 0, Some("n1"));
    world.job(&a);
    world.job(&b);
    world.pod(old.clone());
    (world, a, b, old)
}

pub(crate) async fn a_migration_waiting_out_its_grace_period_does_not_hold_up_another_jobs_placement()
-> Vec<Access> {
    let (mut world, a, b, old) = migrating_world();
    let marked = reallocating(&a, "n2", Some(at(30)));
    let mut script = Vec::new();
    script.extend(status_write(
        &a,
        json!({"status": {"restart": {"deleteAfter": "2026-01-01T00:00:30Z"}}}),
        &marked,
    ));
    script.push(Expect::patch(&format!("{PODS}/a-main-0-0")).ok(json!({})));
    script.push(service("b"));
    script.push(budget("b"));
    script.push(create("b-main-0-0", "b", "main-0", "main"));
    script.push(release("b-main-0-0", "n2"));
    script.extend(status_write_of(
        "b",
        &b,
        json!({"status": {"placements": [{"task": "main-0", "node": "n2"}]}}),
    ));
    script.push(event_on("b", "Placed", "Place"));
    script.push(delete("a-main-0-0", None));
    script.push(service("a"));
    script.push(budget("a"));
    script.push(create("a-main-0-1", "a", "main-0", "main"));
    script.push(release("a-main-0-1", "n2"));
    script.extend(status_write(
        &marked,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-1", "node": "n2"}]}}),
        &marked,
    ));
    // Its process never said its checkpoint was written.
    script.push(event("CheckpointTimedOut", "Migrate", "Warning"));
    script.push(event_on("a", "Migrated", "Migrate"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let decision = vec![
        Action {
            op: Operation::Migrate {
                job: "ml/a".into(),
                task: None,
                node: "n2".into(),
                purpose: "reallocate".into(),
            },
            reason: "loss flattened".into(),
        },
        Action {
            op: Operation::Place {
                job: "ml/b".into(),
                assignments: vec![Assignment {
                    task: "main-0".into(),
                    node: "n2".into(),
                }],
            },
            reason: "fits".into(),
        },
    ];
    let started = std::time::Instant::now();
    let (cluster, outcomes) = blocking(cluster, move |c| c.apply(&decision, &[])).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the round did not wait out a's 30 s grace period"
    );
    assert_eq!(
        server.served(),
        10,
        "b was created, released, recorded and announced in the same round as a's checkpoint request"
    );

    // The reflector brings the status the migration wrote; 10 s in, nothing is due.
    world.job(&marked);
    world.set_clock(10);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(10).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        10,
        "a is not deleted before its grace period is over"
    );
    world.set_clock(31);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(31).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        11,
        "the grace period is over: a's pod is deleted"
    );
    world.pod(terminating(old.clone()));
    world.set_clock(35);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(35).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        11,
        "while the reflector shows the old pod terminating, no replacement is created"
    );
    world.pod_gone(old);
    world.set_clock(40);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(40).as_second() as f64))).await;
    server.finish().await
}

pub(crate) async fn a_pushed_loss_sample_joins_the_series_read_back_from_the_status_and_is_written_to_it()
-> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let sample = |step: u64, value: f64| switchyard_kube::LossSample {
        time: 1.0,
        step,
        value,
    };
    // As a restarted controller finds it: two samples in the status from before.
    let a = JobBuilder::new("a")
        .push_progress()
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            loss: vec![sample(100, 2.9), sample(150, 2.8)],
            ..TrainingJobStatus::default()
        });
    world.job(&a);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let log_only = JobBuilder::new("c");
    world.job(&log_only);
    // One merge patch of the series, no read first.
    let script = vec![status_patch_of(
        "a",
        &a,
        json!({"status": {"loss": [{"step": 100, "value": 2.9}, {"step": 150, "value": 2.8},
            {"step": 200, "value": 2.5, "time": at(0).as_second() as f64}]}}),
    )];
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, acks) = blocking(cluster, |c| {
        vec![
            c.push_loss("ml/a", 200, 2.5),
            c.push_loss("ml/a", 200, 2.4),
            c.push_loss("ml/c", 1, 1.0),
        ]
    })
    .await;
    assert_eq!(acks[0], LossAck::Accepted);
    let notes: Vec<String> = acks[1..]
        .iter()
        .map(|a| match a {
            LossAck::Ignored { note } => note.clone(),
            LossAck::Accepted => panic!("{a:?} should have been ignored"),
        })
        .collect();
    assert!(notes[0].contains("step 200 is already"), "{}", notes[0]);
    assert!(notes[1].contains("progress.push"), "{}", notes[1]);
    let (cluster, snapshot) = blocking(cluster, |c| c.snapshot(Vec::new())).await;
    let steps: Vec<u64> = snapshot
        .job("ml/a")
        .unwrap()
        .loss
        .iter()
        .map(|s| s.step)
        .collect();
    assert_eq!(
        steps,
        vec![100, 150, 200],
        "the status's samples, then the pushed one"
    );
    // The next look at the caches writes the series to the status, once.
    let now = at(0).as_second() as f64;
    let (cluster, _) = blocking(cluster, move |c| c.advance(Some(now))).await;
    let (_, _) = blocking(cluster, move |c| c.advance(Some(now))).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_loop_drives_a_real_cluster_from_a_job_arrival_to_a_bound_pod() {
    the_control_loop_places_a_waiting_job_through_the_cluster().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_in_its_grace_period_leaves_the_loop_free_and_its_replacement_waits_for_the_old_pod()
 {
    a_migration_waiting_out_its_grace_period_does_not_hold_up_another_jobs_placement().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_loss_sample_reaches_the_jobs_series_and_status_after_those_read_back() {
    a_pushed_loss_sample_joins_the_series_read_back_from_the_status_and_is_written_to_it().await;
}
