//! The training library's HTTP transport in a cluster is the team's to set up
//! (`docs/training-jobs.md`, "The HTTP transport in a cluster"): the controller never
//! gives a pod the API's URL or token, and what a job's template sets for it (the two
//! variables, the token Secret's volume and its mount) reaches every pod as written.

use serde_json::json;
use switchyard_kube::TrainingJobStatus;

use crate::support::fixtures::*;
use crate::support::mock::{Expect, MockServer};

/// A job whose template sets up the HTTP transport as the docs say: `SWITCHYARD_URL`,
/// `SWITCHYARD_TOKEN_FILE`, and the team's copy of the token mounted there.
fn job_pushing_over_http() -> JobBuilder {
    let mut value = JobBuilder::new("a").push_progress().json();
    let spec = &mut value["spec"]["roles"][0]["template"]["spec"];
    spec["containers"][0]["env"] = json!([
        {"name": "SWITCHYARD_URL", "value": "http://switchyard.switchyard:80"},
        {"name": "SWITCHYARD_TOKEN_FILE", "value": "/var/run/switchyard/token"},
        // A team's own choice wins over the controller's.
        {"name": "SWITCHYARD_TASK", "value": "trainer"}
    ]);
    spec["containers"][0]["volumeMounts"] = json!([
        {"name": "switchyard-token", "mountPath": "/var/run/switchyard", "readOnly": true}
    ]);
    spec["volumes"] = json!([{"name": "switchyard-token", "secret": {
        "secretName": "switchyard-api-token", "items": [{"key": "token", "path": "token"}]}}]);
    JobBuilder::from_json(value)
}

/// Places job `job` (one `main` task, on n1), expecting its pod to be created with
/// `pod_spec` (matched as the scripted server matches bodies: every key given, arrays
/// whole).
async fn placed_with(job: &JobBuilder, pod_spec: serde_json::Value) {
    let placed = job.clone_with(TrainingJobStatus::default());
    let script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main").body(json!({"spec": pod_spec})),
        release("a-main-0-0", "n1"),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS).ok(placed.json()),
        event("Placed", "Place", "Normal"),
    ];
    let (client, server) = MockServer::start(script);
    place_main_on_n1(client, job).await.expect("placed");
    server.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_template_s_url_token_file_and_token_volume_reach_the_pod_as_written_beside_the_controller_s_variables()
 {
    placed_with(
        &job_pushing_over_http(),
        json!({
            "containers": [{
                "name": "trainer",
                "env": [
                    {"name": "SWITCHYARD_URL", "value": "http://switchyard.switchyard:80"},
                    {"name": "SWITCHYARD_TOKEN_FILE", "value": "/var/run/switchyard/token"},
                    {"name": "SWITCHYARD_TASK", "value": "trainer"},
                    {"name": "SWITCHYARD_JOB", "value": "a"},
                    {"name": "SWITCHYARD_ROLE", "value": "main"},
                    {"name": "SWITCHYARD_INDEX", "value": "0"},
                    {"name": "SWITCHYARD_MAIN_HOSTS", "value": "main-0.a"}
                ],
                "volumeMounts": [{"name": "switchyard-token",
                    "mountPath": "/var/run/switchyard", "readOnly": true}]
            }],
            "volumes": [{"name": "switchyard-token", "secret": {
                "secretName": "switchyard-api-token",
                "items": [{"key": "token", "path": "token"}]}}]
        }),
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_job_that_pushes_its_loss_gets_no_url_or_token_from_the_controller() {
    // The whole environment, compared as a whole: nothing names the API or a token.
    placed_with(
        &JobBuilder::new("a").push_progress(),
        json!({
            "containers": [{
                "name": "trainer",
                "env": [
                    {"name": "SWITCHYARD_JOB", "value": "a"},
                    {"name": "SWITCHYARD_ROLE", "value": "main"},
                    {"name": "SWITCHYARD_TASK", "value": "main-0"},
                    {"name": "SWITCHYARD_INDEX", "value": "0"},
                    {"name": "SWITCHYARD_MAIN_HOSTS", "value": "main-0.a"}
                ]
            }]
        }),
    )
    .await;
}
