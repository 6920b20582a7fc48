//! Writes of the job's own objects: a status update that meets a 409 conflict, and the
//! policy's labels as one merge patch.
//!
//! Each scenario drives the real backend code against the scripted API server and returns
//! what it accessed, so the RBAC test can check `deploy/rbac.yaml` against the union of
//! them. Tests run with paused time, so grace periods and back-off pass at once while
//! their order is still checked.

use std::collections::BTreeMap;

use serde_json::json;
use switchyard_kube::{CheckpointMethod, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};

pub(crate) async fn a_status_update_recovers_from_a_409_conflict() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 10);
    let mut newer = job.json();
    newer["metadata"]["resourceVersion"] = json!("6");
    let labelled = json!({"status": {"policyLabels": {"category": "CC"}}});
    let (client, server) = MockServer::start(vec![
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(json!({"metadata": {"resourceVersion": "5"}}))
            .fail(409, "Conflict", "Operation cannot be fulfilled on trainingjobs.switchyard.dev \"a\": the object has been modified"),
        Expect::get(STATUS).ok(newer.clone()),
        Expect::put(STATUS).body(json!({"metadata": {"resourceVersion": "6"}, "status": labelled["status"].clone()})).ok(newer),
    ]);
    actor(client)
        .update_status(&job.build(), |s| {
            s.policy_labels = BTreeMap::from([("category".to_string(), "CC".to_string())])
        })
        .await
        .expect("the retry succeeds");
    server.finish().await
}

pub(crate) async fn policy_labels_are_one_merge_patch() -> Vec<Access> {
    let job = running_single(CheckpointMethod::Signal, 10).with_status(TrainingJobStatus {
        policy_labels: BTreeMap::from([
            ("category".to_string(), "PC".to_string()),
            ("old".to_string(), "x".to_string()),
        ]),
        ..TrainingJobStatus::default()
    });
    let (client, server) = MockServer::start(vec![
        Expect::patch(STATUS)
            .body(json!({"status": {"policyLabels": {"category": "CC", "old": null}}}))
            .ok(job.json()),
    ]);
    let labels = BTreeMap::from([("category".to_string(), "CC".to_string())]);
    actor(client)
        .set_policy_labels(&job.build(), labels)
        .await
        .expect("the labels are patched");
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn the_policys_labels_are_written_as_one_merge_patch_that_removes_dropped_keys() {
    policy_labels_are_one_merge_patch().await;
}

#[tokio::test(start_paused = true)]
async fn a_conflicting_status_write_is_read_again_and_retried() {
    a_status_update_recovers_from_a_409_conflict().await;
}
