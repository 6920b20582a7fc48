//! What the caches keep of the queue's pods ([`trim_pod`]): what the crate's own pods
//! keep, plus the owners' labels, the controller's annotations and the pod's scheduling
//! rules. It owns that list of fields; it must not decide anything from them.

use k8s_openapi::api::core::v1::Pod;

use super::job;

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
