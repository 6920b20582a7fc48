//! The processes of a job find each other by name: a headless Service per job, owned by
//! it, and each pod the hostname of its task under it, with the job's layout in its
//! environment.

use serde_json::json;
use switchyard_kube::{CheckpointMethod, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};

pub(crate) async fn pods_are_named_under_the_jobs_headless_service() -> Vec<Access> {
    let job = JobBuilder::new("a")
        .ps_worker(2, 1, 4)
        .checkpoint(CheckpointMethod::Signal, 10);
    let placed = job.clone_with(TrainingJobStatus::default());
    let hosts = json!([
        {"name": "SWITCHYARD_JOB", "value": "a"},
        {"name": "SWITCHYARD_ROLE", "value": "worker"},
        {"name": "SWITCHYARD_TASK", "value": "worker-1"},
        {"name": "SWITCHYARD_INDEX", "value": "1"},
        {"name": "SWITCHYARD_PS_HOSTS", "value": "ps-0.a"},
        {"name": "SWITCHYARD_WORKER_HOSTS", "value": "worker-0.a,worker-1.a"}
    ]);
    let mut script = vec![
        // The Service is there already (a controller placed the job before): it is
        // read to check it is this job's, and not created again.
        Expect::post(SERVICES).fail(409, "AlreadyExists", "services \"a\" already exists"),
        Expect::get(&format!("{SERVICES}/a")).ok(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "a", "namespace": NS,
                "ownerReferences": [{"apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                    "name": "a", "uid": "uid-a", "controller": true}]}})),
        // So is its PodDisruptionBudget.
        Expect::post(BUDGETS).fail(
            409,
            "AlreadyExists",
            "poddisruptionbudgets.policy \"a\" already exists",
        ),
        Expect::get(&format!("{BUDGETS}/a")).ok(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "a", "namespace": NS,
                "ownerReferences": [{"apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                    "name": "a", "uid": "uid-a", "controller": true}]}}),
        ),
        create("a-worker-1-0", "a", "worker-1", "worker").body(json!({
            "spec": {"hostname": "worker-1", "subdomain": "a",
                "containers": [{"name": "trainer", "env": hosts}]}})),
        release("a-worker-1-0", "n1"),
    ];
    script.push(Expect::get(STATUS).ok(job.json()));
    script.push(Expect::put(STATUS).ok(placed.json()));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &[("worker-1".to_string(), "n1".to_string())],
            "fits",
            at(0),
        )
        .await
        .expect("placed");
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn each_pod_is_its_task_under_the_jobs_headless_service_with_the_jobs_layout_in_its_environment()
 {
    pods_are_named_under_the_jobs_headless_service().await;
}
