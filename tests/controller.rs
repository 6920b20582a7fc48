//! The live controller over a real HTTP server on loopback, driving the simulator in
//! scaled real time: hot swaps, uploads, a runaway policy, authentication, experiments.

use crate::support::guests;

use crate::live;

use std::collections::HashSet;
use std::time::Duration;

use live::{STREAM, TOKEN, start};
use serde_json::{Value, json};

static LOOPING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| guests::path("looping"));
static NULL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| guests::path("null"));

fn policy_of(record: &Value) -> &str {
    record["policy"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_swaps_while_deciding_skip_no_round_and_attribute_each_round_to_one_policy() {
    let live = start(STREAM, 300.0, Duration::from_millis(500)).await;
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
    let live = start(STREAM, 100.0, Duration::from_millis(500)).await;
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
    let live = start(STREAM, 10.0, Duration::from_millis(500)).await;
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
    let live = start(STREAM, 100.0, Duration::from_millis(50)).await;
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
    let live = start(STREAM, 10.0, Duration::from_millis(500)).await;
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
    let live = start(STREAM, 50.0, Duration::from_millis(500)).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_experiment_reports_agreement_and_never_applies_the_shadow() {
    let live = start(STREAM, 200.0, Duration::from_millis(500)).await;
    let (status, body) = live
        .post(
            "/v1/experiment",
            json!({"mode": "shadow", "policy_b": "even"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let report = live
        .wait_for("/v1/experiment", |r| {
            r["shadow"]["compared"].as_u64().unwrap_or(0) >= 30
        })
        .await;
    assert_eq!(report["policy_a"], "default");
    assert_eq!(report["policy_b"], "even");
    let compared = report["shadow"]["compared"].as_u64().unwrap();
    let agreed = report["shadow"]["agreed"].as_u64().unwrap();
    let rate = report["shadow"]["agreement_rate"].as_f64().unwrap();
    assert!((rate - agreed as f64 / compared as f64).abs() < 1e-12);
    assert_eq!(
        report["shadow"]["differing"].as_array().unwrap().len() as u64,
        (compared - agreed).min(50)
    );
    let records = live.all_decisions().await;
    let shadowed: Vec<&Value> = records
        .iter()
        .filter(|r| r.get("shadow").is_some())
        .collect();
    assert!(!shadowed.is_empty());
    for r in &shadowed {
        assert_eq!(policy_of(r), "default", "only A's decision is applied");
        assert_eq!(r["shadow"]["policy"], "even");
    }
    let (status, last) = live
        .client
        .delete(live.url("/v1/experiment"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .map(|r| (r.status().as_u16(), r))
        .unwrap();
    assert_eq!(status, 200);
    let last: Value = last.json().await.unwrap();
    assert!(last["shadow"]["compared"].as_u64().unwrap() >= compared);
    let (status, _) = live.get("/v1/experiment").await;
    assert_eq!(status, 404, "no experiment runs after DELETE");
    let (_, metrics) = live.get("/metrics").await;
    assert!(
        metrics
            .as_str()
            .unwrap()
            .contains("switchyard_shadow_compared_rounds_total")
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_experiment_gives_each_arm_only_its_jobs_and_reports_per_arm_figures() {
    let live = start(STREAM, 200.0, Duration::from_millis(500)).await;
    let (status, body) = live
        .post(
            "/v1/experiment",
            json!({"mode": "split", "policy_b": "even", "ratio": 0.5, "node_selector": "pool=b"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let report = live
        .wait_for("/v1/experiment", |r| {
            r["split"]["arms"]
                .as_array()
                .is_some_and(|arms| arms.iter().all(|a| a["finished"].as_u64().unwrap() >= 10))
        })
        .await;
    let arms = report["split"]["arms"].as_array().unwrap();
    assert_eq!(arms[0]["policy"], "default");
    assert_eq!(arms[1]["policy"], "even");
    for arm in arms {
        assert!(arm["jobs"].as_u64().unwrap() >= arm["started"].as_u64().unwrap());
        assert!(arm["started"].as_u64().unwrap() >= arm["finished"].as_u64().unwrap());
        // Every job does 20 s of work on one core, so it completes in at least 20 s.
        assert!(
            arm["avg_completion"].as_f64().unwrap() >= 20.0 - 1e-6,
            "{arm}"
        );
        assert!(arm["makespan"].as_f64().unwrap() > 0.0);
        let cpu = arm["cpu_allocated"].as_f64().unwrap();
        assert!(cpu > 0.0 && cpu <= 1.0, "{arm}");
    }
    let records = live.all_decisions().await;
    let mut jobs_a = HashSet::new();
    let mut jobs_b = HashSet::new();
    for r in records.iter().filter(|r| r.get("arm_b").is_some()) {
        for a in r["accepted"].as_array().unwrap() {
            jobs_a.insert(a["job"].as_str().unwrap().to_string());
            for assignment in a["assignments"].as_array().into_iter().flatten() {
                assert!(
                    assignment["node"].as_str().unwrap().starts_with("cpu"),
                    "arm A placed on B's node: {a}"
                );
            }
        }
        for a in r["arm_b"]["accepted"].as_array().unwrap() {
            jobs_b.insert(a["job"].as_str().unwrap().to_string());
            for assignment in a["assignments"].as_array().into_iter().flatten() {
                assert!(
                    assignment["node"].as_str().unwrap().starts_with("big"),
                    "arm B placed on A's node: {a}"
                );
            }
        }
    }
    assert!(!jobs_a.is_empty() && !jobs_b.is_empty());
    assert!(
        jobs_a.is_disjoint(&jobs_b),
        "no job was decided by both arms"
    );
    let (_, metrics) = live.get("/metrics").await;
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics.contains("switchyard_split_jobs{arm=\"b\",policy=\"even\"}"),
        "{metrics}"
    );
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
    let live = start(CURVES, 20.0, Duration::from_millis(500)).await;
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
    let live = start(STREAM, 10.0, Duration::from_millis(500)).await;
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
    let config = switchyard::live::LiveConfig {
        speed: 60.0,
        keep_utilisation: 40,
        utilisation_every: Duration::from_millis(10),
        ..switchyard::live::LiveConfig::default()
    };
    let live = live::start_with(STREAM, config, Duration::from_millis(500)).await;
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
    use switchyard::api::{ApiConfig, Token};
    use tower::ServiceExt as _;

    let live = start(STREAM, 10.0, Duration::from_millis(500)).await;
    let router = switchyard::api::router(
        live.controller.clone(),
        ApiConfig {
            token: Token::new(TOKEN),
            max_upload_bytes: 1024,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_resumes_the_policy_that_was_active_and_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = || switchyard::live::LiveConfig {
        speed: 100.0,
        state_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let live = live::start_with(STREAM, config(), Duration::from_millis(500)).await;
    let (status, _) = live.post("/v1/policies/flowcon/activate", json!({})).await;
    assert_eq!(status, 200);
    let rounds = live.rounds().await;
    live.wait_for_rounds_after(rounds + 5).await;
    live.stop().await;
    let blob = std::fs::read(dir.path().join("flowcon.state")).unwrap();
    assert!(!blob.is_empty());

    let live = live::start_with(STREAM, config(), Duration::from_millis(500)).await;
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
fn kept_in(dir: &std::path::Path) -> switchyard::live::LiveConfig {
    switchyard::live::LiveConfig {
        speed: 100.0,
        state_dir: Some(dir.to_path_buf()),
        keep_decisions: 1_000_000,
        ..Default::default()
    }
}

/// Uploads the null guest and activates it; returns the upload's answer.
async fn upload_null_and_activate(live: &live::Live) -> Value {
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
    let live = live::start_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
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

    let live = live::start_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
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
    let live = live::start_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
    upload_null_and_activate(&live).await;
    live.stop().await;
    let kept = dir.path().join("components").join("null.wasm");
    let bytes = std::fs::read(&kept).unwrap();
    std::fs::write(&kept, &bytes[..bytes.len() / 2]).unwrap();

    let live = live::start_with(STREAM, kept_in(dir.path()), Duration::from_millis(500)).await;
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

#[test]
fn simulate_with_split_reports_both_arms_and_with_shadow_reports_agreement() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    );
    let run = |extra: &[&str]| -> Value {
        let output = assert_cmd::Command::cargo_bin("switchyard")
            .unwrap()
            .env("SWITCHYARD_NO_CACHE", "1")
            .args(["simulate", example, "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let split = run(&["--split", "default:even:0.5"]);
    let arms = split["experiment"]["split"]["arms"].as_array().unwrap();
    assert_eq!(arms[0]["policy"], "default");
    assert_eq!(arms[1]["policy"], "even");
    let jobs: u64 = arms.iter().map(|a| a["jobs"].as_u64().unwrap()).sum();
    assert_eq!(jobs, 14, "every quickstart job is in exactly one arm");
    for arm in arms {
        assert_eq!(arm["finished"], arm["jobs"], "{arm}");
        assert!(arm["avg_completion"].as_f64().unwrap() > 0.0);
    }
    let shadow = run(&["--policy", "specon", "--shadow", "even"]);
    let report = &shadow["experiment"]["shadow"];
    assert!(report["compared"].as_u64().unwrap() > 0, "{shadow}");
    assert!(report["agreement_rate"].as_f64().unwrap() <= 1.0);
    assert_eq!(shadow["experiment"]["policy_a"], "specon");
}

#[test]
fn the_committed_openapi_document_matches_the_code() {
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/openapi.json"
    ))
    .unwrap_or_default();
    assert!(
        committed == switchyard::api::openapi_json(),
        "docs/openapi.json is out of date: run `cargo run -- openapi`"
    );
}

#[cfg(unix)]
#[test]
fn run_on_the_simulator_logs_plain_text_to_a_pipe_and_shuts_down_gracefully_on_sigterm() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("stream.yaml");
    std::fs::write(&workload, STREAM).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .env("SWITCHYARD_NO_CACHE", "1")
        .args(["run", "--cluster"])
        .arg(format!("sim:{}", workload.display()))
        .args(["--listen", "127.0.0.1:0", "--speed", "5"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut logged = String::new();
    while !line.contains("API on http://") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the controller exited before serving"
        );
        logged.push_str(&line);
    }
    assert!(
        logged.contains("INFO") && !logged.contains('\x1b'),
        "logs to a pipe are plain text, without terminal colours:\n{logged}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM stops the controller gracefully, not by the signal: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_once_the_decision_thread_has_not_looked_at_the_cluster_for_too_long() {
    let stalled_at_once = switchyard::live::LiveConfig {
        speed: 100.0,
        stalled_after: Duration::ZERO,
        ..Default::default()
    };
    let live = live::start_with(STREAM, stalled_at_once, Duration::from_millis(500)).await;
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
