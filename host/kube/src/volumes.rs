//! Where a job's PersistentVolumeClaims let it run, as kube-scheduler's `VolumeBinding`
//! plugin judges it for a pod, read from caches of claims, volumes and storage classes.
//!
//! For each claim a role's template mounts (`volumes[].persistentVolumeClaim`):
//!
//! - bound: the volume's `spec.nodeAffinity.required` (a zonal disk, a local volume)
//!   restricts the role's nodes, added to the template's own rules;
//! - unbound, of a `WaitForFirstConsumer` class, no node chosen yet: placeable, within
//!   the class's `allowedTopologies`; placing it chooses the node first
//!   ([`Selection`]): the claim is annotated `volume.kubernetes.io/selected-node`, as
//!   kube-scheduler does for dynamic provisioning, and the pods are bound only once
//!   the claim is bound, by a later placement within the new volume's topology;
//! - unbound, of a `WaitForFirstConsumer` class, node chosen: held while the volume is
//!   provisioned;
//! - missing, `Lost`, bound to a volume that is gone, or unbound and not waiting for a
//!   consumer (an `Immediate` class, a class that does not exist, no class): held, with
//!   the claim named in the reason ([`Held`]).
//!
//! A held job's pending tasks are not offered for placement and the job gets the
//! `VolumesReady=False` condition (see [`crate::cluster`]). Not honoured: generic
//! ephemeral volumes (their claims are made with the pod), and binding a `WaitForFirstConsumer` claim to a pre-provisioned volume
//! kube-scheduler would pick (the PV controller binds it, once a node is chosen, to a
//! volume it matches, and the job then follows that volume). It reads; it must not write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PodSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{ObjectRef, Store};
use switchyard_core::eligibility::{SelectorOperator, SelectorRequirement, SelectorTerm};

use crate::crd::TrainingJob;

/// The annotation kube-scheduler sets on a `WaitForFirstConsumer` claim to have its
/// volume provisioned for a node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The condition a job whose claims keep it from being placed gets (`False`), and loses
/// (`True`) once they no longer do.
pub const VOLUMES_CONDITION: &str = "VolumesReady";

/// The caches of claims, volumes and storage classes.
#[derive(Clone)]
pub struct VolumeCaches {
    /// Every PersistentVolumeClaim.
    pub claims: Store<PersistentVolumeClaim>,
    /// Every PersistentVolume.
    pub volumes: Store<PersistentVolume>,
    /// Every StorageClass.
    pub classes: Store<StorageClass>,
}

/// Why a job's claims keep it from being placed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Held {
    /// The condition's reason: `ClaimNotFound`, `ClaimLost`, `VolumeNotFound`,
    /// `ClaimUnbound` or `VolumeProvisioning`.
    pub reason: &'static str,
    /// What is wrong, naming the claim (`namespace/name`) and what would fix it.
    pub message: String,
}

/// A claim to be provisioned for the node of the first task that mounts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The claim's name (in the job's namespace).
    pub claim: String,
    /// The role whose tasks mount it.
    pub role: String,
}

/// What a job's claims say about placing it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobVolumes {
    /// Per role that mounts a claim: the node selector terms its claims add (each entry
    /// an OR of terms; every entry must hold).
    pub restrictions: BTreeMap<String, Vec<Vec<SelectorTerm>>>,
    /// Claims waiting for their first consumer, to be provisioned when placed.
    pub to_select: Vec<Selection>,
    /// Why the job cannot be placed now, if it cannot.
    pub held: Option<Held>,
}

/// The names of the claims `spec` mounts.
pub fn claims_of(spec: Option<&PodSpec>) -> Vec<&str> {
    spec.and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| Some(v.persistent_volume_claim.as_ref()?.claim_name.as_str()))
        .collect()
}

/// Whether any of `job`'s roles mounts a claim (most do not: nothing to look up).
pub fn mounts_claims(job: &TrainingJob) -> bool {
    job.spec
        .roles
        .iter()
        .any(|r| !claims_of(r.template.spec.as_ref()).is_empty())
}

