//! Test fixtures: builders for TrainingJobs, pods and nodes, and the JSON the scripted
//! API server answers with.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::crd::{Checkpoint, CheckpointMethod, TrainingJob, TrainingJobStatus};

/// Namespace of every fixture.
pub const NS: &str = "ml";

/// A TrainingJob builder: `JobBuilder::new("a").worker(2, 1, 4).checkpoint(..)`.
pub struct JobBuilder {
    value: Value,
}

impl JobBuilder {
    /// A job with one `main` role of one replica requesting 2 CPUs and 4 GiB.
    pub fn new(name: &str) -> Self {
        let value = json!({
            "apiVersion": "switchyard.dev/v1alpha1",
            "kind": "TrainingJob",
            "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
                "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "roles": [role("main", 1, None)],
                "progress": {"log": {"pattern": r"loss=(?P<value>[0-9.eE+-]+)", "container": "trainer"}},
            }
        });
        Self { value }
    }

    /// A builder starting from a job's JSON.
    pub fn from_json(value: Value) -> Self {
        Self { value }
    }

    /// Replaces the roles with a `ps` (one replica) and a scalable `worker` role.
    pub fn ps_worker(mut self, workers: u32, min: u32, max: u32) -> Self {
        self.value["spec"]["roles"] = json!([
            role("ps", 1, None),
            role("worker", workers, Some((min, max)))
        ]);
        self
    }

    /// Adds checkpoint support.
    pub fn checkpoint(mut self, method: CheckpointMethod, grace: u32) -> Self {
        self.value["spec"]["checkpoint"] = serde_json::to_value(Checkpoint {
            method,
            grace_period_seconds: grace,
        })
        .unwrap();
        self
    }

    /// Progress by pushes to the API only (no log to follow).
    pub fn push_progress(mut self) -> Self {
        self.value["spec"]["progress"] = json!({"push": true});
        self
    }

    /// Sets the status.
    pub fn status(mut self, status: TrainingJobStatus) -> Self {
        self.value["status"] = serde_json::to_value(status).unwrap();
        self
    }

    /// The job as the API server would return it.
    pub fn json(&self) -> Value {
        self.value.clone()
    }

    /// The typed job.
    pub fn build(&self) -> TrainingJob {
        serde_json::from_value(self.value.clone()).expect("a valid TrainingJob fixture")
    }
}

fn role(name: &str, replicas: u32, scale: Option<(u32, u32)>) -> Value {
    let mut r = json!({
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [{
            "name": "trainer", "image": "ghcr.io/example/resnet:1",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}
        }]}}
    });
    if let Some((min, max)) = scale {
        r["scalable"] = json!(true);
        r["minReplicas"] = json!(min);
        r["maxReplicas"] = json!(max);
    }
    r
}

/// A controller pod of `job` running `task` on `node` (`None`: not bound).
pub fn pod(job: &str, task: &str, generation: u32, node: Option<&str>) -> Pod {
    let role = task.rsplit_once('-').unwrap().0;
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{job}-{task}-{generation}"), "namespace": NS,
            "labels": {"switchyard.dev/job": job, "switchyard.dev/task": task, "switchyard.dev/role": role}},
        "spec": {"schedulerName": "switchyard", "nodeName": node,
            "containers": [{"name": "trainer", "image": "ghcr.io/example/resnet:1",
                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]},
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}
    }))
    .unwrap()
}

/// `pod` being deleted: the API server has set its deletion timestamp and the kubelet
/// is stopping it.
pub fn terminating(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    pod
}

/// A ready node with `cpus` CPUs and 64 GiB.
pub fn node(name: &str, cpus: u32) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpus.to_string(), "memory": "64Gi"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

/// What the API server answers to a created or deleted pod.
pub fn pod_json(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}})
}

/// What the API server answers to a binding.
pub fn bound() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})
}

/// What the API server answers to a created Event.
pub fn event_json() -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e", "namespace": NS}, "eventTime": "2026-01-01T00:00:00.000000Z"})
}
