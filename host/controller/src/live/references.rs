//! Policies named by a registry reference (`oci://REGISTRY/REPOSITORY:TAG`, pinned or not):
//! pulled for the API and the settings file, kept in the component store as the
//! reference pinned to its digest (a few bytes, where an upload keeps the whole
//! component), and pulled again, verified against that digest, at start and when a
//! replica becomes leader ([`super::kept`]). A tag is resolved once, when the reference is
//! first loaded; from then on the pinned reference is the policy's catalog source, so
//! every list of policies (status, the API, `ctl`, the console, the metrics) shows the
//! digest that runs. This module hands pulled bytes to the catalog; it does not decide
//! which policy is active and does not compile anything itself.

use std::collections::BTreeMap;

use switchyard_registry::{Error, Reference};

use super::kept::Persistence;
use super::{Applied, CatalogEntry, Controller, LiveError, Uploaded};

impl Controller {
    /// Pulls the policy `reference` names (a tag is resolved once, here), loads it like an
    /// upload under the name it gives itself, and keeps the reference pinned to the
    /// digest in the component store, so a restart or the next leader pulls exactly
    /// these bytes again. A refused reference or component changes nothing: the running
    /// policy keeps deciding.
    pub async fn load_reference(&self, reference: &str) -> Result<Uploaded, LiveError> {
        let _one_at_a_time = self.shared.uploading.lock().await;
        // Refusals are listed under `upload`, as a refused component is: one standing
        // entry however many references an operator tries.
        let (entry, applied, pinned) = self
            .pull_and_load(reference, BTreeMap::new(), "upload")
            .await?;
        self.keep_loaded(entry, applied, pinned.into_bytes()).await
    }

    /// Hands `kept` (an upload's component, or a reference pinned to its digest) to the
    /// component store under `entry`'s name, and says whether a restart will have it.
    /// Called with `Shared::uploading` held, so the copy kept for a name is the one
    /// loaded last.
    pub(super) async fn keep_loaded(
        &self,
        entry: CatalogEntry,
        applied: Option<Applied>,
        kept: Vec<u8>,
    ) -> Result<Uploaded, LiveError> {
        let (components, policy) = (
            self.shared.components.clone(),
            entry.slot.name().to_string(),
        );
        let kept = tokio::task::spawn_blocking(move || components.keep(&policy, &kept))
            .await
            .map_err(|_| LiveError::Stopped)?;
        let persistence = Persistence::of(
            entry.slot.name(),
            kept,
            &self.shared.catalog,
            &self.shared.metrics,
        );
        Ok(Uploaded {
            entry,
            applied,
            persistence,
        })
    }

    /// Pulls the policy `reference` names and loads it with `parameters` under the
    /// reference pinned to its digest as its source, keeping nothing: what names it (the
    /// policies directory's settings file) is its persistence. Returns the entry, the
    /// round it applies from when it replaced the active policy, and the pinned
    /// reference. A refusal is logged, counted and listed under `load_errors` as
    /// `failure_source`, until a reference loaded under that source succeeds.
    pub(crate) async fn pull_and_load(
        &self,
        reference: &str,
        parameters: BTreeMap<String, switchyard_core::Settings>,
        failure_source: &str,
    ) -> Result<(CatalogEntry, Option<Applied>, String), LiveError> {
        let written = failure_source.to_string();
        let refused = |error: Error| {
            self.shared.metrics.observe_load_error(error.metric_label());
            self.shared
                .catalog
                .record_failure(&written, &error.to_string());
            tracing::warn!(%error, source = written, "policy reference refused; the running policy stays");
            self.report_refusal(&written, &error.to_string());
            LiveError::from(error)
        };
        let reference = Reference::parse(reference).map_err(|e| refused(e.into()))?;
        let registry = self.shared.registry.clone();
        let pulled = tokio::task::spawn_blocking(move || registry.pull_blocking(&reference))
            .await
            .map_err(|_| LiveError::Stopped)?
            .map_err(refused)?;
        let pinned = pulled.reference.to_string();
        let (entry, applied) = self
            .load_policy(pulled.bytes.to_vec(), pinned.clone(), parameters)
            .await?;
        // An earlier refusal under that source is over.
        self.shared.catalog.clear_failure(&written);
        Ok((entry, applied, pinned))
    }
}
