//! The live controller across a restart over its HTTP API: the active policy and its
//! state resume, a kept upload comes back with its digest, and one that no longer loads
//! is a load error rather than a failed start.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::STREAM;

static NULL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| support::guest("null"));

fn policy_of(record: &Value) -> &str {
    record["policy"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_resumes_the_policy_that_was_active_and_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = || switchyard_controller::LiveConfig {
        speed: 100.0,
        state_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let live = support::start_live_with(STREAM, config(), Duration::from_millis(500)).await;
    let (status, _) = live.post("/v1/policies/flowcon/activate", json!({})).await;
    assert_eq!(status, 200);
    let rounds = live.rounds().await;
    live.wait_for_rounds_after(rounds + 5).await;
    live.stop().await;
    let blob = std::fs::read(dir.path().join("flowcon.state")).unwrap();
    assert!(!blob.is_empty());

    let live = support::start_live_with(STREAM, config(), Duration::from_millis(500)).await;
    let (_, status) = live.get("/v1/status").await;
    assert_eq!(
        status["active"], "flowcon",
        "the active policy survived the restart"
    );
    live.wait_for_rounds_after(3).await;
    // flowcon refuses a state blob it cannot read; reading its own back, it never fails.
    assert!(
        live.all_decisions()
            .await
            .iter()
            .all(|r| r["policy"] == "flowcon")
    );
    live.stop().await;
}

/// A controller keeping its state (and uploads) in `dir`.
fn kept_in(dir: &std::path::Path) -> switchyard_controller::LiveConfig {
    switchyard_controller::LiveConfig {
        speed: 100.0,
        state_dir: Some(dir.to_path_buf()),
        keep_decisions: 1_000_000,
        ..Default::default()
    }
}

/// Uploads the null guest and activates it; returns the upload's answer.
async fn upload_null_and_activate(live: &support::Live) -> Value {
    let (status, uploaded) = live.upload(std::fs::read(&*NULL).unwrap()).await;
    assert_eq!(status, 201, "{uploaded}");
    let (status, applied) = live.post("/v1/policies/null/activate", json!({})).await;
    assert_eq!(status, 200, "{applied}");
    let from = applied["from_round"].as_u64().unwrap();
    live.wait_for_rounds_after(from + 3).await;
    uploaded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uploaded_policy_survives_a_restart_with_its_digest_and_stays_active_and_deciding() {
    let dir = tempfile::tempdir().unwrap();
    let live =
        support::start_live_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    let uploaded = upload_null_and_activate(&live).await;
    live.stop().await;
    let kept = dir.path().join("components").join("null.wasm");
    assert_eq!(
        uploaded["persistence"],
        json!({"survives_restart": true, "location": kept.display().to_string(), "warning": null})
    );
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        std::fs::read(&*NULL).unwrap()
    );

    let live =
        support::start_live_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    let (_, list) = live.get("/v1/policies").await;
    assert_eq!(
        list["active"], "null",
        "the uploaded policy is still active"
    );
    let null = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "null")
        .unwrap_or_else(|| panic!("the upload survived the restart: {list}"));
    assert_eq!(null["digest"], uploaded["policy"]["digest"]);
    assert_eq!(null["source"], format!("kept:{}", kept.display()));
    assert_eq!(list["load_errors"], json!([]));
    live.wait_for_rounds_after(3).await;
    let records = live.all_decisions().await;
    assert!(
        records
            .iter()
            .all(|r| policy_of(r) == "null" && r.get("failure").is_none()),
        "the kept upload decides every round after the restart"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_upload_that_no_longer_loads_is_a_load_error_and_the_controller_starts_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let live =
        support::start_live_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    upload_null_and_activate(&live).await;
    live.stop().await;
    let kept = dir.path().join("components").join("null.wasm");
    let bytes = std::fs::read(&kept).unwrap();
    std::fs::write(&kept, &bytes[..bytes.len() / 2]).unwrap();

    let live =
        support::start_live_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    let (_, status) = live.get("/v1/status").await;
    assert_eq!(
        status["active"], "default",
        "it starts with --policy instead"
    );
    let errors = status["load_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{status}");
    assert_eq!(errors[0]["source"], format!("kept:{}", kept.display()));
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .contains("is not a WebAssembly component"),
        "{status}"
    );
    let (_, metrics) = live.get("/metrics").await;
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("switchyard_policy_load_errors_total{kind=\"not-a-component\"} 1"),
        "{metrics}"
    );
    live.wait_for_rounds_after(3).await;
    assert!(
        live.all_decisions()
            .await
            .iter()
            .all(|r| policy_of(r) == "default" && r.get("failure").is_none())
    );
    // Uploading the policy again replaces the broken copy and clears its error.
    let (status, uploaded) = live.upload(std::fs::read(&*NULL).unwrap()).await;
    assert_eq!(status, 201, "{uploaded}");
    assert_eq!(uploaded["persistence"]["survives_restart"], true);
    let (_, status) = live.get("/v1/status").await;
    assert_eq!(status["load_errors"], json!([]), "{status}");
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        std::fs::read(&*NULL).unwrap()
    );
    live.stop().await;
}
