//! Acting on adopted jobs ([`crate::adopt`]), whose pods their owner's operator makes:
//! a gang of gated pods released to kube-scheduler pinned to the policy's nodes, all or
//! none, through the same release as a TrainingJob's ([`super::place`]); a preemption
//! or a move asked of the pods as a checkpoint request (the annotation, as for a
//! TrainingJob); and, once every asked pod acknowledged or its grace is over, each pod
//! evicted through the Eviction API, which honours PodDisruptionBudgets (a refusal is
//! handed back with the API server's message and `Retry-After`) and marks the pod
//! `DisruptionTarget`, so an owner that ignores disruptions makes a new gated pod
//! without counting a failure. Events go on the owner (or, for a pod no enabled kind
//! owns, on the pod). It must never write an owner object, nor delete a pod.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::actor::{Actor, describe_pairs};
use super::place::release_each;
use super::told::Told;
use crate::pods::delete_key;
use crate::{Error, FIELD_MANAGER, Result};

/// What became of an eviction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Eviction {
    /// The API server accepted it (or this process sent it already): the pod stops.
    Sent,
    /// The pod was gone already.
    Gone,
    /// Refused for now (429): a PodDisruptionBudget allows no disruption at the moment,
    /// or its status is not up to date yet.
    Refused(Refusal),
}

/// The API server's word on an eviction a PodDisruptionBudget refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// Its message with its causes (the budget's name, the healthy pods it needs and has).
    pub(crate) message: String,
    /// The seconds it asks the client to wait before asking again (its `Retry-After`),
    /// when it says.
    pub(crate) retry_after: Option<u32>,
}

impl Refusal {
    /// The refusal `status` says: its message followed by its causes' (the eviction
    /// handler names the budget only in a cause), and its `retryAfterSeconds`.
    fn of(status: &kube::core::Status) -> Self {
        let mut message = status.message.clone();
        let details = status.details.as_ref();
        for cause in details.iter().flat_map(|d| &d.causes) {
            if !cause.message.is_empty() {
                message = format!("{} {}", message.trim_end(), cause.message);
            }
        }
        Refusal {
            message,
            retry_after: details.map(|d| d.retry_after_seconds).filter(|&s| s > 0),
        }
    }
}

impl Actor {
    pub(super) fn pods_of(&self, pod: &Pod) -> Api<Pod> {
        Api::namespaced(
            self.client.clone(),
            &pod.namespace().unwrap_or_else(|| "default".into()),
        )
    }

    /// Releases each of `pods` (gated members of the adopted job `id`, whose owner is
    /// `owner`) to its node, all or none: when one release fails, the pods this call
    /// released are evicted again, and the owner makes them anew, gated. A `Placed`
    /// Event on the owner says where each went, and a failure a `PlacementFailed` one.
    pub(crate) async fn release_adopted(
        &self,
        owner: &ObjectReference,
        id: &str,
        pods: &[(&Pod, &str)],
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        let Some((first, _)) = pods.first() else {
            return Ok(());
        };
        let api = self.pods_of(first);
        let (released, outcome) = release_each(&api, &self.guard, id, pods, now).await;
        let placed = describe_pairs(pods.iter().map(|(p, n)| (p.name_any(), *n)));
        match outcome {
            Ok(()) => {
                let note = format!("{placed}: {reason}");
                self.event_about(owner, id, EventType::Normal, "Placed", "Place", &note)
                    .await;
                Ok(())
            }
            Err(error) => {
                for (pod, _) in &pods[..released] {
                    if let Err(e) = self.evict_once(pod).await {
                        tracing::warn!(error = %e, pod = pod.name_any(), "taking back a member of a failed release");
                    }
                }
                let note = format!("{}: {error}", error.failure_reason());
                self.event_about(
                    owner,
                    id,
                    EventType::Warning,
                    "PlacementFailed",
                    "Place",
                    &note,
                )
                .await;
                Err(error)
            }
        }
    }

    /// Asks each of `pods` (the members of the adopted job `id`) to checkpoint with the
    /// annotation at `now`; the leader's pass evicts them once every one acknowledged its
    /// checkpoint, or else at its grace's end. `action` (`Preempt`, `Migrate`) and
    /// `reason` go in the owner's Event.
    pub(crate) async fn ask_adopted_checkpoint(
        &self,
        owner: &ObjectReference,
        id: &str,
        pods: &[&Pod],
        action: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        for pod in pods {
            if let Err(error) = self.annotate_pod_once(&self.pods_of(pod), pod, now).await {
                let note = format!("{}: {error}", error.failure_reason());
                let failed = format!("{action}Failed");
                self.event_about(owner, id, EventType::Warning, &failed, action, &note)
                    .await;
                return Err(error);
            }
        }
        let note = format!(
            "checkpoint asked of {} pod(s); they are evicted once every one acknowledged it, or at their grace's end: {reason}",
            pods.len()
        );
        self.event_about(
            owner,
            id,
            EventType::Normal,
            "CheckpointRequested",
            action,
            &note,
        )
        .await;
        Ok(())
    }

    /// Evicts `pod` (the Eviction API, with its UID as a precondition) unless this
    /// process already has.
    pub(crate) async fn evict_once(&self, pod: &Pod) -> Result<Eviction> {
        if self.deleted_here(pod) {
            return Ok(Eviction::Sent);
        }
        let name = pod.name_any();
        // The body is written here, not with the client's `evict`: its body names the
        // options `delete_options`, which the API server does not know, so the UID
        // precondition would be dropped.
        let body = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": pod.namespace()},
            "deleteOptions": {"preconditions": {"uid": pod.metadata.uid}}});
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        // One call, not retried here: a budget that allows no disruption now is asked
        // again at the next pass, which does not hold up the others.
        let api = self.pods_of(pod);
        let outcome = self
            .guard
            .call(api.create_subresource::<_, serde_json::Value>("eviction", &name, &params, &body))
            .await;
        let eviction = match outcome {
            Ok(_) => Eviction::Sent,
            Err(kube::Error::Api(s)) if s.is_not_found() => Eviction::Gone,
            // The UID precondition failed: the pod meant is gone already.
            Err(kube::Error::Api(s)) if s.code == 409 => Eviction::Gone,
            Err(kube::Error::Api(s)) if s.code == 429 => {
                return Ok(Eviction::Refused(Refusal::of(&s)));
            }
            Err(error) => return Err(Error::api(format!("evicting pod {name}"))(error)),
        };
        self.deletes_sent
            .lock()
            .expect("deletes lock")
            .insert(delete_key(pod));
        Ok(eviction)
    }

    /// The one Event on a gated pod of this queue that no enabled kind owns: told once
    /// per pod (its UID names the occasion), whichever replica leads.
    pub(crate) async fn tell_not_enabled(&self, pod: &Pod, message: &str) -> Result<Told> {
        let reference = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        };
        let occasion = format!(
            "integrationnotenabled.{}",
            pod.metadata.uid.as_deref().unwrap_or_default()
        );
        self.tell_once(
            &reference,
            &occasion,
            EventType::Warning,
            crate::INTEGRATION_NOT_ENABLED_REASON,
            "Adopt",
            message,
        )
        .await
    }
}
