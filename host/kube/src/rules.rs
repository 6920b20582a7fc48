//! Where a pod may run, read from the cluster: a role template's node selector,
//! tolerations and required node affinity, and each node's labels and taints, turned
//! into the contract's eligibility sets (`switchyard_core::EligibilitySets`), so the policy
//! is offered and the validator allows only nodes kube-scheduler would have allowed.
//!
//! Honoured: `nodeSelector`; tolerations of `NoSchedule` and `NoExecute` taints (a
//! `PreferNoSchedule` taint never excludes a node); the `matchExpressions` and
//! `matchFields` of `requiredDuringSchedulingIgnoredDuringExecution` node affinity.
//! Not honoured here: preferred affinity, pod affinity and anti-affinity. Volume
//! topology is added by [`crate::volumes`]. These sets are the policy's hint:
//! kube-scheduler, which binds, checks the pod as admission left it, with everything
//! else it checks.
//!
//! `matchFields` selects on the node object's fields, of which the API server accepts
//! only `metadata.name`. The eligibility sets match labels, so each node also carries its
//! name under [`NODE_NAME_FIELD`], a key no label can have (a label key has no `:`), and
//! a field requirement becomes a requirement on that key. A field the API server would
//! not accept matches no node, as kube-scheduler places no pod whose selector it cannot
//! parse.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use kube::ResourceExt;
use switchyard_core::{
    PlacementRules, RuledNode, SelectorOperator, SelectorRequirement, SelectorTerm, Taint,
    TaintEffect, Toleration, TolerationOperator,
};

/// The key a node's `metadata.name` is matched under, for `matchFields`: not a valid
/// label key, so no label of the node can shadow it.
pub(crate) const NODE_NAME_FIELD: &str = "field:metadata.name";

/// The node label the kubelet sets to the node's name: anti-affinity per node names it,
/// and exclusions by node are written on it.
pub(crate) const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// What eligibility needs of a node: its labels and taints.
pub(crate) struct RuledKubeNode {
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
}

impl RuledKubeNode {
    /// The labels and the taints (of a known effect) of `node`.
    pub(crate) fn of(node: &Node) -> Self {
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|t| {
                Some(Taint {
                    key: t.key.clone(),
                    value: t.value.clone().unwrap_or_default(),
                    effect: effect(&t.effect)?,
                })
            })
            .collect();
        let mut labels = node.labels().clone();
        // The kubelet sets it; exclusions by node ([`crate::spread`]) are written on it.
        labels
            .entry(HOSTNAME_LABEL.to_string())
            .or_insert_with(|| node.name_any());
        labels.insert(NODE_NAME_FIELD.to_string(), node.name_any());
        Self { labels, taints }
    }
}

impl RuledNode for RuledKubeNode {
    fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }
    fn taints(&self) -> &[Taint] {
        &self.taints
    }
}

