//! What an owner's spec and status say about the policy job made of its pods
//! ([`Shape`]): how many pods make the gang, whether the owner recreates an evicted pod
//! without failing (so the policy may preempt or move it), whether it has finished,
//! each role's CPU request (a weight's base) and whether it may be scaled. The
//! per-kind readers are in the sibling modules; this one holds what they share. It reads
//! owners; it must not write one.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use serde_json::Value;

/// The most pods one adopted job may have: the host's bound on tasks per job.
pub(crate) const MAX_GANG: u32 = 10_000;

/// What an owner's spec and status say about its policy job.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Shape {
    /// How many pods run at once: the gang, placed all together.
    pub(crate) gang: u32,
    /// The owner recreates an evicted pod without counting it as a failure, so a
    /// preemption or a move costs the job only the work since its checkpoint.
    pub(crate) checkpointable: bool,
    /// The owner has finished (succeeded or failed): no more pods to place.
    pub(crate) finished: bool,
    /// When the owner was created, Unix seconds (the job's submission time).
    pub(crate) created: f64,
    /// Per role, what its pod template says about its training container's CPU (roles
    /// whose template has no container are absent).
    pub(crate) cpu: BTreeMap<String, TemplateCpu>,
    /// The bounds the policy may scale it within, or why its replicas are fixed.
    pub(crate) scaling: Result<Elastic, String>,
}

/// What a role's pod template says about resizing its training container's CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TemplateCpu {
    /// The container resized: the one named as the owner's operator names its training
    /// container (a PyTorchJob's `pytorch`), else the first.
    pub(crate) container: String,
    /// Its CPU request in the template, millicores; 0 when it requests none.
    pub(crate) millis: u64,
    /// Its `resizePolicy` for `cpu` is `RestartContainer`: the kubelet would restart
    /// the training process to resize it.
    pub(crate) restarts: bool,
}

/// The replica bounds an elastic owner lets the policy move its scalable role within
/// (`super::elastic` reads them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Elastic {
    /// The replicas the owner's spec asks for now.
    pub(crate) replicas: u32,
    /// `elasticPolicy.minReplicas`, at least 1: the first worker hosts the rendezvous.
    pub(crate) min: u32,
    /// `elasticPolicy.maxReplicas`.
    pub(crate) max: u32,
    /// The owner's resourceVersion these were read at: a scale is written only onto
    /// the owner as it was read.
    pub(crate) resource_version: Option<String>,
}

/// A count read from an owner's JSON (`replicas`, `parallelism`): `default` when
/// absent, clamped to `0..=MAX_GANG` whatever the object says.
pub(crate) fn count(value: &Value, default: u32) -> u32 {
    match value.as_i64() {
        Some(n) => n.clamp(0, i64::from(MAX_GANG)) as u32,
        None => default,
    }
}

/// Whether a batch Job with `policy` (its `podFailurePolicy`, as JSON) ignores a pod
/// that was disrupted (evicted, preempted): the first rule naming the pod condition
/// `DisruptionTarget` (status `True`) has the action `Ignore`. Such a pod counts
/// neither against `backoffLimit` nor as failed; the Job makes a new one.
pub(crate) fn ignores_disruption(policy: &Value) -> bool {
    let Some(rules) = policy["rules"].as_array() else {
        return false;
    };
    let names_disruption = |rule: &&Value| {
        rule["onPodConditions"].as_array().is_some_and(|patterns| {
            patterns.iter().any(|p| {
                p["type"] == "DisruptionTarget" && p["status"].as_str().is_none_or(|s| s == "True")
            })
        })
    };
    rules
        .iter()
        .find(names_disruption)
        .is_some_and(|rule| rule["action"] == "Ignore")
}

/// Whether `conditions` (a status's list, as JSON) holds one of `types` with status
/// `True`.
pub(crate) fn has_condition(conditions: &Value, types: &[&str]) -> bool {
    conditions.as_array().is_some_and(|list| {
        list.iter().any(|c| {
            c["status"] == "True" && c["type"].as_str().is_some_and(|t| types.contains(&t))
        })
    })
}

/// When an object was created, Unix seconds (0 when it does not say).
pub(crate) fn created(meta: &ObjectMeta) -> f64 {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond() as f64 / 1000.0)
        .unwrap_or(0.0)
}

/// Keeps of an owner's metadata its identity and age.
pub(crate) fn trim_meta(meta: &mut ObjectMeta) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_ignore_rule_on_disruption_target_makes_evictions_free() {
        let ignore = json!({"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]});
        assert!(ignore_disruption_is(&ignore, true));
        let count = json!({"rules": [{"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]});
        assert!(
            ignore_disruption_is(&count, false),
            "the first matching rule decides"
        );
        let other =
            json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "ConfigIssue"}]}]});
        assert!(ignore_disruption_is(&other, false));
        let falsy = json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]}]});
        assert!(ignore_disruption_is(&falsy, false));
        assert!(ignore_disruption_is(&Value::Null, false));
    }

    fn ignore_disruption_is(policy: &Value, expected: bool) -> bool {
        ignores_disruption(policy) == expected
    }

    #[test]
    fn counts_are_clamped_whatever_the_object_says() {
        assert_eq!(count(&json!(4), 1), 4);
        assert_eq!(count(&json!(-3), 1), 0);
        assert_eq!(count(&json!(1_000_000_000_000i64), 1), MAX_GANG);
        assert_eq!(count(&Value::Null, 1), 1);
        assert_eq!(count(&json!("4"), 1), 1, "not a number: the default");
    }
}
