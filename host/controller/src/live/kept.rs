//! Uploads that outlive the process: what the live controller does with a
//! [`ComponentStore`]. An accepted upload is handed to the store, and the upload's answer
//! says whether a restart will have it ([`Persistence`]); at start, and when a replica
//! becomes leader, every kept component is loaded into the catalog again, before the
//! remembered active policy is resolved, so the same policies (with the same digests)
//! are there to resume. A kept component that no longer loads is a load error like a
//! refused upload (log, metric, `load_errors`) and the controller goes on without it.
//! This module does not decide which policy is active and does not know where or how
//! the store keeps things.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::catalog::Catalog;
use super::registry_access::RegistryAccess;
use crate::metrics::Metrics;
use switchyard_control::{ComponentStore, KeepError};
use switchyard_core::ComponentDigest;

/// The catalog source of a component loaded from where the store kept it.
pub(super) fn kept_source(location: &str) -> String {
    format!("kept:{location}")
}

/// Whether an accepted upload survives a restart of the controller.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Persistence {
    /// True when the state store kept the component: a restarted controller, and the
    /// replica that leads next, load it again.
    pub survives_restart: bool,
    /// Where it is kept (a file under `--state-dir`, or a ConfigMap), when it is.
    pub location: Option<String>,
    /// When it is not kept: why, and how to ship the policy so that it survives.
    pub warning: Option<String>,
}

impl Persistence {
    /// What keeping `policy`'s upload came to; counted and logged when it was not kept.
    pub(super) fn of(
        policy: &str,
        kept: Result<String, KeepError>,
        catalog: &Catalog,
        metrics: &Metrics,
    ) -> Self {
        match kept {
            Ok(location) => {
                // An older copy there that failed to load at start is replaced now.
                catalog.clear_failure(&kept_source(&location));
                tracing::info!(policy, location, "upload kept for the next start");
                Persistence {
                    survives_restart: true,
                    location: Some(location),
                    warning: None,
                }
            }
            Err(error) => {
                metrics.observe_upload_not_kept(error.metric_label());
                match &error {
                    KeepError::NothingKept => tracing::info!(policy, "{error}"),
                    _ => tracing::warn!(policy, "{error}"),
                }
                Persistence {
                    survives_restart: false,
                    location: None,
                    warning: Some(error.to_string()),
                }
            }
        }
    }
}

/// Whether what a component store kept is a pinned reference rather than a component's
/// bytes (a component starts with the Wasm magic, a reference with `oci://`).
fn kept_reference(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes)
        .ok()
        .filter(|text| switchyard_registry::Reference::is_reference(text))
        .map(str::trim)
}

/// Loads every component `store` kept into `catalog`, skipping those already loaded
/// (same digest, or the same pinned reference), and pulls the kept references through
/// `registry`. Returns the refused ones as (source, error); each is logged, counted and
/// listed under `load_errors`.
pub(super) fn restore(
    catalog: &Catalog,
    store: &dyn ComponentStore,
    registry: &RegistryAccess,
    metrics: &Metrics,
) -> Vec<(String, String)> {
    let listed = catalog.list();
    let loaded: BTreeSet<String> = listed.iter().map(|p| p.digest.clone()).collect();
    let sources: BTreeSet<String> = listed.into_iter().map(|p| p.source).collect();
    let mut refused = Vec::new();
    for kept in store.kept() {
        let (source, error, kind) = match kept {
            Err(error) => {
                let source = kept_source(&error.place());
                (source, error.to_string(), "read")
            }
            Ok(kept) => match kept_reference(&kept.bytes) {
                Some(reference) if sources.contains(reference) => {
                    catalog.clear_failure(reference);
                    continue;
                }
                Some(reference) => match pull_kept(catalog, registry, reference) {
                    Ok(()) => continue,
                    Err((error, kind)) => (reference.to_string(), error, kind),
                },
                None => {
                    let source = kept_source(&kept.location);
                    if loaded.contains(&ComponentDigest::of(&kept.bytes).to_hex()) {
                        catalog.clear_failure(&source);
                        continue;
                    }
                    match catalog.load(&kept.bytes, &source, &BTreeMap::new()) {
                        Ok(entry) => {
                            tracing::info!(policy = entry.slot.name(), digest = %entry.slot.module.digest(), source, "kept upload loaded");
                            continue;
                        }
                        Err(error) => (source, error.to_string(), error.metric_label()),
                    }
                }
            },
        };
        metrics.observe_load_error(kind);
        catalog.record_failure(&source, &error);
        tracing::warn!(
            source,
            error,
            "a kept policy no longer loads; going on without it (upload it, or load its reference, again to replace the kept copy)"
        );
        refused.push((source, error));
    }
    refused
}

/// Pulls the kept, pinned `reference` and loads it under that reference as its source;
/// the error and its metric label when either fails.
fn pull_kept(
    catalog: &Catalog,
    registry: &RegistryAccess,
    reference: &str,
) -> Result<(), (String, &'static str)> {
    let parsed = switchyard_registry::Reference::parse(reference).map_err(|error| {
        (
            format!("the kept reference `{reference}` does not parse: {error}"),
            "reference",
        )
    })?;
    let pulled = registry
        .pull_blocking(&parsed)
        .map_err(|error| (error.to_string(), error.metric_label()))?;
    let entry = catalog
        .load(&pulled.bytes, reference, &BTreeMap::new())
        .map_err(|error| (error.to_string(), error.metric_label()))?;
    tracing::info!(policy = entry.slot.name(), digest = %entry.slot.module.digest(), source = reference, "kept reference pulled and loaded");
    Ok(())
}