fn effect(text: &str) -> Option<TaintEffect> {
    match text {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

/// The rules a pod made from `spec` carries.
pub(crate) fn of_pod_spec(spec: Option<&PodSpec>) -> Arc<PlacementRules> {
    let Some(spec) = spec else {
        return Arc::default();
    };
    let tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .map(|t| Toleration {
            key: t.key.clone().unwrap_or_default(),
            operator: match t.operator.as_deref() {
                Some("Exists") => TolerationOperator::Exists,
                _ => TolerationOperator::Equal,
            },
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.as_deref().and_then(effect),
        })
        .collect();
    let required_node_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|selector| selector.node_selector_terms.iter().map(term).collect())
        .unwrap_or_default();
    Arc::new(PlacementRules {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        tolerations,
        required_node_affinity,
    })
}

/// A node selector term (a pod's required node affinity, a volume's node affinity) as
/// the eligibility sets match it: its label expressions and its field requirements,
/// all of which a node must meet.
pub(crate) fn term(term: &NodeSelectorTerm) -> SelectorTerm {
    let labels = term
        .match_expressions
        .iter()
        .flatten()
        .map(|r| SelectorRequirement {
            key: r.key.clone(),
            operator: operator(&r.operator),
            values: r.values.clone().unwrap_or_default(),
        });
    let fields = term.match_fields.iter().flatten().map(field_requirement);
    SelectorTerm {
        match_expressions: labels.chain(fields).collect(),
    }
}

/// A `matchFields` requirement: on [`NODE_NAME_FIELD`] for `metadata.name` with `In` or
/// `NotIn` (all the API server accepts), otherwise one no node meets.
fn field_requirement(requirement: &NodeSelectorRequirement) -> SelectorRequirement {
    let accepted = requirement.key == "metadata.name"
        && matches!(requirement.operator.as_str(), "In" | "NotIn");
    if !accepted {
        return SelectorRequirement {
            key: format!("field:{}", requirement.key),
            operator: SelectorOperator::In,
            values: Vec::new(),
        };
    }
    SelectorRequirement {
        key: NODE_NAME_FIELD.to_string(),
        operator: operator(&requirement.operator),
        values: requirement.values.clone().unwrap_or_default(),
    }
}

/// `rules` with `restrictions` added: a node must still match one of the rules' own
/// affinity terms, and now also one term of each restriction (terms are ANDed by
/// concatenating their requirements, one combination per pair).
pub(crate) fn restricted(
    rules: &Arc<PlacementRules>,
    restrictions: &[Vec<SelectorTerm>],
) -> Arc<PlacementRules> {
    if restrictions.is_empty() {
        return Arc::clone(rules);
    }
    let mut terms = rules.required_node_affinity.clone();
    for restriction in restrictions {
        terms = if terms.is_empty() {
            restriction.clone()
        } else {
            terms
                .iter()
                .flat_map(|a| {
                    restriction.iter().map(move |b| SelectorTerm {
                        match_expressions: a
                            .match_expressions
                            .iter()
                            .chain(&b.match_expressions)
                            .cloned()
                            .collect(),
                    })
                })
                .collect()
        };
    }
    Arc::new(PlacementRules {
        required_node_affinity: terms,
        ..(**rules).clone()
    })
}

/// An operator the API server accepts; an unknown one matches nothing (`In` of no
/// values), as kube-scheduler refuses to place such a pod.
pub(crate) fn operator(text: &str) -> SelectorOperator {
    match text {
        "NotIn" => SelectorOperator::NotIn,
        "Exists" => SelectorOperator::Exists,
        "DoesNotExist" => SelectorOperator::DoesNotExist,
        "Gt" => SelectorOperator::Gt,
        "Lt" => SelectorOperator::Lt,
        _ => SelectorOperator::In,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::EligibilitySets;

    fn node(json: serde_json::Value) -> RuledKubeNode {
        RuledKubeNode::of(&serde_json::from_value(json).unwrap())
    }

    fn spec(json: serde_json::Value) -> Arc<PlacementRules> {
        of_pod_spec(Some(&serde_json::from_value(json).unwrap()))
    }

    #[test]
    fn a_template_s_selector_tolerations_and_affinity_pick_the_nodes_kube_scheduler_would() {
        let nodes = [
            node(serde_json::json!({"metadata": {"name": "a", "labels": {"gpu": "a100"}}})),
            node(serde_json::json!({"metadata": {"name": "b", "labels": {"gpu": "v100"}}})),
            node(serde_json::json!({
                "metadata": {"name": "cp", "labels": {"gpu": "a100"}},
                "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}
            })),
            node(serde_json::json!({
                "metadata": {"name": "spot", "labels": {"gpu": "v100"}},
                "spec": {"taints": [{"key": "spot", "effect": "PreferNoSchedule"}]}
            })),
        ];
        let mut sets = EligibilitySets::default();
        // No rules: kept off the control plane's NoSchedule taint only.
        let plain = sets.id_for(&spec(serde_json::json!({"containers": []})), &nodes);
        assert_eq!(sets.sets()[plain.unwrap() as usize].nodes, [0, 1, 3]);
        let a100 = spec(serde_json::json!({"containers": [], "nodeSelector": {"gpu": "a100"}}));
        let id = sets.id_for(&a100, &nodes).unwrap();
        assert_eq!(
            sets.sets()[id as usize].nodes,
            [0],
            "the tainted a100 is out"
        );
        let anywhere = spec(serde_json::json!({"containers": [],
            "tolerations": [{"operator": "Exists"}]}));
        assert_eq!(sets.id_for(&anywhere, &nodes), None, "every node: no set");
        let not_a100 = spec(
            serde_json::json!({"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["a100"]}]}
            ]}}}}),
        );
        let id = sets.id_for(&not_a100, &nodes).unwrap();
        assert_eq!(
            sets.sets()[id as usize].nodes,
            [1, 3],
            "PreferNoSchedule excludes nothing"
        );
    }

    #[test]
    fn match_fields_pin_nodes_by_name_and_a_field_the_api_server_refuses_matches_no_node() {
        let nodes = [
            node(serde_json::json!({"metadata": {"name": "a", "labels": {"gpu": "a100"}}})),
            node(serde_json::json!({"metadata": {"name": "b", "labels": {"gpu": "a100"}}})),
            node(serde_json::json!({"metadata": {"name": "c", "labels": {"gpu": "v100"}}})),
        ];
        let affinity = |terms: serde_json::Value| {
            spec(
                serde_json::json!({"containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
            )
        };
        let mut sets = EligibilitySets::default();
        let mut nodes_of = |rules: &Arc<PlacementRules>| {
            sets.id_for(rules, &nodes)
                .map(|id| sets.sets()[id as usize].nodes.clone())
        };
        let on_b = affinity(serde_json::json!([
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
        ]));
        assert_eq!(nodes_of(&on_b), Some(vec![1]));
        let not_a = affinity(serde_json::json!([
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]}
        ]));
        assert_eq!(nodes_of(&not_a), Some(vec![1, 2]));
        // Expressions and fields of one term must both hold; terms are alternatives.
        let a100_not_a_or_c = affinity(serde_json::json!([
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}],
             "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}
        ]));
        assert_eq!(nodes_of(&a100_not_a_or_c), Some(vec![1, 2]));
        for refused in [
            serde_json::json!({"key": "metadata.uid", "operator": "In", "values": ["a"]}),
            serde_json::json!({"key": "metadata.name", "operator": "Exists"}),
        ] {
            let rules = affinity(serde_json::json!([{"matchFields": [refused]}]));
            assert_eq!(nodes_of(&rules), Some(vec![]), "{refused}");
        }
    }
}
