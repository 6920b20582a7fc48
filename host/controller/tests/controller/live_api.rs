//! The live controller over a real HTTP server on loopback, driving the simulator in
//! scaled real time: hot swaps, uploads, a runaway policy, authentication, parameters,
//! loss samples, the read endpoints and the probes.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use support::{STREAM, TOKEN, start_live};

static LOOPING: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| support::guest("looping"));

fn policy_of(record: &Value) -> &str {
    record["policy"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_swaps_while_deciding_skip_no_round_and_attribute_each_round_to_one_policy() {
    let live = start_live(STREAM, 300.0, Duration::from_millis(500)).await;
    let started_at = live.wait_for_rounds_after(5).await;
    let mut swaps = Vec::new();
    for i in 0..1000 {
        let name = if i % 2 == 0 { "even" } else { "default" };
        let (status, applied) = live
            .post(&format!("/v1/policies/{name}/activate"), json!({}))
            .await;
        assert_eq!(status, 200, "{applied}");
        assert_eq!(applied["active"], name);
        swaps.push((applied["from_round"].as_u64().unwrap(), name));
    }
    let rounds_at_end = live.rounds().await;
    // Let a few more rounds run under the last policy, then stop.
    live.wait_for_rounds_after(rounds_at_end + 3).await;
    let records = live.all_decisions().await;
    live.stop().await;

    assert!(
        rounds_at_end > started_at,
        "decisions kept flowing during the swaps"
    );
    for (i, record) in records.iter().enumerate() {
        assert_eq!(
            record["round"].as_u64(),
            Some(i as u64),
            "round {i} is missing or out of order"
        );
        assert!(
            record.get("failure").is_none(),
            "round {i} failed: {record}"
        );
    }
    // Which policy each round belongs to, from the swaps' first rounds alone.
    let mut expected = vec!["default"; records.len()];
    for (k, &(from, name)) in swaps.iter().enumerate() {
        let to = swaps.get(k + 1).map_or(records.len() as u64, |s| s.0);
        for round in from..to.min(records.len() as u64) {
            expected[round as usize] = name;
        }
    }
    let mut decided_during_swaps = HashSet::new();
    for (record, want) in records.iter().zip(&expected) {
        assert_eq!(
            policy_of(record),
            *want,
            "round {} was decided by the wrong policy",
            record["round"]
        );
        let round = record["round"].as_u64().unwrap();
        if round >= swaps[0].0 && round < swaps[999].0 {
            decided_during_swaps.insert(*want);
        }
    }
    assert_eq!(
        decided_during_swaps.len(),
        2,
        "both policies decided rounds while the swaps went on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_upload_is_refused_with_its_load_error_and_the_active_policy_keeps_deciding() {
    let live = start_live(STREAM, 100.0, Duration::from_millis(500)).await;
    let (status, body) = live
        .upload(b"\0asm but not really a component".to_vec())
        .await;
    assert_eq!(status, 422, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("upload is not a WebAssembly component"),
        "{error}"
    );

    let (status, body) = live.upload(b"#!/bin/sh\necho hi\n".to_vec()).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("magic bytes"),
        "{body}"
    );

    let rounds = live.rounds().await;
    live.wait_for_rounds_after(rounds + 10).await;
    let (_, list) = live.get("/v1/policies").await;
    assert_eq!(list["active"], "default");
    let default = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "default")
        .unwrap_or_else(|| panic!("default is listed: {list}"));
    assert_eq!(
        default["reads_loss"], false,
        "the list says what each policy is sent: {list}"
    );
    assert!(
        list["load_errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("not a WebAssembly component"),
        "{list}"
    );
    let records = live.all_decisions().await;
    assert!(
        records
            .iter()
            .all(|r| policy_of(r) == "default" && r.get("failure").is_none())
    );
    let (_, metrics) = live.get("/metrics").await;
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics.contains("switchyard_policy_load_errors_total{kind=\"not-a-component\"} 2"),
        "{metrics}"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_over_the_limit_or_of_the_wrong_type_gets_a_json_4xx() {
    let live = start_live(STREAM, 10.0, Duration::from_millis(500)).await;
    // One byte over the test controller's 4 MiB limit: the server has read the whole
    // body when it refuses it, so the client is never cut off mid-write (a much larger
    // body made the client's write fail with a broken pipe now and then).
    let (status, body) = live.upload(vec![0u8; (4 << 20) + 1]).await;
    assert_eq!(status, 413);
    assert!(body["error"].as_str().unwrap().contains("limit"), "{body}");
    let response = live
        .client
        .post(live.url("/v1/policies"))
        .bearer_auth(TOKEN)
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("application/wasm"),
        "{body}"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_loops_forever_is_cut_by_its_deadline_and_the_fallback_keeps_deciding() {
    let live = start_live(STREAM, 100.0, Duration::from_millis(50)).await;
    let (status, body) = live.upload(std::fs::read(&*LOOPING).unwrap()).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["policy"]["name"], "looping");
    assert_eq!(body["persistence"]["survives_restart"], false, "{body}");
    assert!(
        body["persistence"]["warning"]
            .as_str()
            .unwrap()
            .contains("without --state-dir"),
        "{body}"
    );
    let (status, applied) = live.post("/v1/policies/looping/activate", json!({})).await;
    assert_eq!(status, 200, "{applied}");
    let from = applied["from_round"].as_u64().unwrap();
    live.wait_for_rounds_after(from + 5).await;
    let (status, _) = live.get("/healthz").await;
    assert_eq!(status, 200);
    let records = live.all_decisions().await;
    for record in &records[from as usize..] {
        assert_eq!(
            policy_of(record),
            "default",
            "the fallback decided: {record}"
        );
        let failure = record["failure"].as_str().unwrap();
        assert!(
            failure.contains("looping") && failure.contains("deadline"),
            "{failure}"
        );
    }
    let placed = records[from as usize..]
        .iter()
        .any(|r| !r["accepted"].as_array().unwrap().is_empty());
    assert!(placed, "the fallback's placements were applied");
    let (_, metrics) = live.get("/metrics").await;
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics
            .contains("switchyard_policy_failures_total{policy=\"looping\",reason=\"deadline\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_fallback_rounds_total{policy=\"looping\"}"),
        "{metrics}"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_gets_401_and_changes_nothing() {
    let live = start_live(STREAM, 10.0, Duration::from_millis(500)).await;
    let without = live
        .client
        .post(live.url("/v1/policies/even/activate"))
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), 401);
    let body: Value = without.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("Bearer"), "{body}");
    let wrong = live
        .client
        .post(live.url("/v1/policies/even/activate"))
        .bearer_auth("not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let upload = live
        .client
        .post(live.url("/v1/policies"))
        .header("content-type", "application/wasm")
        .body(std::fs::read(&*LOOPING).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status(), 401);
    assert_eq!(
        upload.headers()["connection"],
        "close",
        "the unread upload body must not be left on a kept-alive connection"
    );
    let (_, list) = live.get("/v1/policies").await;
    assert_eq!(list["active"], "default");
    assert!(
        list["policies"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["name"] != "looping"),
        "the unauthenticated upload was not loaded"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_are_checked_by_the_policy_and_apply_from_the_next_round() {
    let live = start_live(STREAM, 50.0, Duration::from_millis(500)).await;
    let response = live
        .client
        .put(live.url("/v1/policies/default/parameters"))
        .bearer_auth(TOKEN)
        .json(&json!({"scoring": "no-such-scoring"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("no-such-scoring"),
        "{body}"
    );
    let response = live
        .client
        .put(live.url("/v1/policies/default/parameters"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");
    let response = live
        .client
        .put(live.url("/v1/policies/default/parameters"))
        .bearer_auth(TOKEN)
        .json(&json!({"scoring": "most-allocated"}))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["policy"]["settings"]["scoring"], "most-allocated",
        "{body}"
    );
    assert!(body["applied"]["from_round"].is_u64(), "{body}");
    live.stop().await;
}

/// One job without a loss curve and one with, both waiting on a cluster too small for
/// either, so both stay active while the test pushes.
const CURVES: &str = "
seed: 2
cluster:
  nodes:
    - {name: tiny, count: 1, cpus: 1, memory_gib: 1}
templates:
  plain: {work: 100, speed: 1.0, cpus: 4, max_cores: 4, memory_gib: 1, curve: none}
  vae: {work: 100, speed: 1.0, cpus: 4, max_cores: 4, memory_gib: 1, curve: vae}
jobs:
  - {template: plain, count: 1, every: 1}
  - {template: vae, count: 1, every: 1}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_loss_sample_is_kept_for_a_simulated_job_without_a_curve_and_refused_with_the_reason_for_one_with_a_curve()
 {
    let live = start_live(CURVES, 20.0, Duration::from_millis(500)).await;
    let (status, body) = live
        .post(
            "/v1/jobs/no-such-job/loss",
            json!({"step": 10, "value": 0.5}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("no-such-job"));
    live.wait_for("/v1/snapshot", |s| s["jobs"].as_u64().unwrap() == 2)
        .await;
    let (status, body) = live
        .post("/v1/jobs/plain-0/loss", json!({"step": 10, "value": 0.5}))
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["outcome"], "accepted", "{body}");
    let (_, body) = live
        .post("/v1/jobs/plain-0/loss", json!({"step": 10, "value": 0.4}))
        .await;
    assert_eq!(body["outcome"], "ignored", "the same step twice: {body}");
    let (status, body) = live
        .post("/v1/jobs/vae-1/loss", json!({"step": 10, "value": 0.5}))
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["outcome"], "ignored", "{body}");
    assert!(
        body["note"]
            .as_str()
            .unwrap()
            .contains("loss from its workload curve"),
        "{body}"
    );
    let (status, body) = live
        .post("/v1/jobs/plain-0/loss", json!({"step": "ten"}))
        .await;
    assert!(status == 400 || status == 422, "{status} {body}");
    let (_, metrics) = live.get("/metrics").await;
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics.contains("switchyard_loss_samples_total{kind=\"accepted\"} 1"),
        "{metrics}"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_snapshot_and_unknown_routes_answer() {
    let live = start_live(STREAM, 10.0, Duration::from_millis(500)).await;
    assert_eq!(live.get("/healthz").await.0, 200);
    // Ready once the driver has seen the cluster synced, a moment after the API is up.
    live.wait_ready().await;
    let (status, snapshot) = live.get("/v1/snapshot").await;
    assert_eq!(status, 200);
    assert_eq!(snapshot["nodes"], 8);
    assert_eq!(snapshot["allocatable"]["cpu_millis"], 64_000);
    let (status, body) = live.get("/v1/nope").await;
    assert_eq!(status, 404);
    assert!(
        body["error"].as_str().unwrap().contains("openapi"),
        "{body}"
    );
    let (status, _) = live.get("/v1/jobs/labels").await;
    assert_eq!(status, 200);
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_jobs_come_a_page_at_a_time_and_utilisation_is_a_bounded_series_of_samples() {
    let config = switchyard_controller::LiveConfig {
        speed: 60.0,
        keep_utilisation: 40,
        utilisation_every: Duration::from_millis(10),
        ..switchyard_controller::LiveConfig::default()
    };
    let live = support::start_live_with(STREAM, config, Duration::from_millis(500)).await;
    live.wait_ready().await;
    live.wait_for("/v1/jobs", |page| page["total"].as_u64().unwrap() >= 8)
        .await;

    let (status, first) = live.get("/v1/jobs?limit=3").await;
    assert_eq!(status, 200, "{first}");
    let (_, second) = live.get("/v1/jobs?limit=3&offset=3").await;
    let ids = |page: &Value| -> Vec<String> {
        page["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&first).len(), 3);
    assert_eq!(first["more"], true);
    assert_eq!(second["offset"], 3);
    assert!(
        ids(&second).iter().all(|id| !ids(&first).contains(id)),
        "pages overlap: {first} {second}"
    );
    let (_, running) = live.get("/v1/jobs?phase=running&limit=500").await;
    let jobs = running["jobs"].as_array().unwrap();
    assert!(!jobs.is_empty(), "{running}");
    for job in jobs {
        assert_eq!(job["phase"], "running", "{job}");
        assert_eq!(
            (job["tasks"].as_u64(), job["placed"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(job["nodes"].as_array().unwrap().len(), 1, "{job}");
        assert_eq!(job["requests"]["cpu_millis"], 1000);
        assert!(job["start_time"].as_f64().unwrap() >= job["submit_time"].as_f64().unwrap());
        assert!(job["policy_labels"].is_object());
    }
    let submitted: Vec<f64> = jobs
        .iter()
        .map(|j| j["submit_time"].as_f64().unwrap())
        .collect();
    assert!(submitted.is_sorted(), "in submission order: {submitted:?}");
    for (query, names) in [
        ("phase=done", "waiting, running or restarting"),
        ("limit=0", "between 1 and 500"),
        ("limit=501", "between 1 and 500"),
    ] {
        let (status, body) = live.get(&format!("/v1/jobs?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body["error"].as_str().unwrap().contains(names), "{body}");
    }

    // The ring fills to its cap and no further; the clock only moves forward in it.
    let full = live
        .wait_for("/v1/utilisation", |u| {
            u["samples"].as_array().unwrap().len() == 40
        })
        .await;
    let later = live
        .wait_for("/v1/utilisation", |u| {
            u["samples"][0]["time"] != full["samples"][0]["time"]
        })
        .await;
    let samples = later["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 40, "the oldest went first");
    let times: Vec<f64> = samples
        .iter()
        .map(|s| s["time"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    for sample in samples {
        assert!(
            (0.0..=1.0).contains(&sample["cpu"].as_f64().unwrap()),
            "{sample}"
        );
        assert!(sample["gpu"].is_null(), "the cluster has no GPUs: {sample}");
    }
    assert_eq!(later["allocatable"]["cpu_millis"], 64_000);
    // `since` between the last two samples: nothing older than the last one. (Between,
    // not at the last one: serde_json reads a float to within a unit in the last place,
    // so the time this test read may sit just below the one the ring holds.)
    let (before, last) = (times[times.len() - 2], times[times.len() - 1]);
    let since = (before + last) / 2.0;
    let (_, newer) = live.get(&format!("/v1/utilisation?since={since}")).await;
    let newer_times: Vec<f64> = newer["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["time"].as_f64().unwrap())
        .collect();
    assert!(newer_times[0] > last - 1e-9, "{newer}");
    assert!(newer_times.iter().all(|t| *t > since), "{newer}");

    // The console is served from the same port.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let root = no_redirects.get(live.url("/")).send().await.unwrap();
    assert_eq!(root.status(), 303);
    assert_eq!(root.headers()["location"], "/console/");
    let page = live.client.get(live.url("/console/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("default-src 'self'")
    );
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("<title>switchyard console</title>")
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_answers_a_wrong_method_and_a_body_without_content_type_with_json_errors() {
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    use switchyard_controller::{ApiConfig, Token};
    use tower::ServiceExt as _;

    let live = start_live(STREAM, 10.0, Duration::from_millis(500)).await;
    let router = switchyard_controller::router(
        live.controller.clone(),
        ApiConfig {
            token: Token::new(TOKEN),
            max_upload_bytes: 1024,
            ..ApiConfig::default()
        },
    );
    let response = router
        .clone()
        .oneshot(Request::delete("/v1/policies").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    let body: Value =
        serde_json::from_slice(&to_bytes(response.into_body(), 1 << 20).await.unwrap()).unwrap();
    assert!(body["error"].as_str().unwrap().contains("method"), "{body}");
    let response = router
        .oneshot(
            Request::post("/v1/experiment")
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(Body::from(r#"{"mode": "shadow", "policy_b": "even"}"#))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    let body: Value =
        serde_json::from_slice(&to_bytes(response.into_body(), 1 << 20).await.unwrap()).unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("application/json"),
        "{body}"
    );
    assert!(
        live.controller.status().experiment.is_none(),
        "nothing started"
    );
    live.stop().await;
}

#[test]
fn the_committed_openapi_document_matches_the_code() {
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/openapi.json"
    ))
    .unwrap_or_default();
    assert!(
        committed == switchyard_controller::openapi_json(),
        "docs/openapi.json is out of date: run `cargo run -- openapi`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_once_the_decision_thread_has_not_looked_at_the_cluster_for_too_long() {
    let stalled_at_once = switchyard_controller::LiveConfig {
        speed: 100.0,
        stalled_after: Duration::ZERO,
        ..Default::default()
    };
    let live = support::start_live_with(STREAM, stalled_at_once, Duration::from_millis(500)).await;
    let (status, body) = live.get("/healthz").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("has not looked at the cluster")),
        "{body}"
    );
    live.stop().await;
}
