//! The live controller has one writer for the active policy and every policy's
//! parameters: activations and parameter changes are applied in order by the decision
//! thread, so an answer of 200 is what holds, and parameters are kept in the state
//! directory for every policy, active or not.

use crate::support::{self, Live, STREAM};

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_controller::LiveConfig;

/// A controller keeping its state in `dir`.
fn kept_in(dir: &Path) -> LiveConfig {
    LiveConfig {
        speed: 100.0,
        state_dir: Some(dir.to_path_buf()),
        ..Default::default()
    }
}

/// `policy`'s effective settings as `GET /v1/policies` lists them.
async fn settings_of(live: &Live, policy: &str) -> Value {
    let (_, list) = live.get("/v1/policies").await;
    list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == policy)
        .unwrap_or_else(|| panic!("{policy} is listed: {list}"))["settings"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_activation_racing_a_parameter_change_of_the_policy_it_replaces_is_never_undone() {
    let dir = tempfile::tempdir().unwrap();
    let live =
        support::start_live_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    for attempt in 0..50 {
        let (status, body) = live.post("/v1/policies/default/activate", json!({})).await;
        assert_eq!(status, 200, "{body}");
        let scoring = ["most-allocated", "least-allocated"][attempt % 2];
        let ((set, changed), (activated, applied)) = tokio::join!(
            live.put(
                "/v1/policies/default/parameters",
                json!({"scoring": scoring})
            ),
            live.post("/v1/policies/even/activate", json!({})),
        );
        assert_eq!(set, 200, "{changed}");
        assert_eq!(activated, 200, "{applied}");
        assert_eq!(applied["active"], "even", "{applied}");
        let from = applied["from_round"].as_u64().unwrap();
        live.wait_for_rounds_after(from + 2).await;
        let (_, status) = live.get("/v1/status").await;
        assert_eq!(
            status["active"], "even",
            "attempt {attempt}: activating even answered 200, then another policy became active"
        );
        let saved: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("active.json")).unwrap())
                .unwrap();
        assert_eq!(saved["policy"], "even", "attempt {attempt}: {saved}");
        assert_eq!(
            settings_of(&live, "default").await["scoring"],
            scoring,
            "attempt {attempt}: the parameters answered 200 hold too"
        );
    }
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_set_for_a_policy_that_is_not_active_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let live =
        support::start_live_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    let (status, body) = live
        .put(
            "/v1/policies/default/parameters",
            json!({"scoring": "most-allocated"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = live.post("/v1/policies/even/activate", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = live
        .put("/v1/policies/specon/parameters", json!({"alpha": "0.05"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["applied"], Value::Null, "specon is not active: {body}");
    live.stop().await;

    let live =
        support::start_live_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    let (_, status) = live.get("/v1/status").await;
    assert_eq!(status["active"], "even");
    assert_eq!(settings_of(&live, "specon").await["alpha"], "0.05");
    assert_eq!(
        settings_of(&live, "default").await["scoring"],
        "most-allocated"
    );
    live.stop().await;
}
