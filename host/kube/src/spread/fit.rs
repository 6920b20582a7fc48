//! Whether kube-scheduler would bind every pod of a gang on the node a placement pins
//! it to, by the rules between pods that the eligibility sets cannot say: required pod
//! anti-affinity and affinity on any topology key (kube-scheduler's `InterPodAffinity`)
//! and `DoNotSchedule` topology spread (`PodTopologySpread`). The gang's pods are
//! released together and kube-scheduler takes them one at a time, trying a refused one
//! again when another pod is bound; [`gang_refusal`] plays that out against the pods
//! already bound or pinned, and names the first pod that would wait for good and why.
//!
//! As kube-scheduler counts them: a spread counts the pods its selector matches (with
//! `matchLabelKeys` taken from the incoming pod) in the incoming pod's namespace, not
//! being deleted, on the nodes that carry every key of the pod's hard spreads and pass
//! its inclusion policies; the skew is that count in the node's domain, plus one when
//! the pod matches itself, minus the global minimum (0 while fewer domains than
//! `minDomains` are counted), and must not pass `maxSkew`. A pinned pod's required node
//! affinity admits its node alone, so under the default `nodeAffinityPolicy: Honor` its
//! node is the one domain counted: only a node without the key, or a `minDomains` above
//! 1 (then at most `maxSkew` matching pods per node), refuses it. Under `Ignore` every
//! node with the key is a domain. An affinity term with a namespace selector is taken to
//! look at every namespace (namespaces' labels are not cached).
//!
//! The pods it is given are those the caches keep with their labels (the controller's
//! and the queue's); other schedulers' pods are kept as charges, without labels, and are
//! not counted. It reads; it must not write.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, PodSpec, TopologySpreadConstraint};
use switchyard_core::{PlacementRules, RuledNode};

use super::terms::{
    affinity_terms, anti_affinity_terms, hard_spreads, selects_with_keys, spread_counts,
};
use crate::rules::RuledKubeNode;

/// A pod and the node it is bound or pinned to (or, for a gang's pod, will be).
#[derive(Clone, Copy)]
pub(crate) struct Sited<'a> {
    /// The pod, as its spec and labels are now.
    pub(crate) pod: &'a Pod,
    /// Its node's name.
    pub(crate) node: &'a str,
}

/// Whether any pod of `gang` has a rule between pods ([`gang_refusal`] has something
/// to check), or any of `others` repels pods by required anti-affinity.
pub(crate) fn has_pod_rules(gang: &[Sited<'_>], others: &[Sited<'_>]) -> bool {
    let own = |p: &Pod| {
        p.spec.as_ref().is_some_and(|s| {
            hard_spreads(s).next().is_some()
                || affinity_terms(s).next().is_some()
                || anti_affinity_terms(s).next().is_some()
        })
    };
    gang.iter().any(|s| own(s.pod))
        || others.iter().any(|s| {
            s.pod
                .spec
                .as_ref()
                .is_some_and(|spec| anti_affinity_terms(spec).next().is_some())
        })
}

/// The largest gang [`gang_refusal`] plays out: each pod is checked against every pod
/// and node, so a larger one is left to kube-scheduler rather than hold the decision.
pub(crate) const MAX_CHECKED_GANG: usize = 1_000;

/// How many rounds of retries [`gang_refusal`] plays out before it leaves the rest to
/// kube-scheduler (each binds at least one pod; a gang that needs more binds in a long
/// chain, one pod at a time).
const MAX_RETRY_ROUNDS: usize = 64;

