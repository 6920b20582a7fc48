//! Adopting a `batch/v1` Job: one task per pod, named by its completion index when the
//! Job is indexed; the gang is `parallelism` (no more than the completions still to
//! come); evicted pods are recreated without failing the Job when its
//! `podFailurePolicy` ignores `DisruptionTarget`. Label keys from the Job controller
//! (`batch.kubernetes.io/*`). It reads Jobs and their pods; it must not write either.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::elastic;
use super::shape::{self, Shape};
use super::weight;

/// Label and annotation of an indexed Job's pod: its completion index.
pub(crate) const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The one role of a Job's pods.
pub(crate) const ROLE: &str = "job";

/// What `job`'s spec and status say about its policy job.
pub(crate) fn shape(job: &Job) -> Shape {
    let spec = job.spec.as_ref();
    let status = job.status.as_ref();
    let parallelism = shape::count(&json!(spec.and_then(|s| s.parallelism)), 1);
    let succeeded = status.and_then(|s| s.succeeded).unwrap_or(0);
    let gang = match spec.and_then(|s| s.completions) {
        Some(completions) => parallelism.min(shape::count(&json!(completions - succeeded), 0)),
        None => parallelism,
    };
    let policy = spec
        .and_then(|s| s.pod_failure_policy.as_ref())
        .map(|p| serde_json::to_value(p).unwrap_or_default())
        .unwrap_or_default();
    let conditions = status
        .and_then(|s| s.conditions.as_ref())
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .unwrap_or_default();
    Shape {
        gang,
        checkpointable: shape::ignores_disruption(&policy),
        // `FailureTarget` and `SuccessCriteriaMet` come first: the pods are being
        // stopped, and nothing more is to be placed.
        finished: shape::has_condition(
            &conditions,
            &["Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"],
        ),
        created: shape::created(&job.metadata),
        cpu: spec
            .and_then(|s| serde_json::to_value(&s.template).ok())
            .and_then(|t| weight::template_cpu(&t, None))
            .map(|cpu| (ROLE.to_string(), cpu))
            .into_iter()
            .collect(),
        scaling: elastic::fixed("Job"),
    }
}

/// A Job pod's task: `job-<completion index>`, or the pod's name when the Job is not
/// indexed (its pods are interchangeable).
pub(crate) fn task(pod: &Pod) -> String {
    match completion_index(pod) {
        Some(index) => format!("{ROLE}-{index}"),
        None => pod.metadata.name.clone().unwrap_or_default(),
    }
}

/// The completion index of an indexed Job's pod (its label, else its annotation).
pub(crate) fn completion_index(pod: &Pod) -> Option<&str> {
    let meta = &pod.metadata;
    meta.labels
        .as_ref()
        .and_then(|l| l.get(COMPLETION_INDEX))
        .or_else(|| meta.annotations.as_ref()?.get(COMPLETION_INDEX))
        .map(String::as_str)
        .filter(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

/// Keeps of a Job what [`shape`] reads: its identity, and of its spec and status only
/// the counts, the failure policy, the template's CPU requests and the conditions'
/// types and statuses.
pub(crate) fn trim(job: &mut Job) {
    shape::trim_meta(&mut job.metadata);
    if let Some(spec) = job.spec.as_mut() {
        let template = serde_json::to_value(&spec.template).unwrap_or_default();
        spec.template =
            serde_json::from_value(weight::trim_template(&template)).unwrap_or_default();
        spec.selector = None;
    }
    if let Some(status) = job.status.take() {
        let conditions = status.conditions.map(|list| {
            list.into_iter()
                .map(|c| k8s_openapi::api::batch::v1::JobCondition {
                    status: c.status,
                    type_: c.type_,
                    ..Default::default()
                })
                .collect()
        });
        job.status = Some(k8s_openapi::api::batch::v1::JobStatus {
            conditions,
            succeeded: status.succeeded,
            ..Default::default()
        });
    }
}

/// The `podFailurePolicy` of a Job template inside another object (a JobSet's
/// replicated job), as JSON.
pub(crate) fn template_policy(job_template: &Value) -> &Value {
    &job_template["spec"]["podFailurePolicy"]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(value: Value) -> Job {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_indexed_job_s_gang_is_its_parallelism_bounded_by_the_completions_left() {
        let eight = job(
            json!({"metadata": {"name": "j"}, "spec": {"parallelism": 8, "completions": 8,
            "completionMode": "Indexed", "template": {}}}),
        );
        assert_eq!(shape(&eight).gang, 8);
        let tail = job(
            json!({"metadata": {"name": "j"}, "spec": {"parallelism": 8, "completions": 10,
            "template": {}}, "status": {"succeeded": 8}}),
        );
        assert_eq!(shape(&tail).gang, 2, "two completions left");
        let one = job(json!({"metadata": {"name": "j"}, "spec": {"template": {}}}));
        assert_eq!(shape(&one).gang, 1);
    }

    #[test]
    fn a_job_is_checkpointable_only_when_it_ignores_disrupted_pods() {
        let ignoring = job(json!({"metadata": {"name": "j"}, "spec": {"template": {},
            "podFailurePolicy": {"rules": [{"action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}}}));
        assert!(shape(&ignoring).checkpointable);
        let plain =
            job(json!({"metadata": {"name": "j"}, "spec": {"backoffLimit": 100, "template": {}}}));
        assert!(
            !shape(&plain).checkpointable,
            "back-off headroom alone is not enough"
        );
    }

    #[test]
    fn a_complete_or_failing_job_is_finished() {
        let done = job(json!({"metadata": {"name": "j"}, "spec": {"template": {}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}));
        assert!(shape(&done).finished);
        let failing = job(json!({"metadata": {"name": "j"}, "spec": {"template": {}},
            "status": {"conditions": [{"type": "FailureTarget", "status": "True"}]}}));
        assert!(shape(&failing).finished);
    }
}