impl VolumeCaches {
    /// Caches that have listed and hold nothing (a cluster without claims, as in tests
    /// that do not mount any).
    pub fn listed_empty() -> Self {
        fn listed<K>() -> Store<K>
        where
            K: kube::Resource<DynamicType = ()> + Clone + 'static,
        {
            let (store, mut writer) = kube::runtime::reflector::store();
            writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
            store
        }
        Self {
            claims: listed(),
            volumes: listed(),
            classes: listed(),
        }
    }

    /// What `job`'s claims say, read from the caches.
    pub fn of_job(&self, job: &TrainingJob) -> JobVolumes {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let mut out = JobVolumes::default();
        for role in &job.spec.roles {
            for claim_name in claims_of(role.template.spec.as_ref()) {
                let (terms, awaits) = match self.claim(&namespace, claim_name) {
                    Ok(ClaimVerdict::Restricts(terms)) => (terms, false),
                    Ok(ClaimVerdict::AwaitsConsumer(terms)) => (terms, true),
                    Err(held) => {
                        out.held.get_or_insert(held);
                        continue;
                    }
                };
                if !terms.is_empty() {
                    out.restrictions
                        .entry(role.name.clone())
                        .or_default()
                        .push(terms);
                }
                if awaits && !out.to_select.iter().any(|s| s.claim == claim_name) {
                    out.to_select.push(Selection {
                        claim: claim_name.to_string(),
                        role: role.name.clone(),
                    });
                }
            }
        }
        out
    }

    fn claim(&self, namespace: &str, name: &str) -> Result<ClaimVerdict, Held> {
        let id = format!("{namespace}/{name}");
        let Some(claim) = self.claims.get(&ObjectRef::new(name).within(namespace)) else {
            return Err(Held {
                reason: "ClaimNotFound",
                message: format!(
                    "PersistentVolumeClaim {id} does not exist; create it, or take it out of the template"
                ),
            });
        };
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase == Some("Lost") {
            return Err(Held {
                reason: "ClaimLost",
                message: format!(
                    "PersistentVolumeClaim {id} is Lost: its volume is gone; recreate the claim"
                ),
            });
        }
        let spec = claim.spec.as_ref();
        let volume_name = spec
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty());
        if let (Some("Bound"), Some(volume_name)) = (phase, volume_name) {
            let Some(volume) = self.volumes.get(&ObjectRef::new(volume_name)) else {
                return Err(Held {
                    reason: "VolumeNotFound",
                    message: format!(
                        "PersistentVolumeClaim {id} is bound to PersistentVolume {volume_name}, which does not exist"
                    ),
                });
            };
            let terms = volume
                .spec
                .as_ref()
                .and_then(|s| s.node_affinity.as_ref())
                .and_then(|a| a.required.as_ref())
                .map(|r| {
                    r.node_selector_terms
                        .iter()
                        .map(crate::rules::term)
                        .collect()
                })
                .unwrap_or_default();
            return Ok(ClaimVerdict::Restricts(terms));
        }
        let class_name = spec
            .and_then(|s| s.storage_class_name.as_deref())
            .unwrap_or_default();
        let class = (!class_name.is_empty())
            .then(|| self.classes.get(&ObjectRef::new(class_name)))
            .flatten();
        let waits = class
            .as_ref()
            .is_some_and(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
        if !waits {
            let why = match (class_name.is_empty(), class.is_some()) {
                (true, _) => {
                    "it names no storage class, so only a pre-provisioned volume can bind it"
                        .to_string()
                }
                (false, false) => format!("its storage class {class_name} does not exist"),
                (false, true) => format!(
                    "its storage class {class_name} binds Immediately, so it waits for a volume, not for a node"
                ),
            };
            return Err(Held {
                reason: "ClaimUnbound",
                message: format!("PersistentVolumeClaim {id} is not bound: {why}"),
            });
        }
        let selected = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SELECTED_NODE_ANNOTATION));
        if let Some(node) = selected {
            return Err(Held {
                reason: "VolumeProvisioning",
                message: format!(
                    "PersistentVolumeClaim {id} is being provisioned for node {node}; the job is placed once it is bound"
                ),
            });
        }
        let topology = class
            .and_then(|c| c.allowed_topologies.clone())
            .unwrap_or_default()
            .iter()
            .map(|t| SelectorTerm {
                match_expressions: t
                    .match_label_expressions
                    .iter()
                    .flatten()
                    .map(|r| SelectorRequirement {
                        key: r.key.clone(),
                        operator: SelectorOperator::In,
                        values: r.values.clone(),
                    })
                    .collect(),
            })
            .collect();
        Ok(ClaimVerdict::AwaitsConsumer(topology))
    }
}

