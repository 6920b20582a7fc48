//! Carrying out accepted actions through the API server, and keeping each job's status.
//!
//! - place: create the job's pods (`schedulerName: switchyard`, owned by the job) and
//!   bind each with the `binding` subresource; if any create or bind fails, every pod of
//!   the group is deleted again, so a gang is bound whole or not at all.
//! - migrate: record the move in the status first (so a controller that restarts
//!   half-way never moves the job twice), ask for a checkpoint (annotation, or the stop
//!   signal of a graceful delete), delete after the grace period, create the replacement
//!   pod and bind it to the target.
//! - CPU weight: resize the training container's CPU request in place (the pod `resize`
//!   subresource); a refusal becomes the `CpuWeightApplied=False` condition and the
//!   controller moves on.
//! - scale: record it, checkpoint and delete every pod, create the new set and bind it.
//!
//! Each action leaves a Kubernetes Event on the job with the policy's reason. This module
//! acts on what it is told; it must not check decisions (the validator did) or read the
//! caches (the caller hands it the job and its pods).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::crd::{CheckpointMethod, Condition, Phase, Placement, TrainingJob, TrainingJobStatus};
use super::{
    CHECKPOINT_ANNOTATION, Error, FIELD_MANAGER, Result, TASK_LABEL, pods, quantity, retry,
};
use crate::model::MigrationKind;

/// Carries out actions on one cluster.
#[derive(Clone)]
pub struct Actor {
    client: Client,
    recorder: Recorder,
}

/// Condition type set when an in-place CPU resize is refused or applied.
pub const CPU_WEIGHT_CONDITION: &str = "CpuWeightApplied";

