//! Carrying out accepted actions through the API server, and keeping each job's status.
//!
//! - place: create the job's pods (`schedulerName: switchyard`, owned by the job) and
//!   bind each with the `binding` subresource; if any create or bind fails, every pod of
//!   the group is deleted again, so a gang is bound whole or not at all.
//!   The outcome is the job's `PodsCreated` condition (`False` with reason
//!   `TemplateRejected` when the API server refuses a role's template).
//! - migrate and scale are restarts, carried out in stages so that no grace period
//!   blocks the control loop: [`Actor::migrate`] and [`Actor::scale`] record the restart
//!   in the status first (a controller that restarts half-way finishes it and never
//!   moves the job twice) and ask for a checkpoint (the annotation, or the stop signal
//!   of a graceful delete); [`Actor::advance_restart`], called whenever the caches
//!   change, deletes the annotated pods once the grace period has passed and, once the
//!   old pods have terminated, creates the replacements and binds them.
//! - preempt: the same staged restart, recorded as `Preempt`, stopping every pod after
//!   its checkpoint; once they are gone the job waits again, and the cluster tells the
//!   policy (`job-preempted`).
//! - CPU weight: resize the training container's CPU request in place (the pod `resize`
//!   subresource); a refusal becomes the `CpuWeightApplied=False` condition and the
//!   controller moves on.
//!
//! Each action leaves a Kubernetes Event on the job with the policy's reason. This module
//! acts on what it is told; it must not check decisions (the validator did) or read the
//! caches (the caller hands it the job and its pods).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod, Service};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::crd::{
    Checkpoint, CheckpointMethod, Condition, MoveKindRecord, PendingRestart, Phase, Placement,
    RestartAction, TaskTarget, TrainingJob, TrainingJobStatus,
};
use crate::retry::Guard;
use crate::volumes::{BOUND_BY_CONTROLLER_ANNOTATION, Provision};
use crate::{
    CHECKPOINT_ANNOTATION, Error, FIELD_MANAGER, Result, TASK_LABEL, ephemeral, observe, pods,
    quantity, retry,
};
use switchyard_control::Leader;

/// Carries out actions on one cluster.
#[derive(Clone)]
pub struct Actor {
    client: Client,
    recorder: Recorder,
    /// Every call's deadline and leadership check.
    guard: Guard,
    /// Pods (see [`delete_key`]) this process has deleted, so a cache that has not
    /// caught up does not make it delete them again.
    deletes_sent: Arc<Mutex<HashSet<String>>>,
    /// Pods this process has asked to checkpoint with the annotation, and when.
    annotated: Arc<Mutex<HashMap<String, Timestamp>>>,
    /// Jobs (by UID) whose headless Service exists.
    services: Arc<Mutex<HashSet<String>>>,
}

/// Condition type set when an in-place CPU resize is refused or applied.
pub const CPU_WEIGHT_CONDITION: &str = "CpuWeightApplied";
/// Condition type set when the job's pods are created and bound, or refused.
pub const PODS_CREATED_CONDITION: &str = "PodsCreated";
/// Condition type set when the job failed for good (reason `BackoffLimitExceeded`).
pub const FAILED_CONDITION: &str = "Failed";

/// Where a staged restart stands after [`Actor::advance_restart`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartProgress {
    /// The job has no restart under way.
    Idle,
    /// Waiting for the grace period, or for the old pods to terminate.
    Waiting,
    /// The replacements are created and bound; the job runs again.
    Done,
}

