//! An adopted job's checkpoint and loss over HTTP, in kube mode against the scripted API
//! server: its id (`<kind>:<namespace>/<name>`, the slash percent-encoded) reaches the
//! cluster through the same routes and command path as a TrainingJob's, an
//! acknowledgement naming a task the checkpoint was not asked of is refused with the
//! asked ones, and once every asked task has acknowledged the pods are evicted at once.

use axum::http::StatusCode;
use serde_json::json;
use switchyard_kube::Integration;

use crate::in_cluster::{call, leading, stop, until_ready};
use crate::kube_support::fixtures::{NS, at, event_json, node};
use crate::kube_support::mock::{Expect, MockServer};
use crate::kube_support::owners::{asked, bound, evict, indexed_job, job_pod};
use crate::kube_support::world::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_jobs_checkpoint_and_loss_go_through_the_api_under_its_percent_encoded_id() {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("pair", 2, "default");
    owners.job(&job);
    // Both pods run where switchyard released them, asked to checkpoint at the start;
    // the cluster's clock stays there, so only the acknowledgements end the wait.
    let pods: Vec<_> = (0..2)
        .map(|i| asked(&bound(&job_pod(&job, i, 0), "n1"), "2026-01-01T00:00:00Z"))
        .collect();
    owners.pods(&pods);
    let mut script = vec![
        Expect::post("/apis/events.k8s.io/v1/namespaces/ml/events")
            .body(json!({"reason": "CheckpointAcknowledged", "type": "Normal",
                "metadata": {"name": format!("pair.job.checkpoint.{}", at(0).as_second())},
                "regarding": {"kind": "Job", "name": "pair", "namespace": NS}}))
            .respond(201, event_json()),
    ];
    script.extend(pods.iter().map(evict));
    let (client, server) = MockServer::start(script);
    let (controller, router, driver) = leading(&world, client).await;
    until_ready(&controller).await;
    let path = "/v1/jobs/job:ml%2Fpair/checkpoint";

    let (status, body) = call(&router, "GET", path, json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["requested"], true);
    assert_eq!(body["requested_at"], "2026-01-01T00:00:00Z");
    assert_eq!(body["acknowledged"], json!([]));

    let other = json!({"path": "/ckpt/1", "task": "job-5"});
    let (status, body) = call(&router, "POST", path, other).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.to_string().contains("job-0, job-1"), "{body}");

    let (status, body) = call(&router, "POST", path, json!({"path": "/ckpt/1"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["waiting_for"], json!([]));

    let loss = json!({"step": 7, "value": 0.25});
    let (status, body) = call(&router, "POST", "/v1/jobs/job:ml%2Fpair/loss", loss).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["outcome"], "accepted");

    server.finish().await;
    stop(driver).await;
}
