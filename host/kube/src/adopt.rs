//! Adopting the training jobs teams already run: batch Jobs, JobSets (and Kubeflow
//! Trainer v2 TrainJobs through their JobSets) and Kubeflow PyTorchJobs. A team keeps
//! its manifest and its operator and adds two lines to the pod template: the scheduling
//! gate [`crate::PLACEMENT_GATE`] and the label [`crate::QUEUE_LABEL`] naming this
//! instance's queue. The owner's operator creates the pods, held by the gate; the
//! controller groups them by owner into one policy job (id `<kind>:<namespace>/<name>`),
//! reads its gang and roles from the owner's spec and labels, and places it through the
//! same gate-and-pin release as a TrainingJob's pods. A preemption or a move asks the
//! pods to checkpoint, waits their grace, and evicts them (the Eviction API, which
//! honours PodDisruptionBudgets and marks the pod `DisruptionTarget`); the owner makes
//! new gated pods, and the policy places them again.
//!
//! - `names`: the kinds ([`Integration`]), the queue's rules, the job ids.
//! - `shape`, `job`, `jobset`, `pytorchjob`: what each kind's spec, status and pod
//!   labels say (gang, roles, tasks, whether an eviction is survived, finished).
//! - `caches`: the owners' and the queue's pods' reflectors ([`Adoption`]).
//! - `group`: the queue's pods grouped into adopted jobs, and the gated pods no enabled
//!   kind owns.
//! - `view`: an adopted job as the policy sees it.
//!
//! It reads owners and pods; it must never create, patch or delete an owner, nor delete
//! a pod (the acting is in `crate::act`, eviction only).

mod caches;
mod group;
mod job;
mod jobset;
mod names;
mod pytorchjob;
mod shape;
mod view;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ObjectMeta;

pub use self::caches::Adoption;
pub(crate) use self::group::{AdoptedJob, Unadoptable};
pub(crate) use self::names::parse_adopted_id;
pub use self::names::{Integration, InvalidQueue, UnknownIntegration, valid_queue};

/// When an object was created, Unix seconds (0 when it does not say).
fn created(meta: &ObjectMeta) -> f64 {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond() as f64 / 1000.0)
        .unwrap_or(0.0)
}

/// Keeps of an owner's metadata its identity and age.
fn trim_meta(meta: &mut ObjectMeta) {
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        creation_timestamp: meta.creation_timestamp.take(),
        deletion_timestamp: meta.deletion_timestamp.take(),
        ..ObjectMeta::default()
    };
}

/// Label keys of an adopted pod that are read: the controller's own and each owner's.
const POD_LABEL_PREFIXES: [&str; 4] = [
    "switchyard.dev/",
    "batch.kubernetes.io/",
    "jobset.sigs.k8s.io/",
    "training.kubeflow.org/",
];

/// Keeps of an adopted pod what the controller reads: what [`crate::trim_pod`] keeps of
/// its own pods, plus the owners' labels, the `switchyard.dev/` annotations (loss
/// pattern, checkpoint grace) and the completion index, and the scheduling rules of its
/// spec (node selector, affinity, tolerations), which are the policy's hints for it.
pub fn trim_pod(pod: &mut Pod) {
    let labels = pod.metadata.labels.take().map(|mut l| {
        l.retain(|k, _| POD_LABEL_PREFIXES.iter().any(|p| k.starts_with(p)));
        l
    });
    let annotations = pod.metadata.annotations.take().map(|mut a| {
        a.retain(|k, _| k.starts_with("switchyard.dev/") || k == job::COMPLETION_INDEX);
        a
    });
    let rules = pod.spec.as_ref().map(|s| {
        (
            s.node_selector.clone(),
            s.affinity.clone(),
            s.tolerations.clone(),
            s.priority,
        )
    });
    crate::trim::pod(pod);
    pod.metadata.labels = labels.filter(|l| !l.is_empty());
    pod.metadata.annotations = annotations.filter(|a| !a.is_empty());
    if let (Some(spec), Some((selector, affinity, tolerations, priority))) =
        (pod.spec.as_mut(), rules)
    {
        spec.node_selector = selector;
        spec.affinity = affinity;
        spec.tolerations = tolerations;
        spec.priority = priority;
    }
}
