//! Pre-provisioned volumes for a claim waiting for its first consumer, as the
//! PersistentVolume controller's `FindMatchingVolume` (which kube-scheduler's volume
//! binding calls) finds them: `Available`, not being deleted, not promised to another
//! claim, of the claim's class and volume mode, offering its access modes, at least its
//! size, and selected by its selector; the smallest such volume a node can mount is the
//! one bound.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use switchyard_core::SelectorTerm;

use crate::quantity;

/// The class under which Kubernetes makes no volumes: only pre-provisioned ones bind.
pub(super) const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// A volume `claim` could be bound to, with where it can be mounted.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    /// The volume.
    pub volume: Arc<PersistentVolume>,
    /// Its node affinity's terms (an OR; none: any node).
    pub terms: Vec<SelectorTerm>,
    /// Its size in bytes.
    pub bytes: f64,
}

/// The volumes `claim` could be bound to, smallest first.
pub(super) fn candidates(
    claim: &PersistentVolumeClaim,
    volumes: &Store<PersistentVolume>,
) -> Vec<Candidate> {
    let spec = claim.spec.as_ref();
    let class = spec
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or_default();
    let mode = spec
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or("Filesystem");
    let modes = spec
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    let wanted = spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| quantity::parse(&q.0))
        .unwrap_or(0.0);
    let selector = spec.and_then(|s| s.selector.as_ref());
    let mut found: Vec<Candidate> = volumes
        .state()
        .into_iter()
        .filter_map(|volume| {
            let v = volume.spec.as_ref()?;
            let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
            let bytes = v
                .capacity
                .as_ref()
                .and_then(|c| c.get("storage"))
                .and_then(|q| quantity::parse(&q.0))?;
            let fits = phase == Some("Available")
                && volume.metadata.deletion_timestamp.is_none()
                && (v.claim_ref.is_none() || promised_to(&volume, claim))
                && v.storage_class_name.as_deref().unwrap_or_default() == class
                && v.volume_mode.as_deref().unwrap_or("Filesystem") == mode
                && modes
                    .iter()
                    .all(|m| v.access_modes.iter().flatten().any(|a| a == m))
                && bytes >= wanted
                && selector.is_none_or(|s| crate::spread::selects(s, volume.labels()));
            fits.then(|| Candidate {
                terms: node_terms(&volume),
                volume: volume.clone(),
                bytes,
            })
        })
        .collect();
    found.sort_by(|a, b| {
        a.bytes
            .total_cmp(&b.bytes)
            .then_with(|| a.volume.name_any().cmp(&b.volume.name_any()))
    });
    found
}

/// Whether `volume`'s `claimRef` names `claim` (a volume promised to a claim, by an
/// administrator or by a binding under way).
pub(super) fn promised_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(to) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    to.name.as_deref() == claim.metadata.name.as_deref()
        && to.namespace.as_deref() == claim.metadata.namespace.as_deref()
        && to
            .uid
            .as_deref()
            .is_none_or(|uid| Some(uid) == claim.metadata.uid.as_deref())
}

/// `volume`'s required node affinity as selector terms (none: any node).
pub(super) fn node_terms(volume: &PersistentVolume) -> Vec<SelectorTerm> {
    volume
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
        .unwrap_or_default()
}