enum ClaimVerdict {
    /// Bound: these terms (an OR; none: no restriction) say where its volume is.
    Restricts(Vec<SelectorTerm>),
    /// Waits for its first consumer; the class's allowed topologies (an OR; none: any).
    AwaitsConsumer(Vec<SelectorTerm>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::restricted;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;
    use std::sync::Arc;
    use switchyard_core::eligibility::PlacementRules;

    struct Storage {
        caches: VolumeCaches,
        claims: Writer<PersistentVolumeClaim>,
        volumes: Writer<PersistentVolume>,
        classes: Writer<StorageClass>,
    }

    impl Storage {
        fn new() -> Self {
            let (claims_store, claims) = kube::runtime::reflector::store();
            let (volumes_store, volumes) = kube::runtime::reflector::store();
            let (classes_store, classes) = kube::runtime::reflector::store();
            Self {
                caches: VolumeCaches {
                    claims: claims_store,
                    volumes: volumes_store,
                    classes: classes_store,
                },
                claims,
                volumes,
                classes,
            }
        }

        fn class(mut self, name: &str, mode: &str) -> Self {
            let class = serde_json::from_value(json!({"metadata": {"name": name},
                "provisioner": "p", "volumeBindingMode": mode,
                "allowedTopologies": [{"matchLabelExpressions": [
                    {"key": "topology.kubernetes.io/zone", "values": ["a", "b"]}]}]}))
            .unwrap();
            self.classes.apply_watcher_event(&Event::Apply(class));
            self
        }

        fn claim(mut self, name: &str, spec: serde_json::Value, phase: &str) -> Self {
            let claim = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ml"},
                "spec": spec, "status": {"phase": phase}}))
            .unwrap();
            self.claims.apply_watcher_event(&Event::Apply(claim));
            self
        }

        fn local_volume(mut self, name: &str, host: &str) -> Self {
            let volume = serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}}}))
            .unwrap();
            self.volumes.apply_watcher_event(&Event::Apply(volume));
            self
        }

        /// What job `a`, whose worker role mounts `claim`, gets from it.
        fn verdict(&self, claim: &str) -> JobVolumes {
            let job: TrainingJob = serde_json::from_value(json!({
                "apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                "metadata": {"name": "a", "namespace": "ml"},
                "spec": {"roles": [{"name": "worker", "replicas": 2, "template": {"spec": {
                    "containers": [{"name": "c", "image": "i"}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}}}]}
            }))
            .unwrap();
            self.caches.of_job(&job)
        }
    }

    fn held(verdict: &JobVolumes) -> (&'static str, String) {
        let held = verdict.held.as_ref().expect("the claim holds the job");
        (held.reason, held.message.clone())
    }

    #[test]
    fn a_claim_that_cannot_be_bound_for_a_node_holds_the_job_and_the_reason_names_it() {
        let storage = Storage::new()
            .class("fast", "Immediate")
            .class("wffc", "WaitForFirstConsumer")
            .claim(
                "lost",
                json!({"storageClassName": "fast", "volumeName": "pv-gone"}),
                "Lost",
            )
            .claim("immediate", json!({"storageClassName": "fast"}), "Pending")
            .claim("classless", json!({"storageClassName": ""}), "Pending")
            .claim(
                "unknown-class",
                json!({"storageClassName": "nope"}),
                "Pending",
            )
            .claim(
                "dangling",
                json!({"storageClassName": "fast", "volumeName": "pv-gone"}),
                "Bound",
            )
            .claim(
                "provisioning",
                json!({"storageClassName": "wffc"}),
                "Pending",
            );
        let (reason, message) = held(&storage.verdict("absent"));
        assert_eq!(reason, "ClaimNotFound");
        assert!(message.contains("ml/absent"), "{message}");
        assert_eq!(held(&storage.verdict("lost")).0, "ClaimLost");
        let (reason, message) = held(&storage.verdict("immediate"));
        assert_eq!(reason, "ClaimUnbound");
        assert!(
            message.contains("ml/immediate") && message.contains("Immediately"),
            "{message}"
        );
        assert!(
            held(&storage.verdict("classless"))
                .1
                .contains("no storage class")
        );
        assert!(
            held(&storage.verdict("unknown-class"))
                .1
                .contains("nope does not exist")
        );
        assert_eq!(held(&storage.verdict("dangling")).0, "VolumeNotFound");
        // Waiting for its consumer: placeable, within the class's zones, to be selected.
        let waiting = storage.verdict("provisioning");
        assert_eq!(waiting.held, None);
        assert_eq!(
            waiting.to_select,
            [Selection {
                claim: "provisioning".into(),
                role: "worker".into()
            }]
        );
        assert_eq!(
            waiting.restrictions["worker"][0][0].match_expressions[0].values,
            ["a", "b"]
        );
    }

    #[test]
    fn a_claim_whose_node_is_chosen_holds_the_job_until_it_is_bound_then_its_volume_decides() {
        let storage = Storage::new()
            .class("local", "WaitForFirstConsumer")
            .local_volume("pv-n3", "n3");
        let mut storage = storage;
        let claim = serde_json::from_value(json!({
            "metadata": {"name": "scratch", "namespace": "ml",
                "annotations": {SELECTED_NODE_ANNOTATION: "n3"}},
            "spec": {"storageClassName": "local"}, "status": {"phase": "Pending"}}))
        .unwrap();
        storage.claims.apply_watcher_event(&Event::Apply(claim));
        assert_eq!(held(&storage.verdict("scratch")).0, "VolumeProvisioning");
        let storage = storage.claim(
            "scratch",
            json!({"storageClassName": "local", "volumeName": "pv-n3"}),
            "Bound",
        );
        let bound = storage.verdict("scratch");
        assert_eq!(bound.held, None);
        assert!(bound.to_select.is_empty());
        let rules = restricted(&Arc::default(), &bound.restrictions["worker"]);
        let labels =
            |host: &str| BTreeMap::from([("kubernetes.io/hostname".to_string(), host.to_string())]);
        assert!(rules.allow(&labels("n3"), &[]));
        assert!(!rules.allow(&labels("n1"), &[]));
    }

    #[test]
    fn a_volume_s_terms_are_added_to_the_template_s_own_affinity_not_instead_of_it() {
        let term = |key: &str, value: &str| SelectorTerm {
            match_expressions: vec![SelectorRequirement {
                key: key.into(),
                operator: SelectorOperator::In,
                values: vec![value.into()],
            }],
        };
        let own = Arc::new(PlacementRules {
            required_node_affinity: vec![term("gpu", "a100"), term("gpu", "h100")],
            ..PlacementRules::default()
        });
        let zones = vec![term("zone", "a"), term("zone", "b")];
        let rules = restricted(&own, std::slice::from_ref(&zones));
        assert_eq!(rules.required_node_affinity.len(), 4, "every pairing");
        let node = |gpu: &str, zone: &str| {
            BTreeMap::from([
                ("gpu".to_string(), gpu.to_string()),
                ("zone".to_string(), zone.to_string()),
            ])
        };
        assert!(rules.allow(&node("h100", "b"), &[]));
        assert!(!rules.allow(&node("h100", "c"), &[]), "the volume's zone");
        assert!(!rules.allow(&node("v100", "a"), &[]), "the template's GPU");
        assert!(Arc::ptr_eq(&restricted(&own, &[]), &own), "nothing to add");
    }
}
