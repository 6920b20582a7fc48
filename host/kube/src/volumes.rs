//! Where a job's PersistentVolumeClaims let it run, as kube-scheduler's `VolumeBinding`
//! plugin judges it for a pod, read from caches of claims, volumes and storage classes.
//!
//! For each claim a role's template mounts (`volumes[].persistentVolumeClaim`):
//!
//! - bound: the volume's `spec.nodeAffinity.required` (a zonal disk, a local volume)
//!   restricts the role's nodes, added to the template's own rules;
//! - unbound, of a `WaitForFirstConsumer` class, no node chosen yet: placeable on the
//!   nodes of the pre-provisioned volumes that match it ([`matching`]) and, unless the
//!   class has no provisioner, within the class's `allowedTopologies`; placing it gets
//!   it a volume on the node chosen first ([`Selection`], [`Provision`]): the smallest
//!   matching volume the node can mount is promised to it (`claimRef`), else the claim
//!   is annotated `volume.kubernetes.io/selected-node` for dynamic provisioning, as
//!   kube-scheduler does; the pods are bound only once the claim is bound, by a later
//!   placement within the volume's topology;
//! - unbound, of a `WaitForFirstConsumer` class, node chosen or a volume promised: held
//!   while the volume is provisioned or bound; with no provisioner and no matching
//!   volume: held;
//! - missing, `Lost`, bound to a volume that is gone, or unbound and not waiting for a
//!   consumer (an `Immediate` class, a class that does not exist, no class): held, with
//!   the claim named in the reason ([`Held`]).
//!
//! For each generic ephemeral volume (`volumes[].ephemeral`), whose claim is made with
//! the pod ([`crate::ephemeral`]): its storage class (the template's, else the
//! cluster's default) must wait for its first consumer and have a provisioner, and its
//! allowed topologies restrict the role's nodes; a class that does not exist, binds
//! `Immediate`ly or makes no volumes holds the job.
//!
//! A held job's pending tasks are not offered for placement and the job gets the
//! `VolumesReady=False` condition (see [`crate::cluster`]). It reads; it must not
//! write.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimTemplate, PodSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use switchyard_core::{PlacementRules, SelectorOperator, SelectorRequirement, SelectorTerm};

use crate::crd::TrainingJob;

pub mod matching;

/// The annotation kube-scheduler sets on a `WaitForFirstConsumer` claim to have its
/// volume provisioned for a node.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The annotation (`"yes"`) on a volume whose `claimRef` a controller set (not an
/// administrator), which lets the PersistentVolume controller clear it on release.
pub const BOUND_BY_CONTROLLER_ANNOTATION: &str = "pv.kubernetes.io/bound-by-controller";
/// The annotation (`"true"`) that makes a storage class the cluster's default, the one
/// a claim naming no class gets.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
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
    /// `ClaimUnbound`, `VolumeProvisioning`, `VolumeBinding`, `NoMatchingVolume`, or
    /// for an ephemeral volume `StorageClassNotFound`, `BindsImmediately` or
    /// `NoProvisioner`.
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

/// The generic ephemeral volumes of `spec`: each volume's name and claim template.
pub fn ephemeral_of(
    spec: Option<&PodSpec>,
) -> impl Iterator<Item = (&str, &PersistentVolumeClaimTemplate)> {
    spec.and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let template = v.ephemeral.as_ref()?.volume_claim_template.as_ref()?;
            Some((v.name.as_str(), template))
        })
}

