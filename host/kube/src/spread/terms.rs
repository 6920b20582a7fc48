//! How a pod's spec names other pods and topologies, as kube-scheduler reads them: its
//! hard topology spreads and required pod (anti-)affinity terms, and label selectors
//! with `matchLabelKeys`. The leaf both the hints (`spread`) and the pre-release check
//! (`fit`) read through. It reads; it must not write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodAffinityTerm, PodSpec, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// `spec`'s topology spreads with `whenUnsatisfiable: DoNotSchedule`.
pub(crate) fn hard_spreads(spec: &PodSpec) -> impl Iterator<Item = &TopologySpreadConstraint> {
    spec.topology_spread_constraints
        .iter()
        .flatten()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
}

/// `spec`'s required pod affinity terms.
pub(crate) fn affinity_terms(spec: &PodSpec) -> impl Iterator<Item = &PodAffinityTerm> {
    spec.affinity
        .as_ref()
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
}

/// `spec`'s required pod anti-affinity terms.
pub(crate) fn anti_affinity_terms(spec: &PodSpec) -> impl Iterator<Item = &PodAffinityTerm> {
    spec.affinity
        .as_ref()
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flatten()
}

/// Whether a topology spread's `selector` with `match_label_keys` counts any pod:
/// kube-scheduler counts none under a selector that selects everything (an empty one,
/// with no keys to merge in).
pub(crate) fn spread_counts(selector: &LabelSelector, match_label_keys: Option<&[String]>) -> bool {
    let everything = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty())
        && match_label_keys.is_none_or(|k| k.is_empty());
    !everything
}

/// Whether `selector`, with `match_label_keys` taken from `incoming` (the pod being
/// placed: its values for those keys are ANDed in, as kube-scheduler merges them),
/// selects a pod labelled `labels`.
pub(crate) fn selects_with_keys(
    selector: &LabelSelector,
    match_label_keys: Option<&[String]>,
    incoming: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    let keys_match = match_label_keys.into_iter().flatten().all(|key| {
        incoming
            .get(key)
            .is_none_or(|value| labels.get(key) == Some(value))
    });
    keys_match && selects(selector, labels)
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
