//! Adopting a Kubeflow training operator v1 PyTorchJob (`kubeflow.org/v1`): each replica
//! type is a role (`master`, `worker`, lowercase as the operator labels them), each pod
//! a task named by its role and replica index; the gang is the sum of the replica
//! specs' `replicas`. An evicted pod is recreated when every replica spec's
//! `restartPolicy` is `OnFailure`, `ExitCode` or `Always`. An `elasticPolicy` makes its
//! workers scalable ([`super::elastic`]); the CPU weight resizes the `pytorch`
//! container. Label keys
//! from the training operator (`training.kubeflow.org/*`). It reads PyTorchJobs and
//! their pods; it must not write either.

use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use serde_json::{Map, Value, json};

use super::shape::{self, MAX_GANG, Shape};
use super::{elastic, weight};

/// Label on the operator's pods: the replica type, lowercase (the role).
pub(crate) const REPLICA_TYPE_LABEL: &str = "training.kubeflow.org/replica-type";
/// Label on the operator's pods: the replica's index within its type.
pub(crate) const REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";

/// The container the training operator runs the training in (its default container
/// name): the one a CPU weight resizes.
const TRAINING_CONTAINER: &str = "pytorch";

/// Restart policies under which the operator makes a new pod for one that was evicted.
const RECREATING: [&str; 3] = ["OnFailure", "ExitCode", "Always"];

/// What a PyTorchJob's spec and status say about its policy job.
pub(crate) fn shape(job: &DynamicObject) -> Shape {
    let data = &job.data;
    let specs: Vec<&Value> = data["spec"]["pytorchReplicaSpecs"]
        .as_object()
        .map(|m| m.values().collect())
        .unwrap_or_default();
    let gang = specs
        .iter()
        .map(|s| u64::from(shape::count(&s["replicas"], 1)))
        .sum::<u64>()
        .min(u64::from(MAX_GANG)) as u32;
    Shape {
        gang,
        checkpointable: !specs.is_empty()
            && specs.iter().all(|s| {
                // The operator defaults a replica spec's policy to `OnFailure` when it
                // reconciles; the stored object may leave it out.
                RECREATING.contains(&s["restartPolicy"].as_str().unwrap_or("OnFailure"))
            }),
        finished: shape::has_condition(&data["status"]["conditions"], &["Succeeded", "Failed"]),
        created: shape::created(&job.metadata),
        cpu: data["spec"]["pytorchReplicaSpecs"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(kind, s)| {
                let cpu = weight::template_cpu(&s["template"], Some(TRAINING_CONTAINER))?;
                Some((kind.to_ascii_lowercase(), cpu))
            })
            .collect(),
        scaling: elastic::pytorchjob_scaling(data, job.metadata.resource_version.as_ref()),
    }
}

/// A PyTorchJob pod's role (its replica type) and task (`<role>-<replica index>`).
pub(crate) fn member(pod: &Pod) -> Option<(String, String)> {
    let labels = pod.metadata.labels.as_ref()?;
    let role = labels.get(REPLICA_TYPE_LABEL)?.to_ascii_lowercase();
    let task = match labels.get(REPLICA_INDEX_LABEL) {
        Some(index) => format!("{role}-{index}"),
        None => pod.metadata.name.clone().unwrap_or_default(),
    };
    Some((role, task))
}

/// Keeps of a PyTorchJob what [`shape`] reads.
pub(crate) fn trim(job: &mut DynamicObject) {
    shape::trim_meta(&mut job.metadata);
    let data = &job.data;
    let specs: Map<String, Value> = data["spec"]["pytorchReplicaSpecs"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, s)| {
            (
                k.clone(),
                json!({"replicas": s["replicas"], "restartPolicy": s["restartPolicy"],
                    "template": weight::trim_template(&s["template"])}),
            )
        })
        .collect();
    let conditions: Vec<Value> = data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"type": c["type"], "status": c["status"]}))
        .collect();
    let policy = elastic::trim_policy(&data["spec"]["elasticPolicy"]);
    job.data = json!({"spec": {"pytorchReplicaSpecs": specs, "elasticPolicy": policy},
        "status": {"conditions": conditions}});
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pytorchjob(master: &str, worker: &str, workers: u32) -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": "ml"},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": master, "template": {"spec": {"containers": []}}},
                "Worker": {"replicas": workers, "restartPolicy": worker, "template": {"spec": {"containers": []}}}}}}))
        .unwrap()
    }

    #[test]
    fn the_gang_is_every_replica_and_eviction_is_survived_only_when_every_type_restarts() {
        let s = shape(&pytorchjob("OnFailure", "ExitCode", 4));
        assert_eq!(s.gang, 5);
        assert!(s.checkpointable);
        assert!(!shape(&pytorchjob("Never", "OnFailure", 4)).checkpointable);
        let mut defaulted = pytorchjob("OnFailure", "OnFailure", 4);
        defaulted.data["spec"]["pytorchReplicaSpecs"]["Worker"]
            .as_object_mut()
            .unwrap()
            .remove("restartPolicy");
        assert!(
            shape(&defaulted).checkpointable,
            "left out, the operator's default OnFailure"
        );
        let mut trimmed = pytorchjob("OnFailure", "ExitCode", 4);
        trim(&mut trimmed);
        assert_eq!(shape(&trimmed), s);
    }
}
