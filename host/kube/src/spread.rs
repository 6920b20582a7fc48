//! How a job's pods stand toward each other on a node: a role template with required
//! pod anti-affinity whose topology key is `kubernetes.io/hostname` and whose selector
//! matches the job's own pods, or with a `hostPort`, means no two tasks of the job may
//! share a node. The job's view carries the label [`ONE_TASK_PER_NODE_LABEL`], which
//! policies read and the validator enforces, so a policy does not propose a placement
//! the scheduler would refuse. It is judged per job, not per role: a job whose parameter
//! server and workers could share a node under a per-role rule is still kept apart.
//!
//! A hint: kube-scheduler, which binds, checks every pod (anti-)affinity, topology
//! spread and host port against every other pod, and a placement it refuses comes back
//! to the policy. It reads; it must not write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
pub(crate) use switchyard_core::ONE_TASK_PER_NODE_LABEL;

use crate::crd::TrainingJob;
use crate::{JOB_LABEL, JOB_UID_LABEL, ROLE_LABEL};

/// The node label anti-affinity per node names, and the one exclusions are written on.
pub(crate) const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Whether a pod made from `spec` asks for a port on its node's network (containers
/// and init containers).
fn asks_host_port(spec: &PodSpec) -> bool {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .any(|p| p.host_port.is_some_and(|port| port > 0))
}

/// Whether no two tasks of `job` may share a node: a role's template has a host port,
/// or required anti-affinity per node against pods the job's own pods are.
pub(crate) fn one_task_per_node(job: &TrainingJob) -> bool {
    let namespace = job.namespace().unwrap_or_default();
    let own_labels: Vec<BTreeMap<String, String>> = job
        .spec
        .roles
        .iter()
        .map(|role| {
            let mut labels = role
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(JOB_LABEL.into(), job.name_any());
            labels.insert(ROLE_LABEL.into(), role.name.clone());
            if let Some(uid) = &job.metadata.uid {
                labels.insert(JOB_UID_LABEL.into(), uid.clone());
            }
            labels
        })
        .collect();
    job.spec.roles.iter().any(|role| {
        let Some(spec) = role.template.spec.as_ref() else {
            return false;
        };
        let terms = spec
            .affinity
            .as_ref()
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        let against_own = terms.into_iter().flatten().any(|term| {
            let own_namespace = term.namespace_selector.is_none()
                && term
                    .namespaces
                    .as_ref()
                    .is_none_or(|n| n.is_empty() || n.contains(&namespace));
            term.topology_key == HOSTNAME_LABEL
                && own_namespace
                && term
                    .label_selector
                    .as_ref()
                    .is_some_and(|s| own_labels.iter().any(|l| selects(s, l)))
        });
        against_own || asks_host_port(spec)
    })
}

/// Whether `selector` selects an object (a pod, a volume) with `labels` (an empty
/// selector selects every one).
pub(crate) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let exact = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    exact
        && selector.match_expressions.iter().flatten().all(|r| {
            let value = labels.get(&r.key);
            let values = r.values.as_deref().unwrap_or_default();
            match r.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(template: serde_json::Value) -> TrainingJob {
        serde_json::from_value(json!({
            "apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
            "metadata": {"name": "a", "namespace": "ml", "uid": "uid-a"},
            "spec": {"roles": [{"name": "worker", "replicas": 2, "template": template}]}
        }))
        .unwrap()
    }

    fn anti_affinity(selector: serde_json::Value, key: &str) -> serde_json::Value {
        json!({"metadata": {"labels": {"app": "resnet"}}, "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": key, "labelSelector": selector}]}}}})
    }

    #[test]
    fn anti_affinity_per_node_against_the_job_s_own_pods_or_a_host_port_means_one_task_per_node() {
        let own = json!({"matchLabels": {"switchyard.dev/job": "a"}});
        assert!(one_task_per_node(&job(anti_affinity(
            own.clone(),
            HOSTNAME_LABEL
        ))));
        let by_template_label =
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["resnet"]}]});
        assert!(one_task_per_node(&job(anti_affinity(
            by_template_label,
            HOSTNAME_LABEL
        ))));
        // Another app's pods, or per zone: not this rule.
        let others = json!({"matchLabels": {"app": "web"}});
        assert!(!one_task_per_node(&job(anti_affinity(
            others,
            HOSTNAME_LABEL
        ))));
        assert!(!one_task_per_node(&job(anti_affinity(
            own,
            "topology.kubernetes.io/zone"
        ))));
        let ported = json!({"spec": {"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 29500, "hostPort": 29500}]}]}});
        assert!(one_task_per_node(&job(ported)));
        let plain = json!({"spec": {"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 29500}]}]}});
        assert!(!one_task_per_node(&job(plain)));
    }
}
