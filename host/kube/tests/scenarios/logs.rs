//! Loss samples from training logs across a change of leader: a new leader reads each
//! log from the samples its predecessor recorded, so replayed lines add nothing; each
//! sample carries its log line's time.

use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_kube::{LossSample, Phase, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, status_patch_of};

/// Unix seconds of `2026-01-01T00:00:<seconds>Z`.
fn second(seconds: f64) -> f64 {
    at(0).as_second() as f64 + seconds
}

pub(crate) async fn a_new_leader_reads_a_log_from_the_samples_already_recorded() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    // The previous leader took two lines (the pattern has no step group: steps count
    // lines) and wrote them to the status with their log times.
    let recorded = |step: u64, time: f64, value: f64| LossSample { time, step, value };
    let job = JobBuilder::new("a").with_status(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![placement("main-0", "a-main-0-0", "n1")],
        loss: vec![
            recorded(1, second(1.25), 2.98),
            recorded(2, second(1.75), 2.77),
        ],
        ..TrainingJobStatus::default()
    });
    world.job(&job);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    // The stream starts at the second of the last sample: both lines come again.
    let log = "2026-01-01T00:00:01.250000000Z loss=2.98\n\
               2026-01-01T00:00:01.750000000Z loss=2.77\n\
               2026-01-01T00:00:02.100000000Z loss=2.60\n";
    let mut script = vec![
        Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
            .query_has(&[
                "container=trainer",
                "follow=true",
                "timestamps=true",
                "sinceTime=2026-01-01T00%3A00%3A01Z",
            ])
            .text(log),
    ];
    script.push(status_patch_of(
        "a",
        &job,
        json!({"status": {"loss": [
            {"step": 1, "value": 2.98, "time": second(1.25)},
            {"step": 2, "value": 2.77, "time": second(1.75)},
            {"step": 3, "value": 2.60, "time": second(2.1)}]}}),
    ));
    script.push(
        Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
            .query_has(&["container=trainer", "sinceTime=2026-01-01T00%3A00%3A02Z"])
            .after(std::time::Duration::from_secs(3600))
            .text("")
            // The loss write and the new follower are separate tasks.
            .either_order_with_previous(),
    );
    let (client, server) = MockServer::start(script);
    let caches = world.caches.clone();
    let cluster = world.cluster(client, Leader::always("switchyard-1"));
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    tokio::time::timeout(crate::support::mock::TIMEOUT, async {
        while caches
            .loss
            .lock()
            .unwrap()
            .samples("ml/a")
            .is_none_or(|s| s.len() < 3)
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the follower read the log");
    // The next look writes the series and follows the pod again from where it stopped.
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_read_again_by_a_new_leader_adds_no_sample_twice_and_keeps_each_lines_time() {
    a_new_leader_reads_a_log_from_the_samples_already_recorded().await;
}

pub(crate) async fn a_log_is_asked_for_by_container_and_a_refusal_is_not_repeated_at_once()
-> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    // No container named in progress.log; the pod runs a sidecar beside the trainer.
    let mut value = JobBuilder::new("a")
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            ..TrainingJobStatus::default()
        })
        .json();
    value["spec"]["progress"]["log"] = json!({"pattern": "loss=(?P<value>[0-9.]+)"});
    let job = JobBuilder::from_json(value);
    world.job(&job);
    let mut with_sidecar = pod("a", "main-0", 0, Some("n1"));
    with_sidecar
        .spec
        .as_mut()
        .unwrap()
        .containers
        .push(serde_json::from_value(json!({"name": "proxy", "image": "envoy"})).unwrap());
    world.pod(with_sidecar);
    let (client, server) = MockServer::start(vec![
        Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
            .query_has(&["container=trainer"])
            .fail(
                400,
                "BadRequest",
                "container trainer is not valid for pod a-main-0-0",
            ),
    ]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (mut cluster, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    // Looks right after the refusal follow nothing: the pod waits out a back-off.
    for _ in 0..3 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        cluster = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64)))
            .await
            .0;
    }
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_is_asked_for_naming_its_container_and_a_refused_one_waits_out_a_back_off() {
    a_log_is_asked_for_by_container_and_a_refusal_is_not_repeated_at_once().await;
}