/// Whether any of `job`'s roles mounts a claim or an ephemeral volume (most do not:
/// nothing to look up).
pub fn mounts_claims(job: &TrainingJob) -> bool {
    job.spec.roles.iter().any(|r| {
        let spec = r.template.spec.as_ref();
        !claims_of(spec).is_empty() || ephemeral_of(spec).next().is_some()
    })
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
            for (volume, template) in ephemeral_of(role.template.spec.as_ref()) {
                match self.ephemeral(&role.name, volume, template) {
                    Ok(terms) if terms.is_empty() => {}
                    Ok(terms) => out
                        .restrictions
                        .entry(role.name.clone())
                        .or_default()
                        .push(terms),
                    Err(held) => {
                        out.held.get_or_insert(held);
                    }
                }
            }
        }
        out
    }

    /// Where role `role`'s ephemeral volume `volume` can be provisioned (its class's
    /// allowed topologies, an OR; none: anywhere), or why it cannot be.
    fn ephemeral(
        &self,
        role: &str,
        volume: &str,
        template: &PersistentVolumeClaimTemplate,
    ) -> Result<Vec<SelectorTerm>, Held> {
        let what = format!("role {role}'s ephemeral volume {volume}");
        let class = match template.spec.storage_class_name.as_deref() {
            Some("") => {
                return Err(Held {
                    reason: "StorageClassNotFound",
                    message: format!(
                        "{what} names no storage class (\"\"), so only a pre-provisioned volume \
                         could bind its claim, and a claim made with its pod cannot wait for \
                         one; name a WaitForFirstConsumer class"
                    ),
                });
            }
            Some(name) => self
                .classes
                .get(&ObjectRef::new(name))
                .ok_or_else(|| Held {
                    reason: "StorageClassNotFound",
                    message: format!("{what}: its storage class {name} does not exist"),
                })?,
            None => self.default_class().ok_or_else(|| Held {
                reason: "StorageClassNotFound",
                message: format!(
                    "{what} names no storage class and the cluster has no default one \
                     (annotated {DEFAULT_CLASS_ANNOTATION}: \"true\"); name a \
                     WaitForFirstConsumer class"
                ),
            })?,
        };
        if class.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
            return Err(Held {
                reason: "BindsImmediately",
                message: format!(
                    "{what}: its storage class {} binds Immediately, so its volume would be \
                     made before its pod's node is chosen, possibly where that node cannot \
                     mount it; use a WaitForFirstConsumer class",
                    class.name_any()
                ),
            });
        }
        if class.provisioner == matching::NO_PROVISIONER {
            return Err(Held {
                reason: "NoProvisioner",
                message: format!(
                    "{what}: its storage class {} makes no volumes, and a claim made with its \
                     pod is not matched to a pre-provisioned one here; mount a \
                     PersistentVolumeClaim instead, or use a class with a provisioner",
                    class.name_any()
                ),
            });
        }
        Ok(allowed_topology(&class))
    }

    /// The cluster's default storage class: of those annotated as the default, the
    /// newest (as the API server chooses when there are several), then by name.
    fn default_class(&self) -> Option<std::sync::Arc<StorageClass>> {
        self.classes
            .state()
            .into_iter()
            .filter(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
                    .is_some_and(|v| v == "true")
            })
            .max_by(|a, b| {
                let created = |c: &StorageClass| c.metadata.creation_timestamp.clone();
                created(a)
                    .cmp(&created(b))
                    .then_with(|| b.name_any().cmp(&a.name_any()))
            })
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
            return Ok(ClaimVerdict::Restricts(matching::node_terms(&volume)));
        }
        let class_name = spec
            .and_then(|s| s.storage_class_name.as_deref())
            .unwrap_or_default();
        let class = (!class_name.is_empty())
            .then(|| self.classes.get(&ObjectRef::new(class_name)))
            .flatten();
        let waiting = class
            .clone()
            .filter(|c| c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"));
        let Some(class) = waiting else {
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
        };
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
        let volumes = self.volumes.state();
        if let Some(volume) = volumes.iter().find(|v| matching::promised_to(v, &claim)) {
            return Err(Held {
                reason: "VolumeBinding",
                message: format!(
                    "PersistentVolumeClaim {id} is being bound to PersistentVolume {}; the job is placed once it is bound",
                    volume.name_any()
                ),
            });
        }
        // Where it can get a volume: on a pre-provisioned one, or on one its class makes.
        let mut places: Vec<Vec<SelectorTerm>> = matching::candidates(&claim, &self.volumes)
            .into_iter()
            .map(|c| c.terms)
            .collect();
        if class.provisioner != matching::NO_PROVISIONER {
            places.push(allowed_topology(&class));
        } else if places.is_empty() {
            return Err(Held {
                reason: "NoMatchingVolume",
                message: format!(
                    "PersistentVolumeClaim {id} waits for a pre-provisioned volume (its storage class {class_name} makes none), and no Available PersistentVolume of that class has its size, access modes, volume mode and selector"
                ),
            });
        }
        let topology = match places.iter().any(Vec::is_empty) {
            true => Vec::new(),
            false => places.concat(),
        };
        Ok(ClaimVerdict::AwaitsConsumer(topology))
    }

    /// How claim `name` (in `namespace`), waiting for its first consumer, gets a volume
    /// on `node` (its labels as [`crate::rules::RuledKubeNode`] has them): the smallest
    /// pre-provisioned volume the node can mount is bound to it, as kube-scheduler's
    /// volume binding does; else the class's provisioner makes one for the node. A
    /// volume in `taken` (promised to another claim of the same placement) is not
    /// offered again. None when neither can (the caches changed since the decision was
    /// taken).
    pub fn provision_on(
        &self,
        (namespace, name): (&str, &str),
        node: &str,
        labels: &BTreeMap<String, String>,
        taken: &[String],
    ) -> Option<Provision> {
        let claim = self.claims.get(&ObjectRef::new(name).within(namespace))?;
        let mounts = |terms: &[SelectorTerm]| {
            let rules = PlacementRules {
                required_node_affinity: terms.to_vec(),
                ..PlacementRules::default()
            };
            rules.allow(labels, &[])
        };
        let found = matching::candidates(&claim, &self.volumes)
            .into_iter()
            .find(|c| mounts(&c.terms) && !taken.contains(&c.volume.name_any()));
        if let Some(candidate) = found {
            return Some(Provision::Volume {
                claim: name.to_string(),
                claim_uid: claim.metadata.uid.clone().unwrap_or_default(),
                volume: candidate.volume.name_any(),
                version: candidate.volume.resource_version().unwrap_or_default(),
                node: node.to_string(),
            });
        }
        let class_name = claim.spec.as_ref()?.storage_class_name.as_deref()?;
        let class = self.classes.get(&ObjectRef::new(class_name))?;
        (class.provisioner != matching::NO_PROVISIONER && mounts(&allowed_topology(&class))).then(
            || Provision::ForNode {
                claim: name.to_string(),
                node: node.to_string(),
            },
        )
    }
}

