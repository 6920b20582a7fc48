//! A CPU weight as an in-place resize of the training container's CPU request (the pod
//! `resize` subresource), and the `CpuWeightApplied` condition that follows what the
//! kubelet did with it: applied, deferred for room, or infeasible on the node.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::actor::{Actor, CPU_WEIGHT_CONDITION, status_of};
use super::status::set_condition;
use crate::crd::TrainingJob;
use crate::pods::terminated;
use crate::template::{self, ResizeState};
use crate::{Error, Result, quantity, retry};

impl Actor {
    /// Sets the CPU weight of `pod` by resizing its training container's CPU request to
    /// `weight` times the template's. A refusal becomes the `CpuWeightApplied=False`
    /// condition and a `ResizeRefused` Warning Event, and is returned; any other
    /// failure is reported as `SetCpuWeightFailed`.
    pub async fn set_cpu_weight(
        &self,
        job: &TrainingJob,
        pod: &Pod,
        weight: f64,
        reason: &str,
    ) -> Result<()> {
        match self.resize(job, pod, weight, reason).await {
            Ok(None) => Ok(()),
            Ok(Some(refusal)) => Err(refusal),
            Err(error) => Err(self.action_failed(job, "SetCpuWeight", error).await),
        }
    }

    /// The resize behind [`Actor::set_cpu_weight`]: `Ok(Some(refusal))` when the API
    /// server refused it and the refusal is reported on the job already.
    async fn resize(
        &self,
        job: &TrainingJob,
        pod: &Pod,
        weight: f64,
        reason: &str,
    ) -> Result<Option<Error>> {
        let role = pod
            .labels()
            .get(crate::ROLE_LABEL)
            .and_then(|r| job.spec.roles.iter().find(|role| &role.name == r))
            .ok_or_else(|| {
                Error::NotFound(format!("pod {} has no role of its job", pod.name_any()))
            })?;
        let (container, base) =
            template::training_container(role).ok_or_else(|| Error::InvalidSpec {
                job: job.name_any(),
                message: format!("role `{}` has no container", role.name),
            })?;
        if base == 0 {
            return Err(Error::InvalidSpec {
                job: job.name_any(),
                message: format!(
                    "container `{container}` of role `{}` requests no CPU, so it has no weight to lower",
                    role.name
                ),
            });
        }
        let millis = weighted_millis(base, weight);
        let name = pod.name_any();
        // The API server accepting a resize is not the kubelet applying it: the
        // condition is Unknown until the pod's status shows the new request (or says
        // the resize is deferred or infeasible; see [`Actor::report_resize`]).
        let (status, condition_reason, message, refusal) = match self
            .request_resize(&self.pods(job), &name, container, millis)
            .await?
        {
            None => (
                "Unknown",
                "ResizeRequested",
                format!(
                    "pod {name} asked to run with {millis}m CPU (weight {weight:.3}): {reason}"
                ),
                None,
            ),
            Some((message, error)) => ("False", "ResizeRefused", message, Some(error)),
        };
        self.update_status(job, |s| {
            set_condition(s, CPU_WEIGHT_CONDITION, status, condition_reason, &message)
        })
        .await?;
        let (event_type, note) = match &refusal {
            Some(error) => (
                EventType::Warning,
                format!("{}: {message}", error.failure_reason()),
            ),
            None => (EventType::Normal, message),
        };
        self.event(job, event_type, condition_reason, "SetCpuWeight", &note)
            .await;
        Ok(refusal)
    }

    /// Patches the `resize` subresource of pod `name` so that its container `container`
    /// requests `millis` CPU: `Ok(None)` when the API server accepted it,
    /// `Ok(Some((message, error)))` when it refused it (the resize is not possible on
    /// this cluster or for this pod), an error for anything else.
    pub(super) async fn request_resize(
        &self,
        api: &Api<Pod>,
        name: &str,
        container: &str,
        millis: u64,
    ) -> Result<Option<(String, Error)>> {
        let patch = Patch::Strategic(
            json!({"spec": {"containers": [{"name": container, "resources": {"requests": {"cpu": quantity::cpu_millis(millis)}}}]}}),
        );
        let params = PatchParams::default();
        let outcome = retry::with_backoff("resize", || {
            self.guard.call(api.patch_resize(name, &params, &patch))
        })
        .await;
        match outcome {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 404 | 405 | 422) => {
                let message = format!(
                    "the cluster refused to resize pod {name} in place ({}): {}",
                    s.code, s.message
                );
                let error =
                    Error::api(format!("resizing pod {name} in place"))(kube::Error::Api(s));
                Ok(Some((message, error)))
            }
            Err(error) => Err(Error::api(format!("resizing pod {name}"))(error)),
        }
    }

    /// Brings the `CpuWeightApplied` condition of a job whose resize was requested up
    /// to date with its pods: `True` once each pod's status shows the request its spec
    /// asks for, `False` (`ResizeInfeasible`) when a node cannot fit it, `Unknown`
    /// (`ResizeDeferred`) while it waits for room. Writes nothing when nothing changed.
    pub async fn report_resize(&self, job: &TrainingJob, job_pods: &[Pod]) -> Result<()> {
        let status = status_of(job);
        let Some(current) = status
            .conditions
            .iter()
            .find(|c| c.type_ == CPU_WEIGHT_CONDITION && c.status == "Unknown")
        else {
            return Ok(());
        };
        let mut outcome = (
            "True",
            "Resized",
            "every pod runs with the CPU asked for".to_string(),
        );
        for pod in job_pods.iter().filter(|p| !terminated(p)) {
            match template::resize_state(pod) {
                ResizeState::Applied => {}
                ResizeState::Infeasible(message) => {
                    outcome = (
                        "False",
                        "ResizeInfeasible",
                        format!(
                            "pod {} cannot be resized on its node: {message}",
                            pod.name_any()
                        ),
                    );
                    break;
                }
                ResizeState::Pending(message) => {
                    outcome = (
                        "Unknown",
                        "ResizeDeferred",
                        format!("pod {} waits for room to resize: {message}", pod.name_any()),
                    );
                }
            }
        }
        let (value, reason, message) = outcome;
        if current.reason == reason {
            return Ok(());
        }
        self.update_status(job, |s| {
            set_condition(s, CPU_WEIGHT_CONDITION, value, reason, &message)
        })
        .await?;
        let event_type = if value == "False" {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.event(job, event_type, reason, "SetCpuWeight", &message)
            .await;
        Ok(())
    }
}

/// The CPU request, millicores, that weight `weight` gives a container whose template
/// requests `base`: at least 1m, so that a tiny weight never asks for no CPU at all.
pub(super) fn weighted_millis(base: u64, weight: f64) -> u64 {
    ((base as f64 * weight).round() as u64).max(1)
}