impl Actor {
    /// An actor publishing Events as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let recorder = Recorder::new(client.clone(), reporter);
        Self {
            client,
            recorder,
            guard: Guard::default(),
            deletes_sent: Arc::default(),
            annotated: Arc::default(),
            services: Arc::default(),
        }
    }

    /// Makes calls only while `leader` leads: a replica that lost the lead mid-round,
    /// or mid-restart, writes nothing more.
    pub fn fenced_by(mut self, leader: Arc<Leader>) -> Self {
        self.guard = self.guard.fenced_by(leader);
        self
    }

    /// Gives each API call `timeout` instead of [`retry::CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.guard = self.guard.with_timeout(timeout);
        self
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
        let placed = match self.create_and_bind(job, assignments, generation).await {
            Ok(placed) => placed,
            Err(error) => return Err(self.placement_failed(job, "Place", error).await),
        };
        let created = created_message(&placed);
        let recorded = self
            .update_status(job, |status| {
                if status.placements.is_empty() {
                    let to = placed.iter().map(|p| p.node.clone()).collect();
                    let now = seconds(Timestamp::now());
                    status.record_move(MoveKindRecord::Placed, "", Vec::new(), to, now);
                }
                for p in &placed {
                    status.placements.retain(|q| q.task != p.task);
                    status.placements.push(p.clone());
                }
                status.phase = Some(Phase::Running);
                set_condition(status, PODS_CREATED_CONDITION, "True", "Created", &created);
            })
            .await;
        if let Err(error) = recorded {
            // The pods are bound, but the job's status does not say so: the next
            // round sees them running, and this one reports the failure.
            return Err(self.action_failed(job, "Place", error).await);
        }
        let note = format!("{}: {reason}", describe(&placed));
        self.event(job, EventType::Normal, "Placed", "Place", &note)
            .await;
        Ok(())
    }

    /// Gets each of `claims`, waiting for its first consumer, a volume on the node chosen
    /// for it, as kube-scheduler's volume binding does: a pre-provisioned volume is
    /// promised to the claim (its `claimRef`, on the resourceVersion seen, for the
    /// PersistentVolume controller to bind), or the claim is annotated
    /// `volume.kubernetes.io/selected-node` for its class's provisioner. No pod is made or
    /// bound until the claim is bound (a later placement, within the volume's topology).
    /// Returns the error that says so, reported as the `PodsCreated=False` condition
    /// (`WaitingForVolumes`) and a Normal Event, or the failed call's.
    pub async fn provision(&self, job: &TrainingJob, claims: &[Provision]) -> Error {
        let namespace = namespace(job);
        let claims_api: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &namespace);
        let volumes_api: Api<k8s_openapi::api::core::v1::PersistentVolume> =
            Api::all(self.client.clone());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let mut chosen = Vec::new();
        for provision in claims {
            let sent = match provision {
                Provision::ForNode { claim, node } => {
                    chosen.push(format!("{claim} on {node}"));
                    ephemeral::select_node(&claims_api, &self.guard, claim, node).await
                }
                Provision::Volume {
                    claim,
                    claim_uid,
                    volume,
                    version,
                    node,
                } => {
                    // The resourceVersion makes the promise conditional: a volume taken
                    // or changed since it was seen is refused (409), not promised twice.
                    let body = Patch::Merge(json!({
                        "metadata": {"resourceVersion": version,
                            "annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"}},
                        "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "namespace": namespace, "name": claim, "uid": claim_uid}}}));
                    chosen.push(format!("{claim} to PersistentVolume {volume} on {node}"));
                    self.guard
                        .call(volumes_api.patch(volume, &params, &body))
                        .await
                        .map(drop)
                        .map_err(Error::api(format!(
                            "binding PersistentVolumeClaim {claim} to PersistentVolume {volume}"
                        )))
                }
            };
            if let Err(error) = sent {
                return self.placement_failed(job, "Place", error).await;
            }
        }
        let error = Error::WaitingForVolumes {
            job: job.name_any(),
            message: format!(
                "provisioning PersistentVolumeClaims {}; the pods are bound once the claims are",
                chosen.join(", ")
            ),
        };
        self.placement_failed(job, "Place", error).await
    }

    /// Reports a failed create-and-bind as the `PodsCreated=False` condition and a
    /// Warning Event (a Normal one while volumes are provisioned: nothing is wrong);
    /// returns the error.
    async fn placement_failed(&self, job: &TrainingJob, action: &str, error: Error) -> Error {
        let reason = match error {
            Error::InvalidSpec { .. } => "TemplateRejected",
            Error::Gated { .. } => "SchedulingGated",
            Error::WaitingForVolumes { .. } => "WaitingForVolumes",
            _ => "PlacementFailed",
        };
        let event_type = match error {
            Error::WaitingForVolumes { .. } => EventType::Normal,
            _ => EventType::Warning,
        };
        let message = error.to_string();
        if let Err(e) = self
            .update_status(job, |s| {
                set_condition(s, PODS_CREATED_CONDITION, "False", reason, &message)
            })
            .await
        {
            tracing::warn!(error = %e, "recording the failed placement in the status");
        }
        let note = format!("{}: {message}", error.failure_reason());
        self.event(job, event_type, reason, action, &note).await;
        error
    }

    /// `outcome` as it is, after reporting it with [`Actor::action_failed`] when it
    /// failed: one place for every action's "done, or an Event saying why not".
    async fn reported(&self, job: &TrainingJob, action: &str, outcome: Result<()>) -> Result<()> {
        match outcome {
            Ok(()) => Ok(()),
            Err(error) => Err(self.action_failed(job, action, error).await),
        }
    }

    /// Reports an action that failed as a Warning Event `<action>Failed` on the job
    /// (the note starts with the failure's kind, e.g. `forbidden: ...`); returns the
    /// error. Every action reports its own failure once, here or in
    /// `Actor::placement_failed`, so `kubectl events --for trainingjob/<name>` shows
    /// every action that did not happen.
    pub async fn action_failed(&self, job: &TrainingJob, action: &str, error: Error) -> Error {
        let note = format!("{}: {error}", error.failure_reason());
        let reason = format!("{action}Failed");
        self.event(job, EventType::Warning, &reason, action, &note)
            .await;
        error
    }

    /// Creates every pod, then binds every pod, as kube-scheduler binds: the Binding
    /// names the pod's UID. On any failure it undoes what this call did and only that:
    /// the pods it created, and those it bound, are deleted (with their UID as a
    /// precondition and their own grace period); a pod that was already bound before
    /// the call (left by a controller that stopped half-way, or running because the
    /// cache was behind) is left alone.
    async fn create_and_bind(
        &self,
        job: &TrainingJob,
        assignments: &[(String, String)],
        generation: u32,
    ) -> Result<Vec<Placement>> {
        let api = self.pods(job);
        self.ensure_service(job).await;
        let mut made: Vec<Made> = Vec::new();
        let mut outcome = Ok(());
        for (task, node) in assignments {
            let pod = match pods::build(job, task, generation) {
                Ok(pod) => pod,
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            };
            let name = pod.name_any();
            match create_pod(&api, &self.guard, job, &pod).await {
                Ok(created) => match &created.bound_to {
                    Some(on) if on != node => {
                        outcome = Err(Error::NotFound(format!(
                            "pod {name} exists and is already bound to {on}, not {node}"
                        )));
                        break;
                    }
                    _ => made.push(Made {
                        claims: ephemeral::claims_of(
                            &pod,
                            created.uid.as_deref().unwrap_or_default(),
                            node,
                        ),
                        name,
                        node: node.clone(),
                        uid: created.uid,
                        created: created.new,
                        bound_before: created.bound_to.is_some(),
                        bound_here: false,
                        gated: created.gated,
                    }),
                },
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        // A pod with scheduling gates may not be bound until whoever put them there
        // lifts them: the pods stay, unbound, and the job waits for that.
        let gated: Vec<String> = made
            .iter()
            .filter(|p| p.gated && !p.bound_before)
            .map(|p| p.name.clone())
            .collect();
        if outcome.is_ok() && !gated.is_empty() {
            return Err(Error::Gated {
                job: job.name_any(),
                pods: gated,
            });
        }
        // Each ephemeral volume's claim, for the node its pod is bound to next.
        if outcome.is_ok() {
            let claims = Api::namespaced(self.client.clone(), &namespace(job));
            let unbound = made.iter().filter(|p| !p.bound_before);
            for claim in unbound.flat_map(|p| &p.claims) {
                if let Err(error) =
                    ephemeral::ensure(&claims, &self.guard, &job.name_any(), claim).await
                {
                    outcome = Err(error);
                    break;
                }
            }
        }
        if outcome.is_ok() {
            for pod in made.iter_mut().filter(|p| !p.bound_before) {
                match bind(&api, &self.guard, &pod.name, pod.uid.as_deref(), &pod.node).await {
                    Ok(()) => pod.bound_here = true,
                    Err(error) => {
                        outcome = Err(error);
                        break;
                    }
                }
            }
        }
        match outcome {
            Ok(()) => Ok(assignments
                .iter()
                .zip(made)
                .map(|((task, node), pod)| Placement {
                    task: task.clone(),
                    pod: pod.name,
                    node: node.clone(),
                })
                .collect()),
            Err(error) => {
                for pod in made.iter().filter(|p| p.created || p.bound_here) {
                    // Best effort: a pod left behind is owned by the job, and the next
                    // placement reuses its name.
                    if let Err(e) =
                        delete_pod(&api, &self.guard, &pod.name, pod.uid.as_deref(), None).await
                    {
                        tracing::warn!(error = %e, pod = pod.name, "rolling back a failed placement");
                    }
                }
                Err(error)
            }
        }
    }

    /// Starts `migration` of `job` at `now`: records the move and the restart in the
    /// status, then asks the pods to checkpoint. Returns at once;
    /// [`Actor::advance_restart`] carries the move on. `job_pods` are the job's current
    /// pods. A failure is reported on the job ([`Actor::action_failed`]).
    pub async fn migrate(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        migration: Migration<'_>,
        now: Timestamp,
    ) -> Result<()> {
        let started = self.start_migration(job, job_pods, migration, now).await;
        self.reported(job, "Migrate", started).await
    }

    async fn start_migration(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        migration: Migration<'_>,
        now: Timestamp,
    ) -> Result<()> {
        let Migration {
            task,
            node,
            purpose,
            reason,
        } = migration;
        let named: Vec<&Pod> = job_pods
            .iter()
            .filter(|p| task.is_none_or(|t| task_of(p) == Some(t)))
            .collect();
        let moving: Vec<&Pod> = named
            .iter()
            .copied()
            .filter(|p| node_of(p) != Some(node))
            .collect();
        let from: Vec<String> = named
            .iter()
            .filter_map(|p| node_of(p).map(str::to_string))
            .collect();
        let to = vec![node.to_string(); from.len()];
        let mark = |status: &mut TrainingJobStatus| {
            status.record_move(
                MoveKindRecord::Migrated,
                purpose,
                from.clone(),
                to.clone(),
                seconds(now),
            );
        };
        if moving.is_empty() {
            self.update_status(job, mark).await?;
            let note = format!("already on {node}, marked only: {reason}");
            self.event(job, EventType::Normal, "Marked", "Migrate", &note)
                .await;
            return Ok(());
        }
        let checkpoint = checkpoint_of(job)?;
        let targets = moving
            .iter()
            .filter_map(|p| task_of(p))
            .map(|t| TaskTarget {
                task: t.to_string(),
                node: node.to_string(),
            })
            .collect();
        let restart = pending(
            RestartAction::Migrate,
            &moving,
            targets,
            checkpoint,
            reason,
            now,
        );
        // The move is recorded before anything happens, so a controller restarted
        // half-way sees it in the job's history and never moves it a second time; and
        // only on the status the decision saw, so a cache that is behind (another
        // restart recorded, a move the policy did not see) cannot start a second one.
        let generation = status_of(job).generation;
        let last_seen = status_of(job).moves.last().map(|m| m.time);
        self.update_status_if(
            job,
            |fresh| {
                unchanged_since(fresh, generation)?;
                if fresh.moves.last().map(|m| m.time) != last_seen {
                    return Err("it moved since the decision was made".into());
                }
                Ok(())
            },
            |status| {
                mark(status);
                status.migrations += 1;
                status.generation += 1;
                status.phase = Some(Phase::Restarting);
                status.restart = Some(restart.clone());
            },
        )
        .await?;
        self.request_checkpoint(job, &moving, checkpoint, &restart)
            .await
    }

    /// Asks each pod's process to checkpoint: sets the annotation, or deletes the pod
    /// with the grace period (the kubelet sends the stop signal).
    async fn request_checkpoint(
        &self,
        job: &TrainingJob,
        victims: &[&Pod],
        checkpoint: &Checkpoint,
        restart: &PendingRestart,
    ) -> Result<()> {
        match checkpoint.method {
            CheckpointMethod::Annotation => {
                let asked: Timestamp = restart
                    .requested_at
                    .parse()
                    .unwrap_or_else(|_| Timestamp::now());
                for pod in victims {
                    self.annotate_once(job, pod, asked).await?;
                }
            }
            CheckpointMethod::Signal => {
                let grace = i64::from(checkpoint.grace_period_seconds);
                for pod in victims {
                    self.delete_once(job, pod, Some(grace)).await?;
                }
            }
        }
        Ok(())
    }

    /// Asks `pod` to checkpoint at `now` with the annotation, unless this process
    /// already did; returns when it was asked.
    async fn annotate_once(&self, job: &TrainingJob, pod: &Pod, now: Timestamp) -> Result<()> {
        let key = delete_key(pod);
        if self
            .annotated
            .lock()
            .expect("annotations lock")
            .contains_key(&key)
        {
            return Ok(());
        }
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let patch = Patch::Merge(
            json!({"metadata": {"annotations": {CHECKPOINT_ANNOTATION: rfc3339(now)}}}),
        );
        let name = pod.name_any();
        let api = self.pods(job);
        retry::with_backoff("checkpoint annotation", || {
            api.patch(&name, &params, &patch)
        })
        .await
        .map_err(Error::api(format!("asking pod {name} to checkpoint")))?;
        self.annotated
            .lock()
            .expect("annotations lock")
            .insert(key, now);
        Ok(())
    }

    /// When `pod` was asked to checkpoint: its annotation, or this process's memory of
    /// the patch when the cache has not shown it yet.
    fn asked_at(&self, pod: &Pod) -> Option<Timestamp> {
        let annotated = pod
            .annotations()
            .get(CHECKPOINT_ANNOTATION)
            .and_then(|t| t.parse::<Timestamp>().ok());
        annotated.or_else(|| {
            self.annotated
                .lock()
                .expect("annotations lock")
                .get(&delete_key(pod))
                .copied()
        })
    }

    /// Creates `job`'s headless Service unless this process already has (see
    /// [`pods::service`]). Best effort: without it the pods still run, and only their
    /// names do not resolve, so a failure is logged and tried again next time.
    async fn ensure_service(&self, job: &TrainingJob) {
        let Some(uid) = job.metadata.uid.clone() else {
            return;
        };
        if self.services.lock().expect("services lock").contains(&uid) {
            return;
        }
        let api: Api<Service> = Api::namespaced(self.client.clone(), &namespace(job));
        let service = pods::service(job);
        let name = job.name_any();
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let ours = match retry::with_backoff("create service", || {
            self.guard.call(api.create(&pp, &service))
        })
        .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                match self.guard.call(api.get(&name)).await {
                    Ok(existing) => existing
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == uid),
                    Err(error) => {
                        tracing::warn!(%error, job = name, "reading the job's Service");
                        false
                    }
                }
            }
            Err(error) => {
                let error =
                    Error::api(format!("creating the Service of TrainingJob {name}"))(error);
                tracing::warn!(%error, "the job's pods run, but their names do not resolve yet");
                false
            }
        };
        if ours {
            self.services.lock().expect("services lock").insert(uid);
        }
    }

    /// Deletes a pod unless this process already did (a cache that has not caught up
    /// still shows it without its deletion timestamp).
    async fn delete_once(&self, job: &TrainingJob, pod: &Pod, grace: Option<i64>) -> Result<()> {
        let key = delete_key(pod);
        if self
            .deletes_sent
            .lock()
            .expect("deletes lock")
            .contains(&key)
        {
            return Ok(());
        }
        let uid = pod.metadata.uid.as_deref();
        delete_pod(&self.pods(job), &self.guard, &pod.name_any(), uid, grace).await?;
        self.deletes_sent.lock().expect("deletes lock").insert(key);
        Ok(())
    }

    /// Whether any pod's delete or annotation is remembered, so that a pass needs the
    /// keys of the pods present to forget those gone ([`Actor::forget_deletes`]).
    pub fn remembers_pods(&self) -> bool {
        !self.deletes_sent.lock().expect("deletes lock").is_empty()
            || !self.annotated.lock().expect("annotations lock").is_empty()
    }

    /// Forgets the deletes sent for pods no longer in the cache (`present` holds the
    /// keys of those that are, see [`delete_key`]).
    pub fn forget_deletes(&self, present: &HashSet<String>) {
        self.deletes_sent
            .lock()
            .expect("deletes lock")
            .retain(|key| present.contains(key));
        self.annotated
            .lock()
            .expect("annotations lock")
            .retain(|key, _| present.contains(key));
    }

    /// Deletes those of `job_pods` that still hold resources: the pods of a job that
    /// has finished (the parameter server of a job whose workers succeeded, the rest of
    /// a gang that failed for good).
    pub async fn stop_pods(&self, job: &TrainingJob, job_pods: &[Pod]) -> Result<()> {
        for pod in job_pods
            .iter()
            .filter(|p| !terminated(p) && p.metadata.deletion_timestamp.is_none())
        {
            self.delete_once(job, pod, None).await?;
        }
        Ok(())
    }

    /// Sends `job`'s gang back to the queue because `failed` (some of `job_pods`)
    /// failed at `now`: records the failure (disruptions are not counted against
    /// `backoffLimit`) and a `Recover` restart stopping every pod of the job, then deletes
    /// them; [`Actor::advance_restart`] queues the job again once they are gone and the
    /// back-off has passed. Past `backoffLimit` the job fails instead and its pods are
    /// deleted. Nothing is written when the job's status moved on since it was read.
    pub async fn recover(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        failed: &[&Pod],
        now: Timestamp,
    ) -> Result<()> {
        let status = status_of(job);
        let disrupted = failed.iter().filter(|p| observe::is_disruption(p)).count() as u32;
        let counted = failed.len() as u32 - disrupted;
        let failures = status.failures + counted;
        let give_up = failures > job.spec.backoff_limit;
        let what = failed
            .iter()
            .map(|p| describe_failure(p))
            .collect::<Vec<_>>()
            .join("; ");
        let stopping: Vec<&Pod> = job_pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let restart = PendingRestart {
            action: RestartAction::Recover,
            stopping: stopping.iter().map(|p| p.name_any()).collect(),
            targets: Vec::new(),
            requested_at: rfc3339(now),
            delete_after: None,
            retry_after: (counted > 0).then(|| rfc3339(now + failure_backoff(failures))),
            reason: what.clone(),
        };
        let generation = status.generation;
        let message = if give_up {
            format!(
                "{what}: {failures} failure(s), more than the backoffLimit of {}",
                job.spec.backoff_limit
            )
        } else if counted == 0 {
            format!("{what}: a disruption, not counted; the job is queued again")
        } else {
            format!(
                "{what}: failure {failures} of at most {}; the job is queued again after a back-off",
                job.spec.backoff_limit
            )
        };
        self.update_status_if(
            job,
            |fresh| unchanged_since(fresh, generation),
            |s| {
                s.failures += counted;
                s.disruptions += disrupted;
                if give_up {
                    s.phase = Some(Phase::Failed);
                    set_condition(
                        s,
                        FAILED_CONDITION,
                        "True",
                        "BackoffLimitExceeded",
                        &message,
                    );
                } else {
                    s.generation += 1;
                    s.phase = Some(Phase::Restarting);
                    s.placements.clear();
                    s.restart = Some(restart.clone());
                }
            },
        )
        .await?;
        // The rest of the gang would hold its resources for nothing. A process asked to
        // stop by signal saves a checkpoint on it.
        let grace = match &job.spec.checkpoint {
            Some(c) if c.method == CheckpointMethod::Signal => {
                Some(i64::from(c.grace_period_seconds))
            }
            _ => None,
        };
        for pod in stopping {
            self.delete_once(job, pod, grace).await?;
        }
        let reason = match (give_up, counted) {
            (true, _) => "BackoffLimitExceeded",
            (false, 0) => "Disrupted",
            (false, _) => "PodFailed",
        };
        self.event(job, EventType::Warning, reason, "Recover", &message)
            .await;
        Ok(())
    }

    /// Carries `job`'s restart on, if it has one, at `now`: deletes the annotated pods
    /// once the grace period has passed, and once none of the old pods is left in
    /// `job_pods` (the reflector's view, terminating pods included), creates and binds
    /// the replacements and records them. Never waits: a call that finds nothing to do
    /// returns [`RestartProgress::Waiting`], and the caller calls again when the caches
    /// change.
    pub async fn advance_restart(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        now: Timestamp,
    ) -> Result<RestartProgress> {
        let status = status_of(job);
        let Some(restart) = status.restart.clone() else {
            return Ok(RestartProgress::Idle);
        };
        // The old pods, whatever their phase: one whose process exited on its own is
        // deleted too (it holds nothing, and a pod of an old generation left behind
        // would be taken for a task's).
        let old: Vec<&Pod> = job_pods
            .iter()
            .filter(|p| restart.stopping.contains(&p.name_any()))
            .collect();
        if !old.is_empty() {
            let delete_after = restart
                .delete_after
                .as_deref()
                .and_then(|t| t.parse::<Timestamp>().ok());
            let grace = match (&restart.delete_after, &job.spec.checkpoint) {
                (None, Some(c)) => Some(i64::from(c.grace_period_seconds)),
                _ => None,
            };
            for pod in old
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
            {
                let due = match (delete_after, &job.spec.checkpoint) {
                    _ if terminated(pod) => true,
                    (None, _) => true,
                    // Each pod gets its whole grace period from when it was asked. A
                    // leader that stopped between recording the restart and asking
                    // left a pod that was never asked: it is asked now, not deleted
                    // without a checkpoint.
                    (Some(after), Some(checkpoint)) => match self.asked_at(pod) {
                        Some(asked) => {
                            let grace =
                                SignedDuration::from_secs(checkpoint.grace_period_seconds.into());
                            now >= after.max(asked + grace)
                        }
                        None => {
                            self.annotate_once(job, pod, now).await?;
                            false
                        }
                    },
                    (Some(after), None) => now >= after,
                };
                if due {
                    self.delete_once(job, pod, grace).await?;
                }
            }
            return Ok(RestartProgress::Waiting);
        }
        if matches!(
            restart.action,
            RestartAction::Recover | RestartAction::Preempt
        ) {
            return self.requeue(job, &restart, now).await;
        }
        let assignments: Vec<(String, String)> = restart
            .targets
            .iter()
            .map(|t| (t.task.clone(), t.node.clone()))
            .collect();
        let (action, done) = match restart.action {
            RestartAction::Migrate => ("Migrate", "Migrated"),
            RestartAction::Scale | RestartAction::Recover | RestartAction::Preempt => {
                ("Scale", "Rescaled")
            }
        };
        let placed = match self
            .create_and_bind(job, &assignments, status.generation)
            .await
        {
            Ok(placed) => placed,
            Err(error) => return Err(self.placement_failed(job, action, error).await),
        };
        let created = created_message(&placed);
        self.update_status(job, |s| {
            match restart.action {
                RestartAction::Migrate => {
                    for p in &placed {
                        s.placements.retain(|q| q.task != p.task);
                        s.placements.push(p.clone());
                    }
                }
                RestartAction::Scale | RestartAction::Recover | RestartAction::Preempt => {
                    s.placements = placed.clone()
                }
            }
            s.phase = Some(Phase::Running);
            s.restart = None;
            set_condition(s, PODS_CREATED_CONDITION, "True", "Created", &created);
        })
        .await?;
        let note = match restart.action {
            RestartAction::Migrate => format!("{}: {}", describe(&placed), restart.reason),
            RestartAction::Scale | RestartAction::Recover | RestartAction::Preempt => format!(
                "{} replicas ({}): {}",
                status.replicas.unwrap_or_default(),
                describe(&placed),
                restart.reason
            ),
        };
        self.event(job, EventType::Normal, done, action, &note)
            .await;
        Ok(RestartProgress::Done)
    }

    /// Ends a `Recover` or `Preempt` restart whose old pods are gone: once the back-off
    /// (of a recovery) has passed, the job is waiting again, with nothing placed.
    async fn requeue(
        &self,
        job: &TrainingJob,
        restart: &PendingRestart,
        now: Timestamp,
    ) -> Result<RestartProgress> {
        let retry_after = restart
            .retry_after
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok());
        if retry_after.is_some_and(|t| now < t) {
            return Ok(RestartProgress::Waiting);
        }
        let requested_at = restart.requested_at.clone();
        self.update_status_if(
            job,
            |fresh| match &fresh.restart {
                Some(r) if r.requested_at == requested_at => Ok(()),
                _ => Err("its recovery was finished or replaced since it was read".to_string()),
            },
            |s| {
                s.phase = Some(Phase::Waiting);
                s.placements.clear();
                s.restart = None;
            },
        )
        .await?;
        let (reason, action, note) = match restart.action {
            RestartAction::Preempt => (
                "Preempted",
                "Preempt",
                format!(
                    "checkpointed and released its nodes; queued again: {}",
                    restart.reason
                ),
            ),
            _ => (
                "Requeued",
                "Recover",
                format!("queued again after: {}", restart.reason),
            ),
        };
        self.event(job, EventType::Normal, reason, action, &note)
            .await;
        Ok(RestartProgress::Done)
    }

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
        let outcome = retry::with_backoff("resize", || {
            self.guard.call(api.patch_resize(&name, &params, &patch))
        })
        .await;
        // The API server accepting a resize is not the kubelet applying it: the
        // condition is Unknown until the pod's status shows the new request (or says
        // the resize is deferred or infeasible; see [`Actor::report_resize`]).
        let (status, condition_reason, message, refusal) = match outcome {
            Ok(_) => (
                "Unknown",
                "ResizeRequested",
                format!(
                    "pod {name} asked to run with {millis}m CPU (weight {weight:.3}): {reason}"
                ),
                None,
            ),
            Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 404 | 405 | 422) => (
                "False",
                "ResizeRefused",
                format!(
                    "the cluster refused to resize pod {name} in place ({}): {}",
                    s.code, s.message
                ),
                Some(Error::api(format!("resizing pod {name} in place"))(
                    kube::Error::Api(s),
                )),
            ),
            Err(error) => return Err(Error::api(format!("resizing pod {name}"))(error)),
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
            match pods::resize_state(pod) {
                pods::ResizeState::Applied => {}
                pods::ResizeState::Infeasible(message) => {
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
                pods::ResizeState::Pending(message) => {
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

    /// Starts restarting `job` from a checkpoint with `replicas` replicas of its
    /// scalable role at `now`: records the rescale and the restart in the status and
    /// asks every pod to checkpoint; [`Actor::advance_restart`] carries it on. Added
    /// replicas go to `nodes` in order, the others stay where they ran. A failure is
    /// reported on the job ([`Actor::action_failed`]).
    pub async fn scale(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        replicas: u32,
        nodes: &[String],
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        let started = self
            .start_rescale(job, job_pods, replicas, nodes, reason, now)
            .await;
        self.reported(job, "Scale", started).await
    }

    async fn start_rescale(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        replicas: u32,
        nodes: &[String],
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        let checkpoint = checkpoint_of(job)?;
        let before = status_of(job).placements;
        let mut scaled = job.clone();
        scaled.status.get_or_insert_with(Default::default).replicas = Some(replicas);
        let mut added = nodes.iter();
        let targets: Vec<TaskTarget> = pods::tasks(&scaled)
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
                Some(TaskTarget { task: t.name, node })
            })
            .collect();
        let victims: Vec<&Pod> = job_pods.iter().collect();
        let restart = WholeRestart {
            action: RestartAction::Scale,
            kind: MoveKindRecord::Rescaled,
            targets,
            checkpoint,
            reason,
            now,
        };
        self.restart_whole_job(job, &victims, restart, |status| {
            status.rescales += 1;
            status.replicas = Some(replicas);
        })
        .await
    }

    /// Records `restart` of `victims` (every pod of `job`) with its move, on the status
    /// the decision saw only, then asks the pods to checkpoint: what a rescale and a
    /// preemption share. `change` adds what is particular to the restart.
    async fn restart_whole_job(
        &self,
        job: &TrainingJob,
        victims: &[&Pod],
        restart: WholeRestart<'_>,
        change: impl Fn(&mut TrainingJobStatus),
    ) -> Result<()> {
        let to: Vec<String> = restart.targets.iter().map(|t| t.node.clone()).collect();
        let from: Vec<String> = victims
            .iter()
            .filter_map(|p| node_of(p).map(str::to_string))
            .collect();
        let (kind, now, checkpoint) = (restart.kind, restart.now, restart.checkpoint);
        let pending = pending(
            restart.action,
            victims,
            restart.targets,
            checkpoint,
            restart.reason,
            now,
        );
        let generation = status_of(job).generation;
        self.update_status_if(
            job,
            |fresh| unchanged_since(fresh, generation),
            |status| {
                status.record_move(kind, "", from.clone(), to.clone(), seconds(now));
                change(status);
                status.generation += 1;
                status.phase = Some(Phase::Restarting);
                status.restart = Some(pending.clone());
            },
        )
        .await?;
        self.request_checkpoint(job, victims, checkpoint, &pending)
            .await
    }

    /// Starts preempting `job` at `now`: records the preemption and a `Preempt` restart
    /// stopping every pod in the status (on the status the decision saw only, as a
    /// migration is), then asks the pods to checkpoint, by the annotation or the stop
    /// signal. Once the pods are gone, [`Actor::advance_restart`] queues the job again
    /// with nothing placed; placed again, its new pods restore the checkpoint. A failure
    /// is reported on the job ([`Actor::action_failed`]).
    pub async fn preempt(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        let started = self.start_preemption(job, job_pods, reason, now).await;
        self.reported(job, "Preempt", started).await
    }

    async fn start_preemption(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        reason: &str,
        now: Timestamp,
    ) -> Result<()> {
        let checkpoint = checkpoint_of(job)?;
        let victims: Vec<&Pod> = job_pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let restart = WholeRestart {
            action: RestartAction::Preempt,
            kind: MoveKindRecord::Preempted,
            targets: Vec::new(),
            checkpoint,
            reason,
            now,
        };
        self.restart_whole_job(job, &victims, restart, |_| {}).await
    }

    /// Replaces the policy's labels on `job` (no write when they are unchanged): one
    /// merge patch, removed keys as nulls.
    pub async fn set_policy_labels(
        &self,
        job: &TrainingJob,
        labels: std::collections::BTreeMap<String, String>,
    ) -> Result<()> {
        let before = status_of(job).policy_labels;
        if before == labels {
            return Ok(());
        }
        let mut patch = serde_json::Map::new();
        for key in before.keys().filter(|k| !labels.contains_key(*k)) {
            patch.insert(key.clone(), serde_json::Value::Null);
        }
        for (key, value) in &labels {
            patch.insert(key.clone(), json!(value));
        }
        self.patch_status(job, json!({"policyLabels": patch})).await
    }

    /// Merges `patch` into `job`'s status: one request, no read first. For fields this
    /// controller alone writes and that need no check against what is there (the loss
    /// series, the policy's labels); a restart's steps read and check first
    /// ([`Actor::update_status_if`]).
    pub async fn patch_status(&self, job: &TrainingJob, patch: serde_json::Value) -> Result<()> {
        let api = self.jobs(job);
        let name = job.name_any();
        let mut status = patch;
        if let (Some(fields), Some(generation)) = (status.as_object_mut(), job.metadata.generation)
        {
            fields.insert("observedGeneration".into(), json!(generation));
        }
        let body = Patch::Merge(json!({ "status": status }));
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        retry::with_backoff("status patch", || {
            self.guard.call(api.patch_status(&name, &params, &body))
        })
        .await
        .map(|_| ())
        .map_err(Error::api(format!(
            "patching the status of TrainingJob {name}"
        )))
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
            let mut fresh = self.guard.call(api.get_status(&name)).await?;
            let mut status = fresh.status.clone().unwrap_or_default();
            change(&mut status);
            status.observed_generation = fresh.metadata.generation;
            fresh.status = Some(status);
            self.guard
                .call(api.replace_status(
                    &name,
                    &PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PostParams::default()
                    },
                    &fresh,
                ))
                .await
        })
        .await
        .map_err(Error::api(format!(
            "updating the status of TrainingJob {name}"
        )))
    }

    /// Like [`Actor::update_status`], but writes only when `check` accepts the status
    /// read afresh; otherwise returns [`Error::Stale`] with its message and writes
    /// nothing. This is what keeps a step that must happen once from happening twice
    /// when the cache it was decided on is behind.
    pub async fn update_status_if(
        &self,
        job: &TrainingJob,
        check: impl Fn(&TrainingJobStatus) -> Result<(), String>,
        change: impl Fn(&mut TrainingJobStatus),
    ) -> Result<TrainingJob> {
        let api = self.jobs(job);
        let name = job.name_any();
        let refused: Mutex<Option<String>> = Mutex::new(None);
        let outcome = retry::with_backoff("status update", || async {
            let mut fresh = self.guard.call(api.get_status(&name)).await?;
            let mut status = fresh.status.clone().unwrap_or_default();
            if let Err(message) = check(&status) {
                *refused.lock().expect("refusal lock") = Some(message);
                return Ok(fresh);
            }
            change(&mut status);
            status.observed_generation = fresh.metadata.generation;
            fresh.status = Some(status);
            self.guard
                .call(api.replace_status(
                    &name,
                    &PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PostParams::default()
                    },
                    &fresh,
                ))
                .await
        })
        .await
        .map_err(Error::api(format!(
            "updating the status of TrainingJob {name}"
        )))?;
        match refused.into_inner().expect("refusal lock") {
            Some(message) => Err(Error::Stale { job: name, message }),
            None => Ok(outcome),
        }
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
        if let Err(source) = self
            .guard
            .call(self.recorder.publish(&event, &reference))
            .await
        {
            let error = Error::Event {
                job: job.name_any(),
                source,
            };
            tracing::warn!(%error, "could not publish event");
        }
    }
}

