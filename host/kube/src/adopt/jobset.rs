//! Adopting a JobSet (`jobset.x-k8s.io/v1alpha2`), and with it a Kubeflow Trainer v2
//! TrainJob (which runs through the JobSet it creates): each replicated job is a role,
//! each pod a task named by its role, its job's index and its completion index; the
//! gang is the sum over the replicated jobs of `replicas` times the jobs' parallelism.
//! An evicted pod is recreated without failing the JobSet when the child Jobs ignore
//! `DisruptionTarget` in their `podFailurePolicy`, or when the JobSet's
//! `failurePolicy.maxRestarts` has restarts left (the whole set is recreated). Label
//! keys from the JobSet controller (`jobset.sigs.k8s.io/*`). It reads JobSets and their
//! pods; it must not write either.

use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::shape::{self, MAX_GANG, Shape};
use super::{elastic, job, weight};

/// Label on a JobSet's pods: the JobSet's name.
pub(crate) const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// Label on a JobSet's pods: the JobSet's UID.
pub(crate) const JOBSET_UID_LABEL: &str = "jobset.sigs.k8s.io/jobset-uid";
/// Label on a JobSet's pods: the replicated job (the role).
pub(crate) const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// Label on a JobSet's pods: which of the replicated job's Jobs it belongs to.
pub(crate) const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";

/// What a JobSet's spec and status say about its policy job.
pub(crate) fn shape(jobset: &DynamicObject) -> Shape {
    let data = &jobset.data;
    let replicated = data["spec"]["replicatedJobs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let gang = replicated
        .iter()
        .map(|r| {
            let spec = &r["template"]["spec"];
            let parallelism = shape::count(&spec["parallelism"], 1);
            let per_job = match spec["completions"].is_null() {
                true => parallelism,
                false => parallelism.min(shape::count(&spec["completions"], 1)),
            };
            u64::from(shape::count(&r["replicas"], 1)) * u64::from(per_job)
        })
        .sum::<u64>()
        .min(u64::from(MAX_GANG)) as u32;
    let children_ignore = !replicated.is_empty()
        && replicated
            .iter()
            .all(|r| shape::ignores_disruption(job::template_policy(&r["template"])));
    let status = &data["status"];
    let restarts = match status["restartsCountTowardsMax"].is_null() {
        true => &status["restarts"],
        false => &status["restartsCountTowardsMax"],
    };
    let max_restarts = &data["spec"]["failurePolicy"]["maxRestarts"];
    let restarts_left =
        !max_restarts.is_null() && shape::count(max_restarts, 0) > shape::count(restarts, 0);
    Shape {
        gang,
        checkpointable: children_ignore || restarts_left,
        finished: status["terminalState"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
            || shape::has_condition(&status["conditions"], &["Completed", "Failed"]),
        created: shape::created(&jobset.metadata),
        cpu: replicated
            .iter()
            .filter_map(|r| {
                let cpu = weight::template_cpu(&r["template"]["spec"]["template"], None)?;
                Some((r["name"].as_str()?.to_string(), cpu))
            })
            .collect(),
        scaling: elastic::fixed("JobSet"),
    }
}

/// A JobSet pod's role (its replicated job) and task
/// (`<role>-<job index>-<completion index>`, or the pod's name without an index).
pub(crate) fn member(pod: &Pod) -> Option<(String, String)> {
    let labels = pod.metadata.labels.as_ref()?;
    let role = labels.get(REPLICATED_JOB_LABEL)?.clone();
    let task = match (labels.get(JOB_INDEX_LABEL), job::completion_index(pod)) {
        (Some(j), Some(c)) => format!("{role}-{j}-{c}"),
        _ => pod.metadata.name.clone().unwrap_or_default(),
    };
    Some((role, task))
}

/// Keeps of a JobSet what [`shape`] reads.
pub(crate) fn trim(jobset: &mut DynamicObject) {
    shape::trim_meta(&mut jobset.metadata);
    let data = &jobset.data;
    let replicated: Vec<Value> = data["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let spec = &r["template"]["spec"];
            json!({"name": r["name"], "replicas": r["replicas"], "template": {"spec": {
                "parallelism": spec["parallelism"], "completions": spec["completions"],
                "podFailurePolicy": spec["podFailurePolicy"],
                "template": weight::trim_template(&spec["template"])}}})
        })
        .collect();
    let status = &data["status"];
    let conditions: Vec<Value> = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| json!({"type": c["type"], "status": c["status"]}))
        .collect();
    jobset.data = json!({
        "spec": {"replicatedJobs": replicated, "failurePolicy": {"maxRestarts": data["spec"]["failurePolicy"]["maxRestarts"]}},
        "status": {"restarts": status["restarts"], "restartsCountTowardsMax": status["restartsCountTowardsMax"],
            "terminalState": status["terminalState"], "conditions": conditions},
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobset(spec: Value, status: Value) -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "js", "namespace": "ml"}, "spec": spec, "status": status}),
        )
        .unwrap()
    }

    fn replicated(name: &str, replicas: u32, parallelism: u32, ignore: bool) -> Value {
        let mut spec = json!({"parallelism": parallelism, "completions": parallelism,
            "completionMode": "Indexed", "template": {"spec": {"containers": []}}});
        if ignore {
            spec["podFailurePolicy"] = json!({"rules": [{"action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget"}]}]});
        }
        json!({"name": name, "replicas": replicas, "template": {"spec": spec}})
    }

    #[test]
    fn the_gang_is_every_replicated_job_s_replicas_times_their_parallelism() {
        let js = jobset(
            json!({"replicatedJobs": [replicated("driver", 1, 1, true),
            replicated("workers", 2, 3, true)]}),
            Value::Null,
        );
        let s = shape(&js);
        assert_eq!(s.gang, 1 + 2 * 3);
        assert!(s.checkpointable);
        let mut trimmed = js.clone();
        trim(&mut trimmed);
        assert_eq!(shape(&trimmed), s, "trimming keeps what the shape reads");
    }

    #[test]
    fn a_jobset_is_checkpointable_while_it_has_restarts_left_or_its_jobs_ignore_disruptions() {
        let counting = |max: Value, restarts: u32| {
            shape(&jobset(
                json!({"replicatedJobs": [replicated("w", 1, 2, false)],
                "failurePolicy": {"maxRestarts": max}}),
                json!({"restarts": restarts}),
            ))
            .checkpointable
        };
        assert!(counting(json!(3), 2));
        assert!(!counting(json!(3), 3), "no restart left");
        assert!(
            !counting(Value::Null, 0),
            "no failure policy: a failed Job fails the set"
        );
    }

    #[test]
    fn a_jobset_with_a_terminal_state_is_finished() {
        let js = jobset(
            json!({"replicatedJobs": []}),
            json!({"terminalState": "Completed"}),
        );
        assert!(shape(&js).finished);
    }
}
