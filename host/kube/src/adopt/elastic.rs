//! Which adopted jobs the policy may scale ([`Elastic`]), and the replica bounds it
//! sees. Only a Kubeflow PyTorchJob whose `spec.elasticPolicy` lets its `Worker`
//! replicas move (`minReplicas` below `maxReplicas`, no `metrics`, which would make the
//! training operator's HorizontalPodAutoscaler scale it as well) is elastic: its
//! workers are scaled through the PyTorchJob's own `scale` subresource, and the
//! operator makes or deletes the worker pods. Every other adopted job's replicas are
//! fixed at what runs, and why is kept for the refusal. It reads owners and pods; it
//! must not write.

use std::collections::BTreeMap;

use serde_json::Value;
use switchyard_core as model;

use super::shape::{self, Elastic, MAX_GANG, Shape};

/// The role an elastic PyTorchJob scales: its `Worker` replicas (the path its CRD's
/// `scale` subresource writes, `.spec.pytorchReplicaSpecs.Worker.replicas`).
pub(crate) const ELASTIC_ROLE: &str = "worker";

/// Whether a PyTorchJob (its JSON `data`, `resource_version`) is elastic, and if not,
/// why its replicas are fixed.
pub(crate) fn pytorchjob_scaling(
    data: &Value,
    resource_version: Option<&String>,
) -> Result<Elastic, String> {
    let policy = &data["spec"]["elasticPolicy"];
    if !policy.is_object() {
        return Err("it has no spec.elasticPolicy, so its replicas are fixed by its spec".into());
    }
    let worker = &data["spec"]["pytorchReplicaSpecs"]["Worker"];
    if !worker.is_object() {
        return Err(
            "it has no `Worker` replica spec, the replicas its scale subresource sets".into(),
        );
    }
    if policy["metrics"].as_array().is_some_and(|m| !m.is_empty()) {
        return Err(
            "its elasticPolicy.metrics make the training operator scale it with a HorizontalPodAutoscaler, which the policy does not overrule".into(),
        );
    }
    let replicas = shape::count(&worker["replicas"], 1);
    let bound = |key: &str| {
        policy[key]
            .as_i64()
            .map(|n| n.clamp(0, i64::from(MAX_GANG)) as u32)
    };
    // The operator's defaults: a bound left out is the other one; both left out, the
    // Worker replicas.
    let (min, max) = match (bound("minReplicas"), bound("maxReplicas")) {
        (Some(min), Some(max)) => (min, max),
        (Some(one), None) | (None, Some(one)) => (one, one),
        (None, None) => (replicas, replicas),
    };
    let min = min.max(1);
    if min >= max {
        return Err(format!(
            "its elasticPolicy allows {min} to {max} workers, so there is nothing to scale"
        ));
    }
    Ok(Elastic {
        replicas,
        min,
        max,
        resource_version: resource_version.cloned(),
    })
}

/// Why the replicas of an owner of kind `kind` other than a PyTorchJob are fixed.
pub(crate) fn fixed(kind: &str) -> Result<Elastic, String> {
    Err(format!(
        "a {kind}'s replicas are fixed by its spec (only a PyTorchJob with an elasticPolicy is scaled)"
    ))
}

/// Keeps of an `elasticPolicy` (JSON) what [`pytorchjob_scaling`] reads: the bounds, and
/// how many metrics it has.
pub(crate) fn trim_policy(policy: &Value) -> Value {
    if !policy.is_object() {
        return Value::Null;
    }
    let metrics = policy["metrics"].as_array().map_or(0, Vec::len);
    serde_json::json!({"minReplicas": policy["minReplicas"], "maxReplicas": policy["maxReplicas"],
        "metrics": vec![serde_json::json!({}); metrics]})
}

/// The replicas the policy sees of a job shaped `shape` whose live pods have the roles
/// `roles`. An elastic job's are its scalable role's: as many as its owner's spec asks
/// for (the replica indices run from 0, so the next one added is that number), within
/// the owner's bounds. Any other job's are fixed: its largest role, at its count of
/// live pods.
pub(crate) fn replicas<'a>(shape: &Shape, roles: impl Iterator<Item = &'a str>) -> model::Replicas {
    if let Ok(elastic) = &shape.scaling {
        return model::Replicas {
            role: ELASTIC_ROLE.to_string(),
            current: elastic.replicas,
            min: elastic.min,
            max: elastic.max,
        };
    }
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for role in roles {
        *counts.entry(role).or_default() += 1;
    }
    let (role, current) = counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(r, n)| (r.to_string(), *n))
        .unwrap_or_default();
    model::Replicas {
        role,
        current,
        min: current,
        max: current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(policy: Value, workers: u32) -> Value {
        json!({"spec": {"elasticPolicy": policy, "pytorchReplicaSpecs": {
            "Worker": {"replicas": workers, "restartPolicy": "OnFailure"}}}})
    }

    #[test]
    fn an_elastic_pytorchjob_offers_its_policy_s_worker_bounds() {
        let rv = "7".to_string();
        let e = pytorchjob_scaling(
            &job(json!({"minReplicas": 2, "maxReplicas": 6}), 4),
            Some(&rv),
        )
        .unwrap();
        assert_eq!((e.replicas, e.min, e.max), (4, 2, 6));
        assert_eq!(e.resource_version.as_deref(), Some("7"));
        let zero = pytorchjob_scaling(&job(json!({"minReplicas": 0, "maxReplicas": 3}), 2), None);
        assert_eq!(
            zero.unwrap().min,
            1,
            "worker 0 hosts the rendezvous: never scaled away"
        );
    }

    #[test]
    fn a_pytorchjob_is_fixed_without_room_to_move_or_with_an_autoscaler() {
        let why = |v: Value| pytorchjob_scaling(&v, None).unwrap_err();
        assert!(why(json!({"spec": {}})).contains("no spec.elasticPolicy"));
        assert!(why(job(json!({"maxReplicas": 4}), 4)).contains("4 to 4"));
        assert!(
            why(job(json!({}), 3)).contains("3 to 3"),
            "defaults: Worker replicas"
        );
        assert!(why(job(json!({"minReplicas": 5, "maxReplicas": 2}), 3)).contains("5 to 2"));
        let scaled = job(
            json!({"minReplicas": 1, "maxReplicas": 4, "metrics": [{"type": "Resource"}]}),
            2,
        );
        assert!(why(scaled).contains("HorizontalPodAutoscaler"));
        let lowercase = json!({"spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 4},
            "pytorchReplicaSpecs": {"worker": {"replicas": 2}}}});
        assert!(why(lowercase).contains("`Worker`"));
    }

    #[test]
    fn trimming_keeps_the_bounds_and_whether_an_autoscaler_scales_it() {
        let policy = json!({"minReplicas": 1, "maxReplicas": 4, "rdzvBackend": "c10d",
            "metrics": [{"type": "Resource", "resource": {"name": "cpu"}}]});
        let trimmed = job(trim_policy(&policy), 2);
        assert_eq!(
            pytorchjob_scaling(&trimmed, None),
            pytorchjob_scaling(&job(policy, 2), None)
        );
        assert_eq!(trim_policy(&Value::Null), Value::Null);
    }
}
