//! The trust boundary on the live controller, over loopback: hostile policies that stay
//! inside their deadline and memory cap, hostile names, labels and operator input. Each
//! attack leaves the controller running, the next rounds decided (by the fallback where
//! the policy's answer was refused), what the host keeps bounded, and the refusal
//! visible in the records, the status and the metrics.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};

use support::{STREAM, start_live, start_live_with};
use switchyard_controller::LiveConfig;

/// Uploads the hostile guest under `name`, configured for `attack`, and activates it.
async fn activate_attack(live: &support::Live, name: &str, attack: &str, count: usize) -> u64 {
    let (status, body) = live.upload(support::hostile_guest_named(name)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = live
        .put(
            &format!("/v1/policies/{name}/parameters"),
            json!({"attack": attack, "count": count.to_string()}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, applied) = live
        .post(&format!("/v1/policies/{name}/activate"), json!({}))
        .await;
    assert_eq!(status, 200, "{applied}");
    applied["from_round"].as_u64().unwrap()
}

fn metrics_text(metrics: &Value) -> String {
    metrics.as_str().expect("the metrics are text").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_actions_is_refused_the_fallback_decides_and_the_records_stay_bounded() {
    let keep_bytes = 8 << 20;
    let live = start_live_with(
        STREAM,
        LiveConfig {
            speed: 50.0,
            keep_decisions_bytes: keep_bytes,
            keep_decisions: 1_000_000,
            ..LiveConfig::default()
        },
        Duration::from_secs(5),
    )
    .await;
    // Over the action budget: refused while it is read.
    let from = activate_attack(&live, "flood", "actions", 250_000).await;
    live.wait_for_rounds_after(from + 3).await;
    let records = live.all_decisions().await;
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["round"].as_u64().unwrap() >= from)
        .collect();
    assert!(!refused.is_empty());
    for record in &refused {
        assert_eq!(record["policy"], "default", "{record}");
        let failure = record["failure"].as_str().unwrap();
        assert!(failure.contains("actions"), "{failure}");
    }
    // Within the budget but large: kept records are bounded in bytes.
    let (status, _) = live
        .put(
            "/v1/policies/flood/parameters",
            json!({"attack": "actions", "count": "150000"}),
        )
        .await;
    assert_eq!(status, 200);
    let now = live.rounds().await;
    live.wait_for_rounds_after(now + 5).await;
    let kept = live.controller.with_status(|s| s.decision_bytes);
    let largest = live
        .controller
        .with_status(|s| s.decisions.iter().map(|d| d.footprint()).max().unwrap());
    assert!(
        kept <= keep_bytes.max(largest),
        "{kept} bytes of records kept for a cap of {keep_bytes}"
    );
    // An API page is capped too.
    let (status, page) = live.get("/v1/decisions?limit=1000").await;
    assert_eq!(status, 200);
    let bytes = page.to_string().len();
    assert!(bytes < 2 * largest.max(4 << 20), "a page of {bytes} bytes");
    let (status, _) = live.get("/healthz").await;
    assert_eq!(status, 200);
    let (_, metrics) = live.get("/metrics").await;
    assert!(
        metrics_text(&metrics)
            .contains("switchyard_policy_failures_total{policy=\"flood\",reason=\"invalid\"}"),
        "{metrics}"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_asking_to_be_called_at_once_cannot_make_the_loop_spin() {
    // Arrivals 100 s apart: between them only the policy's own ticks call it.
    const SPARSE: &str = "
seed: 1
cluster:
  nodes:
    - {name: cpu, count: 2, cpus: 8, memory_gib: 32}
templates:
  small: {work: 500, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none, checkpointable: false}
jobs:
  - {template: small, count: 100, every: 100}
";
    let live = start_live(SPARSE, 50.0, Duration::from_secs(5)).await;
    let from = activate_attack(&live, "eager", "tick-zero", 0).await;
    live.wait_for_rounds_after(from + 20).await;
    let records = live.all_decisions().await;
    let ticks: Vec<f64> = records
        .iter()
        .filter(|r| r["round"].as_u64().unwrap() > from)
        .filter(|r| {
            r["triggers"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["kind"] == "tick")
        })
        .map(|r| r["time"].as_f64().unwrap())
        .collect();
    assert!(
        ticks.len() > 2,
        "{ticks:?}: {:?}",
        &records[records.len().saturating_sub(3)..]
    );
    for pair in ticks.windows(2) {
        assert!(
            pair[1] - pair[0] >= 1.0 - 1e-9,
            "two tick rounds {:.3} s apart: the floor is 1 s of cluster time",
            pair[1] - pair[0]
        );
    }
    for record in records
        .iter()
        .filter(|r| r["round"].as_u64().unwrap() > from)
    {
        assert_eq!(record["next_call_after"].as_f64().unwrap(), 1.0, "{record}");
    }
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_claiming_a_built_in_name_or_a_hostile_name_is_refused() {
    let live = start_live(STREAM, 10.0, Duration::from_secs(5)).await;
    let (status, body) = live.upload(support::hostile_guest_named("default")).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("reserved"),
        "{body}"
    );
    let (_, policies) = live.get("/v1/policies").await;
    let default = policies["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "default")
        .unwrap();
    assert_eq!(default["source"], "builtin:default");
    for bad in [
        "col.b",
        "col_b",
        "Upper",
        "evil\"} 1\nswitchyard_fake_metric 42\n#",
    ] {
        let (status, body) = live.upload(support::hostile_guest_named(bad)).await;
        assert_eq!(status, 422, "{bad:?}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains("DNS label"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }
    // The refusals are counted, and /metrics still parses.
    let (_, metrics) = live.get("/metrics").await;
    let text = metrics_text(&metrics);
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(&text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(!parsed.families.contains_key("switchyard_fake_metric"));
    assert!(
        text.contains("switchyard_policy_load_errors_total{kind=\"bad-name\"} 4"),
        "{text}"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_no_kubernetes_object_could_carry_are_rejected_one_by_one() {
    let live = start_live(STREAM, 50.0, Duration::from_secs(5)).await;
    let from = activate_attack(&live, "labeller", "bad-labels", 0).await;
    live.wait_for_rounds_after(from + 2).await;
    let records = live.all_decisions().await;
    let record = records
        .iter()
        .find(|r| r["round"].as_u64().unwrap() > from && r["policy"] == "labeller")
        .expect("a round decided by the labeller");
    let accepted: Vec<&str> = record["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    assert_eq!(accepted, vec!["example.com/fine"], "{record}");
    let rejected = record["rejected_labels"].as_array().unwrap();
    assert_eq!(rejected.len(), 8, "{record}");
    assert!(
        rejected.iter().any(|r| r["rejected_because"]
            .as_str()
            .unwrap()
            .contains("unknown job")),
        "{record}"
    );
    let (_, metrics) = live.get("/metrics").await;
    assert!(
        metrics_text(&metrics).contains("reason=\"label-syntax\""),
        "{metrics}"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_input_is_checked_strictly() {
    let live = start_live(STREAM, 10.0, Duration::from_secs(5)).await;
    let (status, body) = live
        .post(
            "/v1/experiment",
            json!({"mode": "split", "policy_b": "even", "job_selector": "a=b,c"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = live
        .post(
            "/v1/experiment",
            json!({"mode": "split", "policy_b": "even", "ratio": 0.5, "node_selector": "pool=nowhere"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("matches 0"),
        "{body}"
    );
    let (status, body) = live
        .post("/v1/jobs/stream-0/loss", json!({"step": 1, "value": 1e300}))
        .await;
    assert_eq!(status, 422, "{body}");
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activation_that_cannot_be_persisted_says_so_and_changes_nothing() {
    let state = tempfile::tempdir().unwrap();
    // An interrupted write of an earlier run: removed at start.
    std::fs::write(state.path().join(".switchyard-writing-abc123"), b"half").unwrap();
    let live = start_live_with(
        STREAM,
        LiveConfig {
            speed: 10.0,
            state_dir: Some(state.path().to_path_buf()),
            ..LiveConfig::default()
        },
        Duration::from_secs(5),
    )
    .await;
    assert!(!state.path().join(".switchyard-writing-abc123").exists());
    let (status, body) = live.post("/v1/policies/even/activate", json!({})).await;
    assert_eq!(status, 200, "{body}");
    // Writes now fail (a file cannot be renamed over a non-empty directory, whoever
    // runs the test): the active policy and even's state blob.
    // The decision thread may write a file back between the two steps: try again.
    for blocked in ["active.json", "even.state"] {
        let path = state.path().join(blocked);
        let mut tries = 0;
        while !path.is_dir() {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::create_dir_all(path.join("in-the-way"));
            tries += 1;
            assert!(tries < 1000, "cannot put a directory at {}", path.display());
        }
    }
    let (status, body) = live.post("/v1/policies/default/activate", json!({})).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("not made"),
        "{body}"
    );
    assert_eq!(live.controller.with_status(|s| s.active.clone()), "even");
    let status = live
        .wait_for("/v1/status", |s| !s["state_error"].is_null())
        .await;
    assert!(
        status["state_save_failures"].as_u64().unwrap() > 0,
        "{status}"
    );
    let (_, metrics) = live.get("/metrics").await;
    assert!(
        metrics_text(&metrics).contains("switchyard_state_save_failures_total"),
        "{metrics}"
    );
    live.stop().await;
}