/// Why kube-scheduler would keep a pod of `gang` (each pinned to its node) from being
/// bound however long it retried, with `others` bound or pinned where they are, on
/// `nodes` (by name); `None` when some order binds them all, or when the gang is too
/// large to play out ([`MAX_CHECKED_GANG`], [`MAX_RETRY_ROUNDS`]): then kube-scheduler
/// judges alone, as for any hint.
pub(crate) fn gang_refusal(
    gang: &[Sited<'_>],
    others: &[Sited<'_>],
    nodes: &HashMap<String, RuledKubeNode>,
) -> Option<String> {
    if gang.len() > MAX_CHECKED_GANG {
        return None;
    }
    let mut bound: Vec<Sited<'_>> = others.to_vec();
    let mut waiting: Vec<Sited<'_>> = gang.to_vec();
    for _ in 0..MAX_RETRY_ROUNDS {
        if waiting.is_empty() {
            break;
        }
        let before = waiting.len();
        let mut why = None;
        let mut i = 0;
        while i < waiting.len() {
            match refusal(waiting[i], &bound, nodes) {
                None => bound.push(waiting.remove(i)),
                Some(reason) => {
                    why.get_or_insert(reason);
                    i += 1;
                }
            }
        }
        if waiting.len() == before {
            return why;
        }
    }
    None
}

/// `namespace/name` of `pod`.
fn name_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn namespace_of(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

fn labels_of(pod: &Pod) -> &BTreeMap<String, String> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    pod.metadata.labels.as_ref().unwrap_or(&NONE)
}

/// Whether `term`, of a pod labelled `owner_labels` in `namespace`, selects `other`.
fn term_selects(
    term: &PodAffinityTerm,
    namespace: &str,
    owner_labels: &BTreeMap<String, String>,
    other: &Pod,
) -> bool {
    let other_namespace = namespace_of(other);
    let listed = term.namespaces.as_deref().unwrap_or_default();
    let in_namespaces = match &term.namespace_selector {
        Some(_) => true,
        None if listed.is_empty() => other_namespace == namespace,
        None => listed.iter().any(|n| n == other_namespace),
    };
    in_namespaces
        && term.label_selector.as_ref().is_some_and(|s| {
            selects_with_keys(
                s,
                term.match_label_keys.as_deref(),
                owner_labels,
                labels_of(other),
            )
        })
}

/// The value of `key` on the node `site` is on.
fn domain<'n>(
    nodes: &'n HashMap<String, RuledKubeNode>,
    site: &Sited<'_>,
    key: &str,
) -> Option<&'n str> {
    nodes.get(site.node)?.labels().get(key).map(String::as_str)
}

/// A pod of the gang on its node, with the pods bound or placed so far.
#[derive(Clone, Copy)]
struct Candidate<'c, 'a> {
    pod: Sited<'a>,
    spec: &'a PodSpec,
    node: &'c RuledKubeNode,
    own: &'a BTreeMap<String, String>,
    namespace: &'a str,
    bound: &'c [Sited<'a>],
    nodes: &'c HashMap<String, RuledKubeNode>,
}

