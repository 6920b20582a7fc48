//! Acknowledged checkpoints on the live simulator over loopback HTTP, as a training
//! script drives them: a job asked to checkpoint (Tiresias preempts it for a newcomer)
//! that acknowledges is stopped at once, long before its grace period, and reported
//! `acknowledged`; one that never acknowledges is stopped at its grace period and
//! reported `timed_out`; both carry the label the policy reads; a pushed report reaches
//! the job's loss series; late, repeated and unasked acknowledgements are 409s, unknown
//! jobs 404s and a missing token a 401.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Live, TOKEN};
use switchyard_controller::LiveConfig;

/// Virtual seconds per wall second.
const SPEED: f64 = 10.0;

/// One one-core node; `trainer` runs from 0 and waits for the API's acknowledgement
/// when asked to checkpoint, within `grace` seconds; `newcomer` arrives at 40, when
/// Tiresias (with a 5 core-second first queue) has demoted the trainer and preempts it.
fn workload(grace: f64) -> String {
    format!(
        "seed: 1
cluster:
  nodes:
    - {{name: n, cpus: 1, memory_gib: 4}}
templates:
  trainer: {{work: 100000, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none, acknowledge: api, checkpoint_grace: {grace}}}
  newcomer: {{work: 100000, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}}
jobs:
  - {{template: trainer, id: trainer, at: 0}}
  - {{template: newcomer, id: newcomer, at: 40}}
"
    )
}

