//! Where a job's PersistentVolumeClaims let it run, as kube-scheduler's `VolumeBinding`
//! plugin judges it for a pod, read from caches of claims, volumes and storage classes:
//! the policy's hint. kube-scheduler, which binds, does the volume binding itself (it
//! picks a pre-provisioned volume or has the claim's class provision one for the node it
//! binds the pod to, and the ephemeral volume controller makes a pod's ephemeral claims),
//! and refuses a node its volumes cannot reach; such a refusal comes back to the policy.
//!
//! For each claim a role's template mounts (`volumes[].persistentVolumeClaim`):
//!
//! - bound: the volume's `spec.nodeAffinity.required` (a zonal disk, a local volume)
//!   restricts the role's nodes, added to the template's own rules;
//! - unbound, of a `WaitForFirstConsumer` class: placeable on the nodes of the
//!   pre-provisioned volumes that match it ([`matching`]) and, unless the class has no
//!   provisioner, within the class's `allowedTopologies`; with no provisioner and no
//!   matching volume: held;
//! - missing, `Lost`, bound to a volume that is gone, or unbound and not waiting for a
//!   consumer (an `Immediate` class, a class that does not exist, no class): held, with
//!   the claim named in the reason ([`Held`]).
//!
//! For each generic ephemeral volume (`volumes[].ephemeral`), its storage class's (the
//! template's, else the cluster's default) allowed topologies restrict the role's
//! nodes.
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
use switchyard_core::{SelectorOperator, SelectorRequirement, SelectorTerm};

use crate::crd::TrainingJob;

mod matching;

/// The annotation (`"true"`) that makes a storage class the cluster's default, the one
/// a claim naming no class gets.
pub(crate) const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The condition a job whose claims keep it from being placed gets (`False`), and loses
/// (`True`) once they no longer do.
pub(crate) const VOLUMES_CONDITION: &str = "VolumesReady";

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
    /// `ClaimUnbound` or `NoMatchingVolume`.
    pub reason: &'static str,
    /// What is wrong, naming the claim (`namespace/name`) and what would fix it.
    pub message: String,
}

/// What a job's claims say about placing it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobVolumes {
    /// Per role that mounts a claim: the node selector terms its claims add (each entry
    /// an OR of terms; every entry must hold).
    pub restrictions: BTreeMap<String, Vec<Vec<SelectorTerm>>>,
    /// Why the job cannot be placed now, if it cannot.
    pub held: Option<Held>,
}

/// The names of the claims `spec` mounts.
pub(crate) fn claims_of(spec: Option<&PodSpec>) -> Vec<&str> {
    spec.and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| Some(v.persistent_volume_claim.as_ref()?.claim_name.as_str()))
        .collect()
}

/// The generic ephemeral volumes of `spec`: each volume's name and claim template.
pub(crate) fn ephemeral_of(
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
pub(crate) fn mounts_claims(job: &TrainingJob) -> bool {
    job.spec
        .roles
        .iter()
        .any(|r| spec_mounts_claims(r.template.spec.as_ref()))
}

/// Whether a pod made from `spec` mounts a claim or an ephemeral volume.
pub(crate) fn spec_mounts_claims(spec: Option<&PodSpec>) -> bool {
    !claims_of(spec).is_empty() || ephemeral_of(spec).next().is_some()
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
            let (terms, held) = self.of_pod_spec(&namespace, role.template.spec.as_ref());
            if let Some(held) = held {
                out.held.get_or_insert(held);
            }
            if !terms.is_empty() {
                out.restrictions
                    .entry(role.name.clone())
                    .or_default()
                    .extend(terms);
            }
        }
        out
    }

    /// What the claims and ephemeral volumes of a pod made from `spec` in `namespace`
    /// say: the node selector terms they add (each entry an OR of terms; every entry must
    /// hold), and why they hold the pod, if they do (the first claim that does). A
    /// TrainingJob's role template and an adopted job's pod are read alike.
    pub(crate) fn of_pod_spec(
        &self,
        namespace: &str,
        spec: Option<&PodSpec>,
    ) -> (Vec<Vec<SelectorTerm>>, Option<Held>) {
        let mut restrictions = Vec::new();
        let mut first_held = None;
        for claim_name in claims_of(spec) {
            match self.claim(namespace, claim_name) {
                Ok(terms) if !terms.is_empty() => restrictions.push(terms),
                Ok(_) => {}
                Err(held) => {
                    first_held.get_or_insert(held);
                }
            }
        }
        for (_, template) in ephemeral_of(spec) {
            let terms = self.ephemeral(template);
            if !terms.is_empty() {
                restrictions.push(terms);
            }
        }
        (restrictions, first_held)
    }

    /// Where an ephemeral volume made from `template` can be provisioned: its storage
    /// class's allowed topologies (an OR; none: anywhere, or a class not found).
    fn ephemeral(&self, template: &PersistentVolumeClaimTemplate) -> Vec<SelectorTerm> {
        let class = match template.spec.storage_class_name.as_deref() {
            Some("") => None,
            Some(name) => self.classes.get(&ObjectRef::new(name)),
            None => self.default_class(),
        };
        class.map(|c| allowed_topology(&c)).unwrap_or_default()
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

    /// Where claim `namespace/name` lets its pods run (node selector terms, an OR; none:
    /// anywhere), or why it holds them.
    fn claim(&self, namespace: &str, name: &str) -> Result<Vec<SelectorTerm>, Held> {
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
            return Ok(matching::node_terms(&volume));
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
        Ok(topology)
    }
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

#[cfg(test)]
mod tests;
