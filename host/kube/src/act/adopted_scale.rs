//! Scaling an elastic adopted job ([`crate::adopt`]): the one write to an owner. The
//! new replica count goes to the owner's own `scale` subresource (a PyTorchJob's sets
//! `.spec.pytorchReplicaSpecs.Worker.replicas`), the interface a HorizontalPodAutoscaler
//! scales it through, with the owner's resourceVersion as read as the precondition; the
//! owner's operator then makes the new pods (gated; released to the nodes the scale
//! named, else placed by the policy like any held pod) or deletes those at or past the
//! new count. It writes nothing else of the owner
//! and touches no pod.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use kube::runtime::events::EventType;
use serde_json::json;

use super::actor::Actor;
use crate::{Error, FIELD_MANAGER, Result, retry};

/// A scale of one adopted job's owner.
pub(crate) struct OwnerScale<'a> {
    /// The owner's resource (it must have a `scale` subresource).
    pub(crate) resource: &'a ApiResource,
    /// The owner's namespace and name.
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
    /// The replicas its spec asks for now, and the replicas asked.
    pub(crate) from: u32,
    pub(crate) to: u32,
    /// The owner's resourceVersion as read: the scale is refused (409) if it changed.
    pub(crate) resource_version: Option<&'a str>,
}

impl Actor {
    /// Asks `owner` (of adopted job `id`) for `scale.to` replicas through its `scale`
    /// subresource. A `ScaleRequested` Event on the owner says so; a failure is a
    /// `ScaleFailed` Warning and an error.
    pub(crate) async fn scale_adopted(
        &self,
        owner: &ObjectReference,
        id: &str,
        scale: OwnerScale<'_>,
        reason: &str,
    ) -> Result<()> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), scale.namespace, scale.resource);
        let mut patch = json!({"spec": {"replicas": scale.to}});
        if let Some(version) = scale.resource_version {
            patch["metadata"] = json!({"resourceVersion": version});
        }
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(patch);
        let outcome = retry::with_backoff("scale", || {
            self.guard
                .call(api.patch_scale(scale.name, &params, &patch))
        })
        .await;
        let kind = owner.kind.as_deref().unwrap_or("owner");
        match outcome {
            Ok(_) => {
                let note = format!(
                    "asked the {kind}'s scale subresource for {} replicas (from {}); its operator makes or deletes the pods: {reason}",
                    scale.to, scale.from
                );
                self.event_about(
                    owner,
                    id,
                    EventType::Normal,
                    "ScaleRequested",
                    "Scale",
                    &note,
                )
                .await;
                Ok(())
            }
            Err(error) => {
                let changed = matches!(&error, kube::Error::Api(s) if s.code == 409);
                let error = Error::api(format!(
                    "scaling {kind} {}/{} to {} replicas{}",
                    scale.namespace,
                    scale.name,
                    scale.to,
                    if changed {
                        " (it changed since it was read; the next round sees it as it is)"
                    } else {
                        ""
                    }
                ))(error);
                let note = format!("{}: {error}", error.failure_reason());
                self.event_about(owner, id, EventType::Warning, "ScaleFailed", "Scale", &note)
                    .await;
                Err(error)
            }
        }
    }
}
