//! How a job's pods stand toward each other and toward other pods on a node: required
//! pod anti-affinity per node against the job's own pods, and host ports.
//!
//! - A role template with required pod anti-affinity whose topology key is
//!   `kubernetes.io/hostname` and whose selector matches the job's own pods, or with a
//!   `hostPort`, means no two tasks of the job may share a node. The job's view carries
//!   the label [`ONE_TASK_PER_NODE_LABEL`], which policies read and the validator
//!   enforces. It is judged per job, not per role: a job whose parameter server and
//!   workers could share a node under a per-role rule is still kept apart.
//! - A node where a pod of another job, or of another scheduler, already uses one of a
//!   role's host ports (same protocol and port, and the same or a wildcard address) is
//!   left out of that role's eligibility set, as kube-scheduler's `NodePorts` plugin
//!   does.
//!
//! Not honoured: anti-affinity against other jobs' pods, pod affinity, topology keys
//! other than the node's hostname, preferred terms. It reads; it must not write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
pub use switchyard_core::ONE_TASK_PER_NODE_LABEL;
use switchyard_core::{SelectorOperator, SelectorRequirement, SelectorTerm};

use crate::crd::TrainingJob;
use crate::{JOB_LABEL, JOB_UID_LABEL, ROLE_LABEL};

/// The node label anti-affinity per node names, and the one exclusions are written on.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// A port a container asks for on its node's network.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// The port number.
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The address it binds; empty or `0.0.0.0`: every address.
    pub ip: String,
}

impl HostPort {
    /// Whether two pods asking for these could not run on one node.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (wildcard(&self.ip) || wildcard(&other.ip) || self.ip == other.ip)
    }
}

/// The host ports a pod made from `spec` asks for (containers and init containers).
pub fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            Some(HostPort {
                port: p.host_port.filter(|&port| port > 0)?,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ip: p.host_ip.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// Whether no two tasks of `job` may share a node: a role's template has a host port,
/// or required anti-affinity per node against pods the job's own pods are.
pub fn one_task_per_node(job: &TrainingJob) -> bool {
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
        against_own || !host_ports(spec).is_empty()
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

/// The restriction keeping a role that asks for `wanted` off the nodes where
/// `in_use` (node, port) conflicts: none when no node does.
pub fn port_exclusion<'a>(
    wanted: &[HostPort],
    in_use: impl IntoIterator<Item = (&'a str, &'a HostPort)>,
) -> Option<Vec<SelectorTerm>> {
    let mut nodes: Vec<String> = in_use
        .into_iter()
        .filter(|(_, used)| wanted.iter().any(|w| w.conflicts(used)))
        .map(|(node, _)| node.to_string())
        .collect();
    if nodes.is_empty() {
        return None;
    }
    nodes.sort();
    nodes.dedup();
    Some(vec![SelectorTerm {
        match_expressions: vec![SelectorRequirement {
            key: HOSTNAME_LABEL.into(),
            operator: SelectorOperator::NotIn,
            values: nodes,
        }],
    }])
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

    #[test]
    fn a_node_is_excluded_only_where_a_used_host_port_conflicts() {
        let port = |port: i32, protocol: &str, ip: &str| HostPort {
            port,
            protocol: protocol.into(),
            ip: ip.into(),
        };
        let wanted = [port(29500, "TCP", "")];
        let used = [
            ("n1", port(29500, "TCP", "10.0.0.1")),
            ("n2", port(29500, "UDP", "")),
            ("n3", port(8080, "TCP", "")),
        ];
        let terms = port_exclusion(&wanted, used.iter().map(|(n, p)| (*n, p))).unwrap();
        assert_eq!(terms[0].match_expressions[0].values, ["n1"]);
        assert_eq!(
            port_exclusion(&wanted, used[1..].iter().map(|(n, p)| (*n, p))),
            None
        );
        assert!(!port(80, "TCP", "10.0.0.1").conflicts(&port(80, "TCP", "10.0.0.2")));
    }
}