impl Actor {
    /// An actor publishing Events as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let recorder = Recorder::new(client.clone(), reporter);
        Self { client, recorder }
    }

    fn pods(&self, job: &TrainingJob) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &namespace(job))
    }

    fn jobs(&self, job: &TrainingJob) -> Api<TrainingJob> {
        Api::namespaced(self.client.clone(), &namespace(job))
    }

    /// Creates and binds the pods of `assignments` (task, node), all or none, then
    /// records the placements in the status.
    pub async fn place(
        &self,
        job: &TrainingJob,
        assignments: &[(String, String)],
        reason: &str,
    ) -> Result<()> {
        let generation = status_of(job).generation;
        let placed = self.create_and_bind(job, assignments, generation).await;
        let placed = match placed {
            Ok(placed) => placed,
            Err(error) => {
                self.event(
                    job,
                    EventType::Warning,
                    "PlacementFailed",
                    "Place",
                    &error.to_string(),
                )
                .await;
                return Err(error);
            }
        };
        self.update_status(job, |status| {
            for p in &placed {
                status.placements.retain(|q| q.task != p.task);
                status.placements.push(p.clone());
            }
            status.phase = Some(Phase::Running);
        })
        .await?;
        let note = format!("{}: {reason}", describe(&placed));
        self.event(job, EventType::Normal, "Placed", "Place", &note)
            .await;
        Ok(())
    }

    /// Creates every pod, then binds every pod; on any failure deletes all of them.
    async fn create_and_bind(
        &self,
        job: &TrainingJob,
        assignments: &[(String, String)],
        generation: u32,
    ) -> Result<Vec<Placement>> {
        let api = self.pods(job);
        let mut created = Vec::new();
        let mut outcome = Ok(());
        for (task, _) in assignments {
            let pod = match pods::build(job, task, generation) {
                Ok(pod) => pod,
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            };
            let name = pod.name_any();
            match create_pod(&api, &pod).await {
                Ok(()) => created.push(name),
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        if outcome.is_ok() {
            for ((_, node), pod) in assignments.iter().zip(&created) {
                if let Err(error) = bind(&api, pod, node).await {
                    outcome = Err(error);
                    break;
                }
            }
        }
        match outcome {
            Ok(()) => Ok(assignments
                .iter()
                .zip(created)
                .map(|((task, node), pod)| Placement {
                    task: task.clone(),
                    pod,
                    node: node.clone(),
                })
                .collect()),
            Err(error) => {
                for pod in &created {
                    // Rolling back is best effort: a pod left behind is unbound (or bound
                    // alone) and owned by the job, and the next placement reuses its name.
                    if let Err(e) = delete_pod(&api, pod, Some(0)).await {
                        tracing::warn!(error = %e, pod, "rolling back a failed placement");
                    }
                }
                Err(error)
            }
        }
    }

    /// Moves `task` (or every task) of `job` to `node`, checkpointing first. `job_pods`
    /// are the job's current pods.
    pub async fn migrate(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        task: Option<&str>,
        node: &str,
        kind: MigrationKind,
        reason: &str,
    ) -> Result<()> {
        let moving: Vec<&Pod> = job_pods
            .iter()
            .filter(|p| task.is_none_or(|t| task_of(p) == Some(t)))
            .filter(|p| node_of(p) != Some(node))
            .collect();
        // The move is recorded before anything happens, so a controller restarted
        // half-way sees the job as migrated and never moves it a second time.
        let updated = self
            .update_status(job, |status| {
                match kind {
                    MigrationKind::Reallocate => status.migrated = true,
                    MigrationKind::Rebalance => status.rebalanced = true,
                }
                if !moving.is_empty() {
                    status.migrations += 1;
                    status.generation += 1;
                    status.phase = Some(Phase::Restarting);
                }
            })
            .await?;
        if moving.is_empty() {
            let note = format!("already on {node}, marked only: {reason}");
            self.event(job, EventType::Normal, "Marked", "Migrate", &note)
                .await;
            return Ok(());
        }
        self.checkpoint_and_delete(job, &moving).await?;
        let assignments: Vec<(String, String)> = moving
            .iter()
            .filter_map(|p| task_of(p))
            .map(|t| (t.to_string(), node.to_string()))
            .collect();
        let generation = status_of(&updated).generation;
        let placed = self
            .create_and_bind(&updated, &assignments, generation)
            .await?;
        self.update_status(&updated, |status| {
            for p in &placed {
                status.placements.retain(|q| q.task != p.task);
                status.placements.push(p.clone());
            }
            status.phase = Some(Phase::Running);
        })
        .await?;
        let note = format!("{}: {reason}", describe(&placed));
        self.event(job, EventType::Normal, "Migrated", "Migrate", &note)
            .await;
        Ok(())
    }

    /// Asks each pod's process to checkpoint per the job's spec and deletes the pods once
    /// the grace period allows.
    async fn checkpoint_and_delete(&self, job: &TrainingJob, victims: &[&Pod]) -> Result<()> {
        let checkpoint = job
            .spec
            .checkpoint
            .as_ref()
            .ok_or_else(|| Error::InvalidSpec {
                job: job.name_any(),
                message: "the job has no `checkpoint` and cannot be moved or rescaled".into(),
            })?;
        let api = self.pods(job);
        let grace = i64::from(checkpoint.grace_period_seconds);
        match checkpoint.method {
            CheckpointMethod::Annotation => {
                let requested = chrono_now();
                let params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PatchParams::default()
                };
                let patch = Patch::Merge(
                    json!({"metadata": {"annotations": {CHECKPOINT_ANNOTATION: requested}}}),
                );
                for pod in victims {
                    let name = pod.name_any();
                    retry::with_backoff("checkpoint annotation", || {
                        api.patch(&name, &params, &patch)
                    })
                    .await
                    .map_err(Error::api(format!("asking pod {name} to checkpoint")))?;
                }
                tokio::time::sleep(Duration::from_secs(checkpoint.grace_period_seconds.into()))
                    .await;
                for pod in victims {
                    delete_pod(&api, &pod.name_any(), None).await?;
                }
            }
            CheckpointMethod::Signal => {
                for pod in victims {
                    delete_pod(&api, &pod.name_any(), Some(grace)).await?;
                }
            }
        }
        Ok(())
    }

    /// Sets the CPU weight of `pod` by resizing its training container's CPU request to
    /// `weight` times the template's. A refusal is reported on the job, not returned.
    pub async fn set_cpu_weight(
        &self,
        job: &TrainingJob,
        pod: &Pod,
        weight: f64,
        reason: &str,
    ) -> Result<()> {
        let role = pod
            .labels()
            .get(super::ROLE_LABEL)
            .and_then(|r| job.spec.roles.iter().find(|role| &role.name == r))
            .ok_or_else(|| {
                Error::NotFound(format!("pod {} has no role of its job", pod.name_any()))
            })?;
        let (container, base) =
            pods::training_container(role).ok_or_else(|| Error::InvalidSpec {
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
        let millis = ((base as f64 * weight).round() as u64).max(1);
        let patch = Patch::Strategic(
            json!({"spec": {"containers": [{"name": container, "resources": {"requests": {"cpu": quantity::cpu_millis(millis)}}}]}}),
        );
        let name = pod.name_any();
        let api = self.pods(job);
        let params = PatchParams::default();
        let outcome =
            retry::with_backoff("resize", || api.patch_resize(&name, &params, &patch)).await;
        let (status, message) = match outcome {
            Ok(_) => (
                "True",
                format!("pod {name} runs with {millis}m CPU (weight {weight:.3}): {reason}"),
            ),
            Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 404 | 405 | 422) => (
                "False",
                format!(
                    "the cluster refused to resize pod {name} in place ({}): {}",
                    s.code, s.message
                ),
            ),
            Err(error) => return Err(Error::api(format!("resizing pod {name}"))(error)),
        };
        let condition_reason = if status == "True" {
            "Resized"
        } else {
            "ResizeRefused"
        };
        self.update_status(job, |s| {
            set_condition(s, CPU_WEIGHT_CONDITION, status, condition_reason, &message)
        })
        .await?;
        let event_type = if status == "True" {
            EventType::Normal
        } else {
            EventType::Warning
        };
        self.event(job, event_type, condition_reason, "SetCpuWeight", &message)
            .await;
        Ok(())
    }

    /// Restarts `job` from a checkpoint with `replicas` replicas of its scalable role;
    /// added replicas go to `nodes` in order, the others stay where they ran.
    pub async fn scale(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        replicas: u32,
        nodes: &[String],
        reason: &str,
    ) -> Result<()> {
        let before = status_of(job).placements;
        let updated = self
            .update_status(job, |status| {
                status.rescales += 1;
                status.replicas = Some(replicas);
                status.generation += 1;
                status.phase = Some(Phase::Restarting);
            })
            .await?;
        let victims: Vec<&Pod> = job_pods.iter().collect();
        self.checkpoint_and_delete(job, &victims).await?;
        let mut added = nodes.iter();
        let assignments: Vec<(String, String)> = pods::tasks(&updated)
            .into_iter()
            .filter_map(|t| {
                let node = job_pods
                    .iter()
                    .find(|p| task_of(p) == Some(t.name.as_str()))
                    .and_then(node_of)
                    .map(str::to_string)
                    .or_else(|| {
                        before
                            .iter()
                            .find(|p| p.task == t.name)
                            .map(|p| p.node.clone())
                    })
                    .or_else(|| added.next().cloned())?;
                Some((t.name, node))
            })
            .collect();
        let generation = status_of(&updated).generation;
        let placed = self
            .create_and_bind(&updated, &assignments, generation)
            .await?;
        self.update_status(&updated, |status| {
            status.placements = placed.clone();
            status.phase = Some(Phase::Running);
        })
        .await?;
        let note = format!("{replicas} replicas ({}): {reason}", describe(&placed));
        self.event(job, EventType::Normal, "Rescaled", "Scale", &note)
            .await;
        Ok(())
    }

    /// Replaces the policy's labels on `job` (no write when they are unchanged).
    pub async fn set_policy_labels(
        &self,
        job: &TrainingJob,
        labels: std::collections::BTreeMap<String, String>,
    ) -> Result<()> {
        if status_of(job).policy_labels == labels {
            return Ok(());
        }
        self.update_status(job, |status| status.policy_labels = labels.clone())
            .await?;
        Ok(())
    }

    /// Reads the job afresh, applies `change` to its status and writes it with the
    /// resourceVersion it read; on a 409 conflict, reads and applies again.
    pub async fn update_status(
        &self,
        job: &TrainingJob,
        change: impl Fn(&mut TrainingJobStatus),
    ) -> Result<TrainingJob> {
        let api = self.jobs(job);
        let name = job.name_any();
        retry::with_backoff("status update", || async {
            let mut fresh = api.get_status(&name).await?;
            let mut status = fresh.status.clone().unwrap_or_default();
            change(&mut status);
            fresh.status = Some(status);
            api.replace_status(
                &name,
                &PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PostParams::default()
                },
                &fresh,
            )
            .await
        })
        .await
        .map_err(Error::api(format!(
            "updating the status of TrainingJob {name}"
        )))
    }

    /// Publishes an Event on the job. A failure is logged, never fatal: the action it
    /// reports has already happened.
    pub async fn event(
        &self,
        job: &TrainingJob,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(truncate(note, 1024)),
            action: action.into(),
            secondary: None,
        };
        let reference: ObjectReference = job.object_ref(&());
        if let Err(source) = self.recorder.publish(&event, &reference).await {
            let error = Error::Event {
                job: job.name_any(),
                source,
            };
            tracing::warn!(%error, "could not publish event");
        }
    }
}

