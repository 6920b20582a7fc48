//! Where a task may run: the cluster's placement rules, and the compact eligibility sets
//! the contract hands policies (`snapshot.node-sets`, `task.eligible`).
//!
//! The rules are Kubernetes' own (taints and tolerations, node selectors, required node
//! affinity), spelled with Kubernetes' field names so a workload file reads like a pod
//! spec and the Kubernetes backend converts without reinterpreting. Tasks with the same
//! rules share one set, so a cluster of thousands of nodes and a handful of pod
//! templates sends a handful of node lists, not one per task.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::NodeSet;

/// What a taint does to tasks that do not tolerate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// New tasks may not be placed there.
    NoSchedule,
    /// A preference only: placement is still allowed.
    PreferNoSchedule,
    /// New tasks may not be placed there, and running ones are evicted.
    NoExecute,
}

/// A node's taint: tasks must tolerate it to be placed there (unless its effect is only
/// a preference).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    #[serde(default)]
    pub value: String,
    /// What it does.
    pub effect: TaintEffect,
}

/// How a toleration matches a taint's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Any value (and, with no key, any taint).
    Exists,
    /// The value must be equal.
    #[default]
    Equal,
}

/// A task's toleration of taints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    /// The taint key it tolerates; empty with `Exists`: every taint.
    #[serde(default)]
    pub key: String,
    /// How the value matches.
    #[serde(default)]
    pub operator: TolerationOperator,
    /// The value, with `Equal`.
    #[serde(default)]
    pub value: String,
    /// The effect it tolerates; none: every effect.
    #[serde(default)]
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Kubernetes' `ToleratesTaint`.
    fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// How a node selector requirement matches a label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value, as an integer, is greater than the one value given.
    Gt,
    /// The label's value, as an integer, is less than the one value given.
    Lt,
}

/// One requirement of a node selector term.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorRequirement {
    /// Label key.
    pub key: String,
    /// How it matches.
    pub operator: SelectorOperator,
    /// Values to compare with.
    #[serde(default)]
    pub values: Vec<String>,
}

impl SelectorRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let number = |s: &str| s.parse::<i64>().ok();
        let bound = || self.values.first().and_then(|v| number(v));
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
            SelectorOperator::Gt => {
                matches!((value.and_then(|v| number(v)), bound()), (Some(v), Some(b)) if v > b)
            }
            SelectorOperator::Lt => {
                matches!((value.and_then(|v| number(v)), bound()), (Some(v), Some(b)) if v < b)
            }
        }
    }
}

/// A node selector term: every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorTerm {
    /// Requirements on the node's labels.
    #[serde(default, rename = "matchExpressions", alias = "match_expressions")]
    pub match_expressions: Vec<SelectorRequirement>,
}

/// Where a task may run, as its pod template would say it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementRules {
    /// Labels the node must carry, with these values.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Taints it tolerates.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// Required node affinity: the node must match at least one term (none: no
    /// requirement), as `requiredDuringSchedulingIgnoredDuringExecution`.
    #[serde(default)]
    pub required_node_affinity: Vec<SelectorTerm>,
}

impl PlacementRules {
    /// True when a task with these rules may be placed on a node with `labels` and
    /// `taints`: every selector label matches, some affinity term holds (when any is
    /// given), and every `NoSchedule` or `NoExecute` taint is tolerated.
    pub fn allow(&self, labels: &BTreeMap<String, String>, taints: &[Taint]) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && (self.required_node_affinity.is_empty()
                || self
                    .required_node_affinity
                    .iter()
                    .any(|term| term.match_expressions.iter().all(|r| r.matches(labels))))
            && taints
                .iter()
                .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
                .all(|t| self.tolerations.iter().any(|tol| tol.tolerates(t)))
    }
}

/// What the eligibility computation needs of a node.
pub trait RuledNode {
    /// The node's labels.
    fn labels(&self) -> &BTreeMap<String, String>;
    /// The node's taints.
    fn taints(&self) -> &[Taint];
}

/// The eligibility sets of a cluster: one per distinct set of rules seen, numbered in
/// the order first seen, so an id stays the same while its rules and the nodes do.
///
/// Rules that allow every node get no set (`task.eligible` none), so a cluster without
/// taints or selectors sends nothing at all. Sets are kept until [`EligibilitySets::reset`]
/// (the node list changed): the number of distinct rules is the number of pod templates,
/// not of tasks, so they do not grow with a trace.
#[derive(Debug, Default)]
pub struct EligibilitySets {
    /// Every distinct set of rules seen, with its set (none: it allows every node).
    rules: Vec<(Arc<PlacementRules>, Option<u32>)>,
    sets: Arc<Vec<NodeSet>>,
}