/// Why kube-scheduler would not bind `pod` on its node now, with `bound` where they are.
fn refusal(
    pod: Sited<'_>,
    bound: &[Sited<'_>],
    nodes: &HashMap<String, RuledKubeNode>,
) -> Option<String> {
    // A node the caches do not know is the validator's to refuse, not this check's.
    let candidate = Candidate {
        node: nodes.get(pod.node)?,
        spec: pod.pod.spec.as_ref()?,
        own: labels_of(pod.pod),
        namespace: namespace_of(pod.pod),
        pod,
        bound,
        nodes,
    };
    candidate
        .spread()
        .or_else(|| candidate.anti_affinity())
        .or_else(|| candidate.affinity())
}

impl Candidate<'_, '_> {
    fn spread(&self) -> Option<String> {
        let Candidate {
            pod,
            spec,
            node,
            own,
            namespace,
            bound,
            nodes,
        } = *self;
        let hard: Vec<&TopologySpreadConstraint> = hard_spreads(spec).collect();
        if let Some(c) = hard
            .iter()
            .find(|c| !node.labels().contains_key(&c.topology_key))
        {
            return Some(format!(
                "node {} has no label {}, over which pod {} spreads (topologySpreadConstraints, DoNotSchedule)",
                pod.node,
                c.topology_key,
                name_of(pod.pod)
            ));
        }
        let tolerations = PlacementRules {
            tolerations: crate::rules::of_pod_spec(Some(spec)).tolerations.clone(),
            ..PlacementRules::default()
        };
        for c in &hard {
            let key = c.topology_key.as_str();
            let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
            let honor_taints = c.node_taints_policy.as_deref() == Some("Honor");
            let counted = |name: &str, n: &RuledKubeNode| {
                hard.iter()
                    .all(|c| n.labels().contains_key(&c.topology_key))
                    && (!honor_affinity || name == pod.node)
                    && (!honor_taints || tolerations.allow(n.labels(), n.taints()))
            };
            let keys = c.match_label_keys.as_deref();
            let selects = |other: &BTreeMap<String, String>| {
                c.label_selector.as_ref().is_some_and(|s| {
                    spread_counts(s, keys) && selects_with_keys(s, keys, own, other)
                })
            };
            let mut domains: BTreeMap<&str, i64> = BTreeMap::new();
            for (name, n) in nodes {
                if counted(name, n)
                    && let Some(value) = n.labels().get(key)
                {
                    domains.entry(value.as_str()).or_insert(0);
                }
            }
            for other in bound {
                let counts = namespace_of(other.pod) == namespace
                    && other.pod.metadata.deletion_timestamp.is_none()
                    && selects(labels_of(other.pod));
                if counts
                    && nodes
                        .get(other.node)
                        .is_some_and(|n| counted(other.node, n))
                    && let Some(count) = domain(nodes, other, key).and_then(|v| domains.get_mut(v))
                {
                    *count += 1;
                }
            }
            let min_domains = i64::from(c.min_domains.unwrap_or(1));
            let minimum = match domains.len() as i64 {
                counted if counted < min_domains => 0,
                _ => domains.values().copied().min().unwrap_or(0),
            };
            let value = node
                .labels()
                .get(key)
                .map(String::as_str)
                .unwrap_or_default();
            let here = domains.get(value).copied().unwrap_or(0);
            let itself = i64::from(
                c.label_selector
                    .as_ref()
                    .is_some_and(|s| selects_with_keys(s, keys, own, own)),
            );
            if here + itself - minimum > i64::from(c.max_skew) {
                return Some(format!(
                    "pod {} on node {} would make {} matching pods in {key}={value} against a minimum of {minimum} per domain, above its topology spread's maxSkew {} (DoNotSchedule)",
                    name_of(pod.pod),
                    pod.node,
                    here + itself,
                    c.max_skew
                ));
            }
        }
        None
    }

    fn anti_affinity(&self) -> Option<String> {
        let Candidate {
            pod,
            spec,
            node,
            own,
            namespace,
            bound,
            nodes,
        } = *self;
        for term in anti_affinity_terms(spec) {
            let key = term.topology_key.as_str();
            let Some(value) = node.labels().get(key) else {
                continue;
            };
            if let Some(other) = bound.iter().find(|other| {
                domain(nodes, other, key) == Some(value)
                    && term_selects(term, namespace, own, other.pod)
            }) {
                return Some(format!(
                    "pod {} may not share {key}={value} with pod {} on node {} (its required podAntiAffinity), so not run on node {}",
                    name_of(pod.pod),
                    name_of(other.pod),
                    other.node,
                    pod.node
                ));
            }
        }
        // Anti-affinity is symmetric: a pod already there repels the ones its terms select.
        for other in bound {
            let Some(other_spec) = other.pod.spec.as_ref() else {
                continue;
            };
            for term in anti_affinity_terms(other_spec) {
                let key = term.topology_key.as_str();
                let Some(value) = node.labels().get(key) else {
                    continue;
                };
                if domain(nodes, other, key) == Some(value)
                    && term_selects(term, namespace_of(other.pod), labels_of(other.pod), pod.pod)
                {
                    return Some(format!(
                        "pod {} on node {} keeps pod {} out of {key}={value} (its required podAntiAffinity), so not on node {}",
                        name_of(other.pod),
                        other.node,
                        name_of(pod.pod),
                        pod.node
                    ));
                }
            }
        }
        None
    }

    fn affinity(&self) -> Option<String> {
        let Candidate {
            pod,
            spec,
            node,
            own,
            namespace,
            bound,
            nodes,
        } = *self;
        for term in affinity_terms(spec) {
            let key = term.topology_key.as_str();
            let Some(value) = node.labels().get(key) else {
                return Some(format!(
                    "node {} has no label {key}, which pod {}'s required podAffinity places by",
                    pod.node,
                    name_of(pod.pod)
                ));
            };
            let selected = |other: &&Sited<'_>| term_selects(term, namespace, own, other.pod);
            if bound
                .iter()
                .filter(selected)
                .any(|other| domain(nodes, other, key) == Some(value))
            {
                continue;
            }
            // The first pod of its kind anywhere may go where it likes, if it matches itself.
            if !bound.iter().any(|o| selected(&o)) && term_selects(term, namespace, own, pod.pod) {
                continue;
            }
            return Some(format!(
                "pod {} needs a pod its required podAffinity selects in {key}={value} (node {}), and none is bound or placed there",
                name_of(pod.pod),
                pod.node
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// Nodes `a1`, `a2` in zone a and `b1` in zone b.
    fn nodes() -> HashMap<String, RuledKubeNode> {
        [("a1", "a"), ("a2", "a"), ("b1", "b")]
            .into_iter()
            .map(|(name, zone)| {
                let node = serde_json::from_value(json!({"metadata": {"name": name,
                    "labels": {"topology.kubernetes.io/zone": zone}}}))
                .unwrap();
                (name.to_string(), RuledKubeNode::of(&node))
            })
            .collect()
    }

    /// Pod `name` of group `group` in namespace `ml`, with `spec` (no containers needed).
    fn pod(name: &str, group: &str, spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ml",
            "labels": {"group": group}}, "spec": spec}))
        .unwrap()
    }

    fn terms(kind: &str, key: &str, group: &str) -> Value {
        json!({"containers": [], "affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": key, "labelSelector": {"matchLabels": {"group": group}}}]}}})
    }

    fn site<'a>(pod: &'a Pod, node: &'a str) -> Sited<'a> {
        Sited { pod, node }
    }

    #[test]
    fn a_gang_that_must_share_a_zone_is_bound_there_and_refused_across_two() {
        let nodes = nodes();
        let near = terms("podAffinity", "topology.kubernetes.io/zone", "g");
        let (p, q) = (pod("p", "g", near.clone()), pod("q", "g", near));
        // The first of its kind goes anywhere; the other follows it into its zone.
        assert_eq!(
            gang_refusal(&[site(&p, "a1"), site(&q, "a2")], &[], &nodes),
            None
        );
        let refused = gang_refusal(&[site(&p, "a1"), site(&q, "b1")], &[], &nodes)
            .expect("zone b has none of its kind");
        assert!(refused.contains("podAffinity"), "{refused}");
    }

    #[test]
    fn a_pod_already_there_repels_those_its_anti_affinity_selects() {
        let nodes = nodes();
        let repelling = pod(
            "web",
            "web",
            terms("podAntiAffinity", "topology.kubernetes.io/zone", "g"),
        );
        let plain = pod("p", "g", json!({"containers": []}));
        let refused = gang_refusal(&[site(&plain, "a2")], &[site(&repelling, "a1")], &nodes)
            .expect("symmetric anti-affinity");
        assert!(refused.contains("ml/web"), "{refused}");
        assert_eq!(
            gang_refusal(&[site(&plain, "b1")], &[site(&repelling, "a1")], &nodes),
            None
        );
    }

    #[test]
    fn a_pinned_pod_under_honor_counts_only_its_own_node_unless_min_domains_asks_more() {
        let nodes = nodes();
        let spread = |extra: Value| {
            let mut c = json!({"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"group": "g"}}});
            for (k, v) in extra.as_object().unwrap() {
                c[k] = v.clone();
            }
            json!({"containers": [], "topologySpreadConstraints": [c]})
        };
        let honor = [
            pod("p", "g", spread(json!({}))),
            pod("q", "g", spread(json!({}))),
        ];
        // Both in zone a, on two nodes: each pod's only domain is its node's.
        let both_in_a = [site(&honor[0], "a1"), site(&honor[1], "a2")];
        assert_eq!(gang_refusal(&both_in_a, &[], &nodes), None);
        let min_domains = [
            pod("p", "g", spread(json!({"minDomains": 2}))),
            pod("q", "g", spread(json!({"minDomains": 2}))),
        ];
        // Fewer domains than minDomains: the minimum is 0, one matching pod per node.
        let same_node = [site(&min_domains[0], "a1"), site(&min_domains[1], "a1")];
        assert!(gang_refusal(&same_node, &[], &nodes).is_some());
        let two_nodes = [site(&min_domains[0], "a1"), site(&min_domains[1], "a2")];
        assert_eq!(gang_refusal(&two_nodes, &[], &nodes), None);
    }
}