/// A restart of every pod of a job, as [`Actor::restart_whole_job`] records it.
struct WholeRestart<'a> {
    action: RestartAction,
    /// The move it is in the job's history.
    kind: MoveKindRecord,
    /// Where the replacements go (none for a preemption).
    targets: Vec<TaskTarget>,
    checkpoint: &'a Checkpoint,
    reason: &'a str,
    now: Timestamp,
}

/// One pod of a placement, and what this call did to it.
struct Made {
    name: String,
    /// The claims of its ephemeral volumes, to be made before it is bound.
    claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    node: String,
    uid: Option<String>,
    /// This call created it.
    created: bool,
    /// It was bound before this call.
    bound_before: bool,
    /// This call bound it.
    bound_here: bool,
    /// It has scheduling gates.
    gated: bool,
}

/// What creating a task's pod found.
struct Created {
    /// Its UID, for the Binding and for deletes.
    uid: Option<String>,
    /// This call created it (else it existed, left by a controller that stopped
    /// half-way).
    new: bool,
    /// The node it is bound to.
    bound_to: Option<String>,
    /// It has scheduling gates (from its template, or injected by a webhook).
    gated: bool,
}

/// Creates `pod` of `job`; one that already exists and belongs to this job counts as
/// created. A pod of the same name owned by another object (a deleted job of the same
/// name whose pods the garbage collector has not removed yet) is an error. A pod the API
/// server refuses as invalid is the template's fault.
async fn create_pod(
    api: &Api<Pod>,
    guard: &Guard,
    job: &TrainingJob,
    pod: &Pod,
) -> Result<Created> {
    let name = pod.name_any();
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match retry::with_backoff("create pod", || guard.call(api.create(&pp, pod))).await {
        Ok(created) => Ok(Created {
            uid: created.metadata.uid.clone(),
            new: true,
            bound_to: None,
            gated: gated(&created),
        }),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            let existing = guard
                .call(api.get(&name))
                .await
                .map_err(Error::api(format!("reading pod {name}")))?;
            if !observe::owned_by(&existing, job) {
                return Err(Error::NotFound(format!(
                    "pod {name} exists and belongs to another object (a deleted TrainingJob of the same name?); waiting for it to go"
                )));
            }
            Ok(Created {
                uid: existing.metadata.uid.clone(),
                new: false,
                bound_to: node_of(&existing).map(str::to_string),
                gated: gated(&existing),
            })
        }
        Err(kube::Error::Api(s)) if matches!(s.code, 400 | 422) => Err(Error::InvalidSpec {
            job: job.name_any(),
            message: format!(
                "the API server refused pod {name}, made from the role's template ({}): {}",
                s.code, s.message
            ),
        }),
        Err(error) => Err(Error::api(format!("creating pod {name}"))(error)),
    }
}