impl EligibilitySets {
    /// The set id for `rules` over `nodes`, computing it the first time these rules are
    /// seen; none when the rules allow every node. Rules that say nothing still keep a
    /// task off tainted nodes, as in Kubernetes.
    pub fn id_for<N: RuledNode>(
        &mut self,
        rules: &Arc<PlacementRules>,
        nodes: &[N],
    ) -> Option<u32> {
        if let Some((_, id)) = self
            .rules
            .iter()
            .find(|(r, _)| Arc::ptr_eq(r, rules) || **r == **rules)
        {
            return *id;
        }
        let allowed: Vec<u32> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| rules.allow(n.labels(), n.taints()))
            .map(|(i, _)| i as u32)
            .collect();
        let id = (allowed.len() < nodes.len()).then(|| {
            let id = self.sets.len() as u32;
            Arc::make_mut(&mut self.sets).push(NodeSet { id, nodes: allowed });
            id
        });
        self.rules.push((Arc::clone(rules), id));
        id
    }

    /// The sets computed so far, shared: the pointer changes only when a set is added.
    pub fn sets(&self) -> &Arc<Vec<NodeSet>> {
        &self.sets
    }

    /// Forgets every set (the node list or a node's labels or taints changed); ids are
    /// handed out afresh.
    pub fn reset(&mut self) {
        self.rules.clear();
        self.sets = Arc::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct N(BTreeMap<String, String>, Vec<Taint>);

    impl RuledNode for N {
        fn labels(&self) -> &BTreeMap<String, String> {
            &self.0
        }
        fn taints(&self) -> &[Taint] {
            &self.1
        }
    }

    fn node(labels: &[(&str, &str)], taints: &[(&str, &str, TaintEffect)]) -> N {
        N(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints
                .iter()
                .map(|(k, v, e)| Taint {
                    key: k.to_string(),
                    value: v.to_string(),
                    effect: *e,
                })
                .collect(),
        )
    }

    fn rules(yaml: &str) -> Arc<PlacementRules> {
        Arc::new(serde_norway::from_str(yaml).unwrap())
    }

    #[test]
    fn taints_selectors_and_affinity_decide_the_set_and_equal_rules_share_it() {
        use TaintEffect::*;
        let nodes = [
            node(&[("gpu", "a100"), ("zone", "1")], &[]),
            node(&[("gpu", "v100"), ("zone", "2")], &[]),
            node(
                &[("gpu", "a100"), ("zone", "3")],
                &[("dedicated", "team-x", NoSchedule)],
            ),
            node(
                &[],
                &[("node-role.kubernetes.io/control-plane", "", NoSchedule)],
            ),
            node(&[("gpu", "v100")], &[("spot", "", PreferNoSchedule)]),
        ];
        let mut sets = EligibilitySets::default();
        // Saying nothing keeps a task off the NoSchedule taints, not the preference.
        assert_eq!(sets.id_for(&rules("{}"), &nodes), Some(0));
        assert_eq!(sets.sets()[0].nodes, [0, 1, 4]);
        let a100 = rules("node_selector: {gpu: a100}");
        assert_eq!(sets.id_for(&a100, &nodes), Some(1));
        assert_eq!(sets.sets()[1].nodes, [0]);
        let tolerant = rules(
            "node_selector: {gpu: a100}\ntolerations: [{key: dedicated, value: team-x, effect: NoSchedule}]",
        );
        assert_eq!(sets.id_for(&tolerant, &nodes), Some(2));
        assert_eq!(sets.sets()[2].nodes, [0, 2]);
        // Tolerating everything allows every node: no set at all.
        let anything = rules("tolerations: [{operator: Exists}]");
        assert_eq!(sets.id_for(&anything, &nodes), None);
        let untainted = [node(&[("gpu", "a100")], &[])];
        assert_eq!(
            EligibilitySets::default().id_for(&rules("{}"), &untainted),
            None
        );
        let zones = rules(
            "required_node_affinity:\n- matchExpressions: [{key: zone, operator: Gt, values: ['1']}, {key: gpu, operator: NotIn, values: [v100]}]\n- matchExpressions: [{key: zone, operator: DoesNotExist}]",
        );
        assert_eq!(sets.id_for(&zones, &nodes), Some(3));
        // zone 3 is tainted; the untainted nodes without a zone: only 4 (3 is tainted).
        assert_eq!(sets.sets()[3].nodes, [4]);
        // The same rules again, in another allocation: the same set.
        assert_eq!(
            sets.id_for(&rules("node_selector: {gpu: a100}"), &nodes),
            Some(1)
        );
        assert_eq!(sets.sets().len(), 4);
    }

    #[test]
    fn a_toleration_matches_key_value_and_effect_as_kubernetes_does() {
        let taint = Taint {
            key: "k".into(),
            value: "v".into(),
            effect: TaintEffect::NoExecute,
        };
        let t = |yaml: &str| serde_norway::from_str::<Toleration>(yaml).unwrap();
        assert!(t("{key: k, value: v}").tolerates(&taint));
        assert!(t("{key: k, operator: Exists, effect: NoExecute}").tolerates(&taint));
        assert!(!t("{key: k, value: w}").tolerates(&taint));
        assert!(!t("{key: k, operator: Exists, effect: NoSchedule}").tolerates(&taint));
        assert!(!t("{key: other, operator: Exists}").tolerates(&taint));
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let error = serde_norway::from_str::<PlacementRules>("nodeSelector: {a: b}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("nodeSelector"), "{error}");
    }
}
