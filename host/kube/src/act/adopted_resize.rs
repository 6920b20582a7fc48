//! A CPU weight for a pod of an adopted job ([`crate::adopt`]): the in-place resize a
//! TrainingJob's pod gets ([`super::resize`]), its training container's CPU request set
//! to the weight times the request in its owner's pod template, and what the kubelet
//! did with it (applied, deferred for room, infeasible on the node). An adopted job has
//! no status of ours, so each is told as an Event on the owner. It carries out a weight
//! it is given; it must not choose one, nor write the owner.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::ResourceExt;
use kube::runtime::events::EventType;

use super::actor::Actor;
use super::resize::weighted_millis;
use crate::template::ResizeState;
use crate::{Error, Result};

/// A weight for one adopted pod, as the caller read it from the owner's template.
pub(crate) struct AdoptedWeight<'a> {
    /// The container resized.
    pub(crate) container: &'a str,
    /// Its CPU request in the owner's template, millicores (weight 1).
    pub(crate) template_millis: u64,
    /// The weight, in (0, 1].
    pub(crate) weight: f64,
}

/// A resize this leader asked of an adopted pod, followed until the kubelet applied it
/// (the leader's pass keeps them by pod UID).
#[derive(Clone, Debug)]
pub(crate) struct AskedResize {
    /// The owner the Events go on, and the adopted job's id.
    pub(crate) owner: ObjectReference,
    pub(crate) id: String,
    /// The container resized and the CPU it was asked to run with, millicores.
    pub(crate) container: String,
    pub(crate) millis: u64,
    /// The reason of the last Event told about it.
    pub(crate) told: &'static str,
}

impl Actor {
    /// Asks `pod` (of adopted job `id`, whose owner is `owner`) to run with `weight`
    /// through the pod `resize` subresource, and returns the CPU asked for, millicores.
    /// A `ResizeRequested` Event on the owner says so; a refusal is a `ResizeRefused`
    /// Warning and an error, and any other failure a `SetCpuWeightFailed` one.
    pub(crate) async fn resize_adopted(
        &self,
        owner: &ObjectReference,
        id: &str,
        pod: &Pod,
        weight: AdoptedWeight<'_>,
        reason: &str,
    ) -> Result<u64> {
        let millis = weighted_millis(weight.template_millis, weight.weight);
        let name = pod.name_any();
        let api = self.pods_of(pod);
        let requested = self
            .request_resize(&api, &name, weight.container, millis)
            .await;
        let (event_type, event_reason, note, outcome) = match requested {
            Ok(None) => (
                EventType::Normal,
                "ResizeRequested",
                format!(
                    "pod {name} asked to run container {} with {millis}m CPU (weight {:.3} of the template's {}m): {reason}",
                    weight.container, weight.weight, weight.template_millis
                ),
                Ok(millis),
            ),
            Ok(Some((message, error))) => (
                EventType::Warning,
                "ResizeRefused",
                format!("{}: {message}", error.failure_reason()),
                Err(error),
            ),
            Err(error) => (
                EventType::Warning,
                "SetCpuWeightFailed",
                format!("{}: {error}", error.failure_reason()),
                Err(error),
            ),
        };
        self.event_about(owner, id, event_type, event_reason, "SetCpuWeight", &note)
            .await;
        outcome
    }

    /// Tells `owner` (of adopted job `id`) where the resize of `pod` stands: `Resized`,
    /// `ResizeDeferred` or `ResizeInfeasible` (a Warning). Returns the reason told.
    pub(crate) async fn tell_resize(
        &self,
        owner: &ObjectReference,
        id: &str,
        pod: &Pod,
        state: &ResizeState,
    ) -> &'static str {
        let name = pod.name_any();
        let reason = resize_told(state);
        let (event_type, note) = match state {
            ResizeState::Applied => (
                EventType::Normal,
                format!("pod {name} runs with the CPU asked for"),
            ),
            ResizeState::Pending(message) => (
                EventType::Normal,
                format!("pod {name} waits for room to resize: {message}"),
            ),
            ResizeState::Infeasible(message) => (
                EventType::Warning,
                format!("pod {name} cannot be resized on its node: {message}"),
            ),
        };
        self.event_about(owner, id, event_type, reason, "SetCpuWeight", &note)
            .await;
        reason
    }
}

/// The reason of the Event on the owner that tells `state`.
pub(crate) fn resize_told(state: &ResizeState) -> &'static str {
    match state {
        ResizeState::Applied => "Resized",
        ResizeState::Pending(_) => "ResizeDeferred",
        ResizeState::Infeasible(_) => "ResizeInfeasible",
    }
}

/// A weight the owner's template does not allow, as the error a refused action is.
pub(crate) fn weight_not_offered(id: &str, task: &str, why: &str) -> Error {
    Error::Unsupported(format!(
        "a CPU weight is not offered for task {task} of adopted job {id}: {why}"
    ))
}