/// Binds `pod` (the object with `uid`) to `node` through the `binding` subresource.
///
/// A 409 is an answer, not a reason to repeat: the pod is bound already. Where it is
/// bound tells whether that is this binding (an earlier attempt whose reply was lost)
/// or someone else's. A reply that never came, or a 5xx, leaves the outcome unknown,
/// so the binding is sent once more, and that attempt's 409 settles it.
async fn bind(
    api: &Api<Pod>,
    guard: &Guard,
    pod: &str,
    uid: Option<&str>,
    node: &str,
) -> Result<()> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            uid: uid.map(str::to_string),
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
    let action = || format!("binding pod {pod} to node {node}");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let sent = retry::on_throttle("bind", || {
            guard.call(
                api.create_subresource::<_, serde_json::Value>("binding", pod, &params, &binding),
            )
        })
        .await;
        match sent {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let found = guard.call(api.get(pod)).await.map_err(Error::api(format!(
                    "reading pod {pod} after a conflicting binding"
                )))?;
                let same_pod = uid.is_none_or(|u| found.metadata.uid.as_deref() == Some(u));
                return match node_of(&found) {
                    Some(on) if on == node && same_pod => Ok(()),
                    _ => Err(Error::api(action())(kube::Error::Api(s))),
                };
            }
            Err(error) if attempts < 2 && outcome_unknown(&error) => {
                tracing::debug!(%error, pod, node, "binding's outcome unknown; sending it again");
            }
            Err(error) => return Err(Error::api(action())(error)),
        }
    }
}