/// How a claim waiting for its first consumer gets its volume on the node chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provision {
    /// The class's provisioner makes one for the node: the claim is annotated
    /// [`SELECTED_NODE_ANNOTATION`].
    ForNode {
        /// The claim's name (in the job's namespace).
        claim: String,
        /// The node.
        node: String,
    },
    /// A pre-provisioned volume the node can mount is promised to the claim (its
    /// `claimRef`), for the PersistentVolume controller to bind.
    Volume {
        /// The claim's name (in the job's namespace).
        claim: String,
        /// The claim's UID.
        claim_uid: String,
        /// The volume's name.
        volume: String,
        /// The volume's resourceVersion as seen: the promise is refused if it changed.
        version: String,
        /// The node chosen, which can mount it.
        node: String,
    },
}

/// A storage class's `allowedTopologies` as node selector terms (an OR; none: any node).
fn allowed_topology(class: &StorageClass) -> Vec<SelectorTerm> {
    class
        .allowed_topologies
        .iter()
        .flatten()
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
        .collect()
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
    use switchyard_core::PlacementRules;

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

    impl Storage {
        /// A class annotated as the cluster's default, created at `created`.
        fn default_class(mut self, name: &str, mode: &str, created: &str) -> Self {
            let class = serde_json::from_value(json!({"metadata": {"name": name,
                    "creationTimestamp": created,
                    "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
                "provisioner": "p", "volumeBindingMode": mode}))
            .unwrap();
            self.classes.apply_watcher_event(&Event::Apply(class));
            self
        }

        /// What job `a`, whose worker role has an ephemeral volume of `class` (none:
        /// the template names no class), gets from it.
        fn ephemeral_verdict(&self, class: Option<&str>) -> JobVolumes {
            let mut spec = json!({"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}});
            if let Some(class) = class {
                spec["storageClassName"] = json!(class);
            }
            let job: TrainingJob = serde_json::from_value(json!({
                "apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                "metadata": {"name": "a", "namespace": "ml"},
                "spec": {"roles": [{"name": "worker", "replicas": 2, "template": {"spec": {
                    "containers": [{"name": "c", "image": "i"}],
                    "volumes": [{"name": "scratch",
                        "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}]}}}]}
            }))
            .unwrap();
            assert!(mounts_claims(&job));
            self.caches.of_job(&job)
        }
    }

    #[test]
    fn an_ephemeral_volume_needs_a_class_that_waits_for_its_consumer_and_keeps_to_its_topology() {
        let storage = Storage::new()
            .class("wffc", "WaitForFirstConsumer")
            .class("fast", "Immediate");
        let placeable = storage.ephemeral_verdict(Some("wffc"));
        assert_eq!(placeable.held, None);
        assert!(
            placeable.to_select.is_empty(),
            "its claim is made with the pod"
        );
        assert_eq!(
            placeable.restrictions["worker"][0][0].match_expressions[0].values,
            ["a", "b"],
            "the class's allowed zones"
        );
        let (reason, message) = held(&storage.ephemeral_verdict(Some("fast")));
        assert_eq!(reason, "BindsImmediately");
        assert!(
            message.contains("worker") && message.contains("scratch") && message.contains("fast"),
            "{message}"
        );
        let storage = storage.local_class("local");
        assert_eq!(
            held(&storage.ephemeral_verdict(Some("local"))).0,
            "NoProvisioner"
        );
        let (reason, message) = held(&storage.ephemeral_verdict(Some("nope")));
        assert_eq!(reason, "StorageClassNotFound");
        assert!(message.contains("nope does not exist"), "{message}");
        assert_eq!(
            held(&storage.ephemeral_verdict(Some(""))).0,
            "StorageClassNotFound"
        );
        // No class named: the cluster's default, the newest when several claim to be.
        let (reason, message) = held(&storage.ephemeral_verdict(None));
        assert_eq!(reason, "StorageClassNotFound");
        assert!(message.contains("no default"), "{message}");
        let storage = storage
            .default_class("old-default", "Immediate", "2025-01-01T00:00:00Z")
            .default_class(
                "new-default",
                "WaitForFirstConsumer",
                "2026-01-01T00:00:00Z",
            );
        assert_eq!(storage.ephemeral_verdict(None).held, None);
        let storage = storage.default_class("newest", "Immediate", "2026-06-01T00:00:00Z");
        assert!(held(&storage.ephemeral_verdict(None)).1.contains("newest"));
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

    impl Storage {
        /// A `WaitForFirstConsumer` class whose volumes are all pre-provisioned.
        fn local_class(mut self, name: &str) -> Self {
            let class = serde_json::from_value(json!({"metadata": {"name": name},
                "provisioner": matching::NO_PROVISIONER,
                "volumeBindingMode": "WaitForFirstConsumer"}))
            .unwrap();
            self.classes.apply_watcher_event(&Event::Apply(class));
            self
        }

        /// A volume of `class` and `size` on node `host`, with `extra` merged into its
        /// JSON (an object of top-level parts, e.g. `status`).
        fn volume(
            mut self,
            name: &str,
            class: &str,
            size: &str,
            host: &str,
            extra: serde_json::Value,
        ) -> Self {
            let mut volume = json!({"metadata": {"name": name, "resourceVersion": "7"},
                "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": class,
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}},
                "status": {"phase": "Available"}});
            for (key, part) in extra.as_object().unwrap() {
                for (inner, value) in part.as_object().unwrap() {
                    volume[key][inner] = value.clone();
                }
            }
            let volume = serde_json::from_value(volume).unwrap();
            self.volumes.apply_watcher_event(&Event::Apply(volume));
            self
        }

        /// An unbound claim `name` of `class` asking for `size`.
        fn unbound(self, name: &str, class: &str, size: &str) -> Self {
            self.claim(
                name,
                json!({"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": size}}}),
                "Pending",
            )
        }
    }

    fn host(name: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())])
    }

    #[test]
    fn a_claim_waiting_for_its_consumer_is_offered_the_nodes_of_the_volumes_that_match_it_and_gets_the_smallest()
     {
        let none = json!({});
        let storage = Storage::new()
            .local_class("local")
            .volume("small", "local", "10Gi", "n1", none.clone())
            .volume("big", "local", "100Gi", "n2", none.clone())
            .volume("huge", "local", "1Ti", "n2", none.clone())
            .volume("other-class", "fast", "500Gi", "n3", none.clone())
            .volume(
                "read-only",
                "local",
                "500Gi",
                "n3",
                json!({"spec": {"accessModes": ["ReadOnlyMany"]}}),
            )
            .volume(
                "block",
                "local",
                "500Gi",
                "n3",
                json!({"spec": {"volumeMode": "Block"}}),
            )
            .volume(
                "released",
                "local",
                "500Gi",
                "n4",
                json!({"status": {"phase": "Released"}}),
            )
            .volume(
                "promised-elsewhere",
                "local",
                "500Gi",
                "n5",
                json!({"spec": {"claimRef": {"namespace": "ml", "name": "someone-else"}}}),
            )
            .unbound("data", "local", "50Gi")
            .unbound("too-big", "local", "2Ti");
        let waiting = storage.verdict("data");
        assert_eq!(waiting.held, None, "{:?}", waiting.held);
        let rules = restricted(&Arc::default(), &waiting.restrictions["worker"]);
        for (node, offered) in [
            ("n1", false),
            ("n2", true),
            ("n3", false),
            ("n4", false),
            ("n5", false),
        ] {
            assert_eq!(rules.allow(&host(node), &[]), offered, "node {node}");
        }
        assert_eq!(
            storage
                .caches
                .provision_on(("ml", "data"), "n2", &host("n2"), &[]),
            Some(Provision::Volume {
                claim: "data".into(),
                claim_uid: String::new(),
                volume: "big".into(),
                version: "7".into(),
                node: "n2".into(),
            }),
            "the smallest volume that fits, on the node chosen"
        );
        assert!(
            matches!(
                storage.caches.provision_on(("ml", "data"), "n2", &host("n2"), &["big".into()]),
                Some(Provision::Volume { volume, .. }) if volume == "huge"
            ),
            "a volume promised to another claim of the placement is not offered twice"
        );
        assert_eq!(
            storage
                .caches
                .provision_on(("ml", "data"), "n1", &host("n1"), &[]),
            None,
            "no volume of its own on n1, and the class makes none"
        );
        let (reason, message) = held(&storage.verdict("too-big"));
        assert_eq!(reason, "NoMatchingVolume");
        assert!(
            message.contains("ml/too-big") && message.contains("local"),
            "{message}"
        );
    }

    #[test]
    fn a_class_that_provisions_offers_its_topology_beside_the_matching_volumes_and_a_promised_volume_holds_the_job()
     {
        let storage = Storage::new()
            .class("wffc", "WaitForFirstConsumer")
            .volume("local-n9", "wffc", "100Gi", "n9", json!({}))
            .volume(
                "promised",
                "wffc",
                "100Gi",
                "n8",
                json!({"spec": {"claimRef": {"namespace": "ml", "name": "taken"}}}),
            )
            .unbound("data", "wffc", "50Gi")
            .unbound("taken", "wffc", "50Gi");
        let waiting = storage.verdict("data");
        let rules = restricted(&Arc::default(), &waiting.restrictions["worker"]);
        let zone =
            |z: &str| BTreeMap::from([("topology.kubernetes.io/zone".to_string(), z.to_string())]);
        assert!(
            rules.allow(&host("n9"), &[]),
            "the pre-provisioned volume's node"
        );
        assert!(rules.allow(&zone("a"), &[]), "where the class provisions");
        assert!(!rules.allow(&zone("c"), &[]));
        assert_eq!(
            storage
                .caches
                .provision_on(("ml", "data"), "n7", &zone("a"), &[]),
            Some(Provision::ForNode {
                claim: "data".into(),
                node: "n7".into()
            })
        );
        let (reason, message) = held(&storage.verdict("taken"));
        assert_eq!(reason, "VolumeBinding");
        assert!(message.contains("promised"), "{message}");
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
