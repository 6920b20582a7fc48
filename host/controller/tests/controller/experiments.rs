//! A/B experiments on the live controller over its HTTP API: a shadow that reports
//! agreement and never applies, a split that gives each arm only its jobs.

use crate::support;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use support::{STREAM, TOKEN, start_live};

fn policy_of(record: &Value) -> &str {
    record["policy"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_experiment_reports_agreement_and_never_applies_the_shadow() {
    let live = start_live(STREAM, 200.0, Duration::from_millis(500)).await;
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
    let live = start_live(STREAM, 200.0, Duration::from_millis(500)).await;
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
