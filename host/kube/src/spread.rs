//! How a job's pods stand toward each other on a node: a role template with required
//! pod anti-affinity whose topology key is `kubernetes.io/hostname` and whose selector
//! matches the job's own pods, or with a `hostPort`, means no two tasks of the job may
//! share a node. The job's view carries the label [`ONE_TASK_PER_NODE_LABEL`], which
//! policies read and the validator enforces, so a policy does not propose a placement
//! the scheduler would refuse. It is judged per job, not per role: a job whose parameter
//! server and workers could share a node under a per-role rule is still kept apart.
//!
//! A `DoNotSchedule` topology spread over nodes of at most one of the job's own pods that
//! kube-scheduler enforces on a pinned pod counts the same ([`one_task_per_node_of`]),
//! and a node must carry the topology key of every hard spread and required pod
//! affinity ([`required_node_keys`], added to the pod's eligibility). A TrainingJob is
//! judged from its role templates, an adopted job from its pods' own specs.
//!
//! A hint: kube-scheduler, which binds, checks every pod (anti-)affinity, topology
//! spread and host port against every other pod, and a placement it refuses comes back
//! to the policy. What the hints cannot say (a spread's skew, anti-affinity per zone,
//! affinity to pods placed elsewhere) `fit` checks for an adopted gang before its pods
//! are released. It reads; it must not write.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodSpec;
use kube::ResourceExt;
pub(crate) use switchyard_core::ONE_TASK_PER_NODE_LABEL;
use switchyard_core::{SelectorOperator, SelectorRequirement, SelectorTerm};

use crate::crd::TrainingJob;
use crate::{JOB_LABEL, JOB_UID_LABEL, ROLE_LABEL};

mod fit;
mod terms;

pub(crate) use self::fit::{MAX_CHECKED_GANG, Sited, gang_refusal, has_pod_rules};
pub(crate) use self::terms::selects;
use self::terms::{
    affinity_terms, anti_affinity_terms, hard_spreads, selects_with_keys, spread_counts,
};

pub(crate) use crate::rules::HOSTNAME_LABEL;

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
/// or required anti-affinity per node against pods the job's own pods are, or a spread
/// over nodes that allows one of them per node ([`one_task_per_node_of`]).
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
    let specs = job
        .spec
        .roles
        .iter()
        .filter_map(|r| r.template.spec.as_ref());
    one_task_per_node_of(specs, &own_labels, &namespace)
}

/// Whether no two pods of one job may share a node, the job's pods being made from
/// `specs` in `namespace` and labelled (each) with one of `own_labels`: a spec asks for
/// a host port, has required pod anti-affinity per node whose selector matches the
/// job's own pods, or a `DoNotSchedule` topology spread per node of at most one of them
/// that kube-scheduler enforces on a pinned pod ([`spreads_one_per_node`]). A
/// TrainingJob passes its role templates and the labels its pods get; an adopted job
/// its pods' own specs and labels.
pub(crate) fn one_task_per_node_of<'a>(
    specs: impl IntoIterator<Item = &'a PodSpec>,
    own_labels: &[BTreeMap<String, String>],
    namespace: &str,
) -> bool {
    specs.into_iter().any(|spec| {
        let against_own = anti_affinity_terms(spec).any(|term| {
            let own_namespace = term.namespace_selector.is_none()
                && term
                    .namespaces
                    .as_ref()
                    .is_none_or(|n| n.is_empty() || n.iter().any(|n| n == namespace));
            term.topology_key == HOSTNAME_LABEL
                && own_namespace
                && term
                    .label_selector
                    .as_ref()
                    .is_some_and(|s| own_labels.iter().any(|l| selects(s, l)))
        });
        against_own || asks_host_port(spec) || spreads_one_per_node(spec, own_labels)
    })
}

/// Whether `spec` has a `DoNotSchedule` topology spread over nodes
/// ([`HOSTNAME_LABEL`]) with `maxSkew: 1` over the job's own pods that kube-scheduler
/// enforces on a pod pinned to its node: with `nodeAffinityPolicy: Ignore` (every node
/// is a domain), or with `minDomains` above 1 (under the default `Honor`, a pinned pod's
/// only domain is its node's, so the global minimum is 0 and the node takes at most
/// `maxSkew` matching pods). Under `Honor` without `minDomains`, kube-scheduler refuses
/// a pinned pod nothing for it, and no hint is given.
fn spreads_one_per_node(spec: &PodSpec, own_labels: &[BTreeMap<String, String>]) -> bool {
    hard_spreads(spec).any(|c| {
        let enforced = c.node_affinity_policy.as_deref() == Some("Ignore")
            || c.min_domains.is_some_and(|m| m > 1);
        c.topology_key == HOSTNAME_LABEL
            && c.max_skew == 1
            && enforced
            && own_labels.iter().any(|l| {
                c.label_selector.as_ref().is_some_and(|s| {
                    let keys = c.match_label_keys.as_deref();
                    spread_counts(s, keys) && selects_with_keys(s, keys, l, l)
                })
            })
    })
}

/// The node labels a pod made from `spec` needs on its node whatever else runs there,
/// each as a restriction of one term (`key Exists`): the topology key of every
/// `DoNotSchedule` topology spread (kube-scheduler refuses a node without it,
/// `UnschedulableAndUnresolvable`) and of every required pod affinity (a node outside
/// every domain has no pod to be near). Anti-affinity needs none: a node without the key
/// is in no domain, so nothing there repels the pod.
pub(crate) fn required_node_keys(spec: Option<&PodSpec>) -> Vec<Vec<SelectorTerm>> {
    let Some(spec) = spec else {
        return Vec::new();
    };
    let spread = hard_spreads(spec).map(|c| c.topology_key.as_str());
    let near = affinity_terms(spec).map(|t| t.topology_key.as_str());
    let keys: BTreeSet<&str> = spread.chain(near).collect();
    keys.into_iter()
        .map(|key| {
            vec![SelectorTerm {
                match_expressions: vec![SelectorRequirement {
                    key: key.to_string(),
                    operator: SelectorOperator::Exists,
                    values: Vec::new(),
                }],
            }]
        })
        .collect()
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