/// The controller on [`workload`] under Tiresias, its first queue cut at 5 core-seconds
/// before the newcomer arrives.
async fn start(grace: f64) -> Live {
    let config = LiveConfig {
        speed: SPEED,
        policy: "tiresias".into(),
        ..LiveConfig::default()
    };
    let live = support::start_live_with(&workload(grace), config, Duration::from_millis(500)).await;
    live.wait_ready().await;
    live.wait_for("/v1/jobs", |jobs| trainer(jobs).is_some())
        .await;
    let (status, body) = live
        .put(
            "/v1/policies/tiresias/parameters",
            json!({"queue_thresholds": "5"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    live
}

/// The trainer as `/v1/jobs` lists it.
fn trainer(jobs: &Value) -> Option<&Value> {
    jobs["jobs"]
        .as_array()?
        .iter()
        .find(|j| j["id"] == "trainer")
}

/// Waits until the trainer's last checkpoint is reported, and returns the trainer.
async fn checkpoint_reported(live: &Live) -> Value {
    let jobs = live
        .wait_for("/v1/jobs", |jobs| {
            trainer(jobs).is_some_and(|t| !t["last_checkpoint"].is_null())
        })
        .await;
    trainer(&jobs).unwrap().clone()
}

/// Seconds since the Unix epoch of an RFC 3339 time the API gave.
fn seconds_of(time: &Value) -> f64 {
    let time: k8s_openapi::jiff::Timestamp = time.as_str().unwrap().parse().unwrap();
    time.as_millisecond() as f64 / 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_acknowledges_its_checkpoint_is_stopped_at_once_and_reported_acknowledged() {
    let live = start(600.0).await;
    let (status, body) = live.get("/v1/jobs/trainer/checkpoint").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["requested"], false, "{body}");
    let (status, body) = live
        .post(
            "/v1/jobs/trainer/checkpoint",
            json!({"path": "/ckpt/early"}),
        )
        .await;
    assert_eq!(status, 409, "nothing asked yet: {body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no checkpoint is requested"),
        "{body}"
    );
    // A report the script pushes reaches the job's loss series.
    let (status, body) = live
        .post("/v1/jobs/trainer/loss", json!({"step": 3, "value": 0.75}))
        .await;
    assert_eq!(
        (status, &body["outcome"]),
        (202, &json!("accepted")),
        "{body}"
    );
    let asked = live
        .wait_for("/v1/jobs/trainer/checkpoint", |c| c["requested"] == true)
        .await;
    let requested_at = seconds_of(&asked["requested_at"]);
    let grace = seconds_of(&asked["deadline"]) - requested_at;
    assert!((grace - 600.0).abs() < 1e-3, "{asked}");
    assert_eq!(asked["acknowledged"], json!([]));
    let (status, body) = live
        .post(
            "/v1/jobs/trainer/checkpoint",
            json!({"path": "/ckpt/40", "step": 40, "task": "worker-3"}),
        )
        .await;
    assert_eq!(status, 409, "a task never asked: {body}");
    assert!(body["error"].as_str().unwrap().contains("main"), "{body}");
    let (status, body) = live
        .post(
            "/v1/jobs/trainer/checkpoint",
            json!({"path": "/ckpt/40", "step": 40, "task": "main"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["acknowledged"], true);
    assert_eq!(body["waiting_for"], json!([]));
    let after = body["after_seconds"].as_f64().unwrap();
    let reported = checkpoint_reported(&live).await;
    let last = &reported["last_checkpoint"];
    assert_eq!(last["outcome"], "acknowledged", "{reported}");
    assert_eq!(last["path"], "/ckpt/40");
    assert_eq!(last["seconds"].as_f64().unwrap(), after);
    // Stopped when it acknowledged: within a few pacing slices of it, nowhere near the
    // 600 s grace period.
    let stopped_at = last["at"].as_f64().unwrap();
    assert!(
        stopped_at - (requested_at + after) < 5.0 && after < 300.0,
        "asked at {requested_at}, acknowledged after {after} s, stopped at {stopped_at}"
    );
    assert_eq!(reported["labels"]["switchyard.dev/checkpoint-kept"], "true");
    let (status, body) = live
        .post("/v1/jobs/trainer/checkpoint", json!({"path": "/ckpt/40"}))
        .await;
    assert_eq!(status, 409, "a repeated acknowledgement comes late: {body}");
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_never_acknowledges_is_stopped_at_its_grace_period_and_reported_timed_out() {
    let live = start(20.0).await;
    let asked = live
        .wait_for("/v1/jobs/trainer/checkpoint", |c| c["requested"] == true)
        .await;
    let requested_at = seconds_of(&asked["requested_at"]);
    let reported = checkpoint_reported(&live).await;
    let last = &reported["last_checkpoint"];
    assert_eq!(last["outcome"], "timed_out", "{reported}");
    assert!(
        (last["seconds"].as_f64().unwrap() - 20.0).abs() < 1e-6,
        "{last}"
    );
    assert!(
        (last["at"].as_f64().unwrap() - (requested_at + 20.0)).abs() < 1e-3,
        "stopped at the grace period's end: {last}"
    );
    assert_eq!(last["path"], Value::Null);
    assert_eq!(
        reported["labels"]["switchyard.dev/checkpoint-kept"], "false",
        "the policy sees the work was lost"
    );
    let (status, body) = live
        .post("/v1/jobs/trainer/checkpoint", json!({"path": "/ckpt/late"}))
        .await;
    assert_eq!(status, 409, "after the grace period: {body}");
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_endpoints_answer_404_for_an_unknown_job_and_401_without_the_token() {
    let live = start(600.0).await;
    let (status, body) = live.get("/v1/jobs/no-such-job/checkpoint").await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("no-such-job"),
        "{body}"
    );
    let (status, body) = live
        .post("/v1/jobs/no-such-job/checkpoint", json!({"path": "/c"}))
        .await;
    assert_eq!(status, 404, "{body}");
    let response = live
        .client
        .post(live.url("/v1/jobs/trainer/checkpoint"))
        .json(&json!({"path": "/c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = live
        .client
        .post(live.url("/v1/jobs/trainer/checkpoint"))
        .bearer_auth(format!("{TOKEN}-wrong"))
        .json(&json!({"path": "/c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let (status, body) = live
        .post(
            "/v1/jobs/trainer/checkpoint",
            json!({"path": "/c", "unknown": 1}),
        )
        .await;
    assert!(status == 400 || status == 422, "{status} {body}");
    live.stop().await;
}