/// Creates `pod`; one that already exists unbound (left by a controller that stopped
/// between create and bind) counts as created.
async fn create_pod(api: &Api<Pod>, pod: &Pod) -> Result<()> {
    let name = pod.name_any();
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match retry::with_backoff("create pod", || api.create(&pp, pod)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            let existing = api
                .get(&name)
                .await
                .map_err(Error::api(format!("reading pod {name}")))?;
            match node_of(&existing) {
                None => Ok(()),
                Some(node) => Err(Error::NotFound(format!(
                    "pod {name} exists and is already bound to {node}"
                ))),
            }
        }
        Err(error) => Err(Error::api(format!("creating pod {name}"))(error)),
    }
}

/// Binds `pod` to `node` through the `binding` subresource.
async fn bind(api: &Api<Pod>, pod: &str, node: &str) -> Result<()> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    };
    let params = PostParams::default();
    retry::with_backoff("bind", || {
        api.create_subresource::<_, serde_json::Value>("binding", pod, &params, &binding)
    })
    .await
    .map(|_| ())
    .map_err(Error::api(format!("binding pod {pod} to node {node}")))
}

/// Deletes `pod` (a pod already gone counts as deleted).
async fn delete_pod(api: &Api<Pod>, pod: &str, grace_seconds: Option<i64>) -> Result<()> {
    let dp = DeleteParams {
        grace_period_seconds: grace_seconds.map(|g| g as u32),
        ..DeleteParams::default()
    };
    match retry::with_backoff("delete pod", || api.delete(pod, &dp)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(error) => Err(Error::api(format!("deleting pod {pod}"))(error)),
    }
}

/// Sets (or replaces) the condition of type `type_`, keeping its transition time when
/// the status does not change.
pub fn set_condition(
    status: &mut TrainingJobStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
) {
    let now = chrono_now();
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = now;
            }
            c.status = value.into();
            c.reason = reason.into();
            c.message = message.into();
        }
        None => status.conditions.push(Condition {
            type_: type_.into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: now,
        }),
    }
}

fn chrono_now() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

fn namespace(job: &TrainingJob) -> String {
    job.namespace().unwrap_or_else(|| "default".into())
}

fn status_of(job: &TrainingJob) -> TrainingJobStatus {
    job.status.clone().unwrap_or_default()
}

/// The task a pod runs (its `switchyard.dev/task` label).
pub fn task_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(TASK_LABEL)
        .map(String::as_str)
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

fn describe(placed: &[Placement]) -> String {
    placed
        .iter()
        .map(|p| format!("{} on {}", p.task, p.node))
        .collect::<Vec<_>>()
        .join(", ")
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