/// Whether `pod` has scheduling gates.
pub fn gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

/// Whether a failed call may nevertheless have happened: a 5xx, or no reply at all.
fn outcome_unknown(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(s) => s.code >= 500,
        kube::Error::HyperError(_) => true,
        kube::Error::Service(_) => !matches!(retry::cut_of(error), Some(retry::Cut::NotLeading)),
        _ => false,
    }
}

/// Deletes `pod` if it is still the object with `uid` (when given): a pod already gone,
/// or whose name now belongs to another pod, counts as deleted. `grace_seconds: None`
/// leaves the pod's own grace period.
async fn delete_pod(
    api: &Api<Pod>,
    guard: &Guard,
    pod: &str,
    uid: Option<&str>,
    grace_seconds: Option<i64>,
) -> Result<()> {
    let dp = DeleteParams {
        grace_period_seconds: grace_seconds.map(|g| g as u32),
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match retry::on_throttle("delete pod", || guard.call(api.delete(pod, &dp))).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        // The UID precondition failed: the pod we meant is gone already.
        Err(kube::Error::Api(s)) if s.code == 409 && uid.is_some() => Ok(()),
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

/// `time` as seconds since the Unix epoch, the host clock of a snapshot.
fn seconds(time: Timestamp) -> f64 {
    time.as_millisecond() as f64 / 1000.0
}

fn chrono_now() -> String {
    rfc3339(Timestamp::now())
}

/// `time` to whole seconds, as RFC 3339 (what the status and annotations hold).
pub fn rfc3339(time: Timestamp) -> String {
    Timestamp::from_second(time.as_second())
        .unwrap_or(time)
        .to_string()
}

fn namespace(job: &TrainingJob) -> String {
    job.namespace().unwrap_or_else(|| "default".into())
}

fn status_of(job: &TrainingJob) -> TrainingJobStatus {
    job.status.clone().unwrap_or_default()
}

fn checkpoint_of(job: &TrainingJob) -> Result<&Checkpoint> {
    job.spec
        .checkpoint
        .as_ref()
        .ok_or_else(|| Error::InvalidSpec {
            job: job.name_any(),
            message: "the job has no `checkpoint` and cannot be moved or rescaled".into(),
        })
}

/// The restart record for stopping `victims` at `now`.
fn pending(
    action: RestartAction,
    victims: &[&Pod],
    targets: Vec<TaskTarget>,
    checkpoint: &Checkpoint,
    reason: &str,
    now: Timestamp,
) -> PendingRestart {
    let delete_after = match checkpoint.method {
        CheckpointMethod::Annotation => Some(rfc3339(
            now + SignedDuration::from_secs(checkpoint.grace_period_seconds.into()),
        )),
        CheckpointMethod::Signal => None,
    };
    PendingRestart {
        action,
        stopping: victims.iter().map(|p| p.name_any()).collect(),
        targets,
        requested_at: rfc3339(now),
        delete_after,
        retry_after: None,
        reason: reason.to_string(),
    }
}

/// Whether a pod's containers have stopped for good (it holds no resources any more).
pub fn terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn created_message(placed: &[Placement]) -> String {
    format!(
        "{} pod(s) created and bound: {}",
        placed.len(),
        describe(placed)
    )
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

/// A move a policy asked for ([`Actor::migrate`]): which task (every task when `None`),
/// to which node, and the decision's purpose and reason, recorded in the job's history.
#[derive(Clone, Copy, Debug)]
pub struct Migration<'a> {
    /// The task that moves; `None` moves the whole job.
    pub task: Option<&'a str>,
    /// Where it goes.
    pub node: &'a str,
    /// The decision's purpose (`reallocate`, `rebalance`, ...).
    pub purpose: &'a str,
    /// The policy's reason.
    pub reason: &'a str,
}

/// The key under which a delete of `pod` is remembered: its UID, else its name.
pub fn delete_key(pod: &Pod) -> String {
    pod.metadata
        .uid
        .clone()
        .unwrap_or_else(|| format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()))
}

/// Refuses a status that moved on since a decision read `generation`: another restart
/// under way, a new generation, or a finished job.
fn unchanged_since(fresh: &TrainingJobStatus, generation: u32) -> Result<(), String> {
    if fresh.restart.is_some() {
        return Err("a restart is already under way".into());
    }
    if fresh.generation != generation {
        return Err(format!(
            "its pods are of generation {} now, not {generation}",
            fresh.generation
        ));
    }
    if matches!(fresh.phase, Some(Phase::Succeeded | Phase::Failed)) {
        return Err("it has finished".into());
    }
    Ok(())
}

/// The back-off before a job whose pods failed `failures` times is queued again: 10 s,
/// doubling with each failure, at most 6 min (the Job controller's).
pub fn failure_backoff(failures: u32) -> SignedDuration {
    let seconds = 10u64.saturating_mul(1 << failures.saturating_sub(1).min(10));
    SignedDuration::from_secs(seconds.min(360) as i64)
}

fn describe_failure(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let reason = status.and_then(|s| s.reason.as_deref()).unwrap_or("Failed");
    let node = node_of(pod).unwrap_or("no node");
    match status.and_then(|s| s.message.as_deref()) {
        Some(message) => format!("pod {} on {node}: {reason} ({message})", pod.name_any()),
        None => format!("pod {} on {node}: {reason}", pod.name_any()),
    }
}
