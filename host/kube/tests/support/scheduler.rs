//! A test-support kube-scheduler: one scheduling cycle over a [`World`]'s pods, binding
//! the pods it may as the real one would. A pod with scheduling gates is left alone
//! (the real scheduler keeps it in its gated queue); a pod without gates and without a
//! node is bound to a node that passes its filters, or refused with `PodScheduled=False`,
//! reason `Unschedulable` and a message in kube-scheduler's form. The filters are the
//! ones the scenarios need of the real set: the node is schedulable, the pod's
//! `nodeSelector` and required node affinity (`matchExpressions` on labels, `matchFields`
//! on `metadata.name`, which is how the controller pins a pod) hold, and every resource
//! the pod requests fits what the node has left after the pods bound to it, extended
//! resources included; and a node can be made to refuse every pod with a message
//! ([`Scheduler::refusing`]), standing for a check this one does not make. A bound pod
//! is shown running, as the kubelet would report it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

use super::world::World;

/// What one cycle did to a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scheduled {
    /// Bound to the node.
    Bound { pod: String, node: String },
    /// Refused, with kube-scheduler's message.
    Refused { pod: String, message: String },
}

/// The test-support scheduler.
#[derive(Default)]
pub struct Scheduler {
    /// Nodes that refuse every pod, with why.
    refusing: Vec<(String, String)>,
}

impl Scheduler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Node `node` refuses every pod with `why` (a check this scheduler does not make:
    /// pod affinity, a DRA claim, a volume it cannot mount).
    pub fn refusing(mut self, node: &str, why: &str) -> Self {
        self.refusing.push((node.into(), why.into()));
        self
    }

    /// One cycle: every pod of `world` that is neither gated nor bound is bound to the
    /// first node that passes, by name, or refused.
    pub fn schedule(&self, world: &mut World) -> Vec<Scheduled> {
        let mut nodes: Vec<Node> = world
            .caches
            .nodes
            .state()
            .iter()
            .map(|n| (**n).clone())
            .collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut pods: Vec<Pod> = world
            .caches
            .pods
            .state()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut done = Vec::new();
        for pod in pods {
            let spec = pod.spec.as_ref().expect("a pod spec");
            let gated = spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty());
            if gated || spec.node_name.is_some() || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            let mut why: BTreeMap<String, usize> = BTreeMap::new();
            let mut chosen = None;
            for node in &nodes {
                match self.filter(world, &pod, node) {
                    Ok(()) => {
                        chosen = node.metadata.name.clone();
                        break;
                    }
                    Err(reason) => *why.entry(reason).or_default() += 1,
                }
            }
            let mut pod = pod;
            match chosen {
                Some(node) => {
                    pod.spec.as_mut().unwrap().node_name = Some(node.clone());
                    let status = pod.status.get_or_insert_with(Default::default);
                    status.phase = Some("Running".into());
                    status.conditions = Some(vec![
                        serde_json::from_value(json!({"type": "PodScheduled", "status": "True"}))
                            .unwrap(),
                    ]);
                    done.push(Scheduled::Bound { pod: name, node });
                }
                None => {
                    let reasons: Vec<String> =
                        why.iter().map(|(r, n)| format!("{n} {r}")).collect();
                    let message = format!(
                        "0/{} nodes are available: {}.",
                        nodes.len(),
                        reasons.join(", ")
                    );
                    pod.status.get_or_insert_with(Default::default).conditions = Some(vec![
                        serde_json::from_value(json!({"type": "PodScheduled", "status": "False",
                            "reason": "Unschedulable", "message": message}))
                        .unwrap(),
                    ]);
                    done.push(Scheduled::Refused { pod: name, message });
                }
            }
            world.pod(pod);
        }
        done
    }

    /// Why `node` does not take `pod`, in kube-scheduler's words; `Ok` when it does.
    fn filter(&self, world: &World, pod: &Pod, node: &Node) -> Result<(), String> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let spec = pod.spec.as_ref().unwrap();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let selector_holds = spec
            .node_selector
            .iter()
            .flatten()
            .all(|(k, v)| labels.get(k) == Some(v));
        let terms = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| r.node_selector_terms.as_slice())
            .unwrap_or_default();
        let affinity_holds = terms.is_empty() || terms.iter().any(|t| term_holds(t, name, &labels));
        if !selector_holds || !affinity_holds {
            return Err("node(s) didn't match Pod's node affinity/selector".into());
        }
        let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
        if cordoned {
            return Err("node(s) were unschedulable".into());
        }
        if let Some((_, why)) = self.refusing.iter().find(|(n, _)| n == name) {
            return Err(why.clone());
        }
        let allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.clone())
            .unwrap_or_default();
        let mut left: BTreeMap<String, f64> = allocatable
            .iter()
            .map(|(k, q)| (k.clone(), amount(q)))
            .collect();
        for other in world.caches.pods.state() {
            let on_node = other.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name);
            let finished = matches!(
                other.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            if on_node && !finished {
                for (resource, q) in requests(&other) {
                    *left.entry(resource).or_default() -= q;
                }
            }
        }
        for (resource, wanted) in requests(pod) {
            if left.get(&resource).copied().unwrap_or(0.0) < wanted {
                return Err(format!("Insufficient {resource}"));
            }
        }
        Ok(())
    }
}

fn term_holds(term: &NodeSelectorTerm, name: &str, labels: &BTreeMap<String, String>) -> bool {
    let holds = |r: &NodeSelectorRequirement, value: Option<&String>| {
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    };
    let name = name.to_string();
    term.match_expressions
        .iter()
        .flatten()
        .all(|r| holds(r, labels.get(&r.key)))
        && term
            .match_fields
            .iter()
            .flatten()
            .all(|r| r.key == "metadata.name" && holds(r, Some(&name)))
}

/// Every resource `pod`'s containers request, summed.
fn requests(pod: &Pod) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for container in &pod.spec.as_ref().unwrap().containers {
        let asked = container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref());
        for (resource, q) in asked.into_iter().flatten() {
            *out.entry(resource.clone()).or_default() += amount(q);
        }
    }
    out
}

/// A quantity as a number: `500m`, `2`, `4Gi`, `64Gi`.
fn amount(q: &Quantity) -> f64 {
    let text = q.0.as_str();
    let (number, factor) = if let Some(n) = text.strip_suffix('m') {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("Ki") {
        (n, 1024.0)
    } else if let Some(n) = text.strip_suffix("Mi") {
        (n, 1024.0 * 1024.0)
    } else if let Some(n) = text.strip_suffix("Gi") {
        (n, 1024.0 * 1024.0 * 1024.0)
    } else {
        (text, 1.0)
    };
    number.parse::<f64>().expect("a quantity the scenarios use") * factor
}
