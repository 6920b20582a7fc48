//! The [`Actor`]: the client, the call guard, the Event recorder, and what this process
//! remembers of its own writes (deletes sent, checkpoints asked, owned objects made), with
//! the helpers every action shares: reporting a failed action, deleting a pod once,
//! making the job's Service and PodDisruptionBudget. The actions themselves are in the
//! sibling modules; this one must not carry one out.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

use crate::crd::{Checkpoint, Placement, TrainingJob, TrainingJobStatus};
use crate::pods::delete_key;
use crate::retry::LeaderTerm;
use crate::retry::{self, Guard};
use crate::{Error, FIELD_MANAGER, Result, template};
use switchyard_control::Leader;

/// Carries out actions on one cluster.
#[derive(Clone)]
pub struct Actor {
    pub(super) client: Client,
    pub(super) recorder: Recorder,
    /// Who publishes the Events (for those told once, [`super::told`]).
    pub(super) reporter: Reporter,
    /// Every call's deadline and leadership check.
    pub(super) guard: Guard,
    /// Pods (see [`delete_key`]) this process has deleted, so a cache that has not
    /// caught up does not make it delete them again.
    pub(super) deletes_sent: Arc<Mutex<HashSet<String>>>,
    /// Pods this process has asked to checkpoint with the annotation, and when.
    pub(super) annotated: Arc<Mutex<HashMap<String, Timestamp>>>,
    /// Jobs (by UID) whose headless Service and PodDisruptionBudget exist.
    pub(super) owned_made: Arc<Mutex<HashSet<String>>>,
    /// Checkpoint acknowledgements heard, by pod (`namespace/name`).
    pub(super) acks: Arc<Mutex<HashMap<String, PodAck>>>,
}

/// One pod's word that its checkpoint is complete.
#[derive(Clone, Debug, PartialEq)]
pub struct PodAck {
    /// When it was heard (the log line's time, or the request's).
    pub time: Timestamp,
    /// Where the checkpoint is.
    pub path: String,
    /// The training step it holds, when the process said.
    pub step: Option<u64>,
}

/// Condition type set when an in-place CPU resize is refused or applied.
pub const CPU_WEIGHT_CONDITION: &str = "CpuWeightApplied";
/// Condition type set when the job's pods are created and released, or refused.
pub const PODS_CREATED_CONDITION: &str = "PodsCreated";
/// Condition type set `False` when the scheduler or a node's kubelet refused a member
/// and the gang was taken back, `True` once a placement is bound whole again.
pub const PODS_SCHEDULED_CONDITION: &str = "PodsScheduled";
/// Condition type set when the job failed for good (reason `BackoffLimitExceeded`).
pub const FAILED_CONDITION: &str = "Failed";

impl Actor {
    /// An actor publishing Events as `reporter`.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let recorder = Recorder::new(client.clone(), reporter.clone());
        Self {
            client,
            recorder,
            reporter,
            guard: Guard::default(),
            deletes_sent: Arc::default(),
            annotated: Arc::default(),
            owned_made: Arc::default(),
            acks: Arc::default(),
        }
    }

    /// Makes calls only while `leader` leads: a replica that lost the lead mid-round,
    /// or mid-restart, writes nothing more.
    pub fn fenced_by(mut self, leader: Arc<Leader>) -> Self {
        self.guard = self.guard.fenced_by(leader);
        self
    }

    /// Fences status writes with this replica's Lease term (see
    /// [`Actor::update_status_if`]): a status a newer leader wrote is not written again.
    pub fn with_term(mut self, term: LeaderTerm) -> Self {
        self.guard = self.guard.with_term(term);
        self
    }

    /// Gives each API call `timeout` instead of [`retry::CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.guard = self.guard.with_timeout(timeout);
        self
    }

    pub(super) fn pods(&self, job: &TrainingJob) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &namespace(job))
    }

    pub(super) fn jobs(&self, job: &TrainingJob) -> Api<TrainingJob> {
        Api::namespaced(self.client.clone(), &namespace(job))
    }

    /// `outcome` as it is, after reporting it with [`Actor::action_failed`] when it
    /// failed: one place for every action's "done, or an Event saying why not".
    pub(super) async fn reported(
        &self,
        job: &TrainingJob,
        action: &str,
        outcome: Result<()>,
    ) -> Result<()> {
        match outcome {
            Ok(()) => Ok(()),
            Err(error) => Err(self.action_failed(job, action, error).await),
        }
    }

    /// Reports an action that failed as a Warning Event `<action>Failed` on the job
    /// (the note starts with the failure's kind, e.g. `forbidden: ...`); returns the
    /// error. Every action reports its own failure once, here or where a placement's
    /// failure is reported, so `kubectl events --for trainingjob/<name>` shows every
    /// action that did not happen.
    pub async fn action_failed(&self, job: &TrainingJob, action: &str, error: Error) -> Error {
        let note = format!("{}: {error}", error.failure_reason());
        let reason = format!("{action}Failed");
        self.event(job, EventType::Warning, &reason, action, &note)
            .await;
        error
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
        let reference: ObjectReference = job.object_ref(&());
        let about = format!("TrainingJob `{}`", job.name_any());
        self.event_about(&reference, &about, type_, reason, action, note)
            .await;
    }

    /// Publishes an Event about `reference` (`about` names it in a failure's log
    /// line): a TrainingJob, an adopted job's owner, a pod. A failure is logged, never
    /// fatal.
    pub(crate) async fn event_about(
        &self,
        reference: &ObjectReference,
        about: &str,
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
        if let Err(source) = self
            .guard
            .call(self.recorder.publish(&event, reference))
            .await
        {
            let error = Error::Event {
                job: about.to_string(),
                source,
            };
            tracing::warn!(%error, "could not publish event");
        }
    }

    /// Creates `job`'s headless Service ([`template::service`]) and its
    /// PodDisruptionBudget ([`template::disruption_budget`]) unless this process already
    /// has. Best effort: without the Service the pods still run and only their names do
    /// not resolve, and without the budget a drain evicts members all at once (each is
    /// still seen, and restarts the gang), so a failure is logged and tried again next
    /// time.
    pub(super) async fn ensure_owned_objects(&self, job: &TrainingJob) {
        let Some(uid) = job.metadata.uid.clone() else {
            return;
        };
        if self.owned_made.lock().expect("owned lock").contains(&uid) {
            return;
        }
        let ns = namespace(job);
        let services: Api<Service> = Api::namespaced(self.client.clone(), &ns);
        let budgets: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), &ns);
        let service = self
            .ensure_owned(&services, &template::service(job), &uid, "Service")
            .await;
        let budget = self
            .ensure_owned(
                &budgets,
                &template::disruption_budget(job),
                &uid,
                "PodDisruptionBudget",
            )
            .await;
        if service && budget {
            self.owned_made.lock().expect("owned lock").insert(uid);
        }
    }

    /// Creates `object` (owned by the job with `uid`), or finds it there already; true
    /// when it exists and belongs to that job.
    pub(super) async fn ensure_owned<K>(
        &self,
        api: &Api<K>,
        object: &K,
        uid: &str,
        kind: &str,
    ) -> bool
    where
        K: Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match retry::with_backoff("create owned object", || {
            self.guard.call(api.create(&pp, object))
        })
        .await
        {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                match self.guard.call(api.get(&name)).await {
                    Ok(existing) => existing
                        .meta()
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == uid),
                    Err(error) => {
                        tracing::warn!(%error, name, kind, "reading the job's object");
                        false
                    }
                }
            }
            Err(error) => {
                let error = Error::api(format!("creating the {kind} {name}"))(error);
                tracing::warn!(%error, "the job runs without it for now");
                false
            }
        }
    }

    /// Deletes a pod unless this process already did (a cache that has not caught up
    /// still shows it without its deletion timestamp).
    pub(super) async fn delete_once(
        &self,
        job: &TrainingJob,
        pod: &Pod,
        grace: Option<i64>,
    ) -> Result<()> {
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

    /// Whether this process deleted `pod` (so its deletion is not news).
    pub(crate) fn deleted_here(&self, pod: &Pod) -> bool {
        self.deletes_sent
            .lock()
            .expect("deletes lock")
            .contains(&delete_key(pod))
    }

    /// Whether any pod's delete or annotation is remembered, so that a pass needs the
    /// keys of the pods present to forget those gone ([`Actor::forget_deletes`]).
    pub(crate) fn remembers_pods(&self) -> bool {
        !self.deletes_sent.lock().expect("deletes lock").is_empty()
            || !self.annotated.lock().expect("annotations lock").is_empty()
    }

    /// Forgets the deletes sent for pods no longer in the cache (`present` holds the
    /// keys of those that are, see [`delete_key`]).
    pub(crate) fn forget_deletes(&self, present: &HashSet<String>) {
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
    pub(crate) async fn stop_pods(&self, job: &TrainingJob, job_pods: &[Pod]) -> Result<()> {
        for pod in job_pods
            .iter()
            .filter(|p| !crate::pods::terminated(p) && p.metadata.deletion_timestamp.is_none())
        {
            self.delete_once(job, pod, None).await?;
        }
        Ok(())
    }
}

/// Deletes `pod` if it is still the object with `uid` (when given): a pod already gone,
/// or whose name now belongs to another pod, counts as deleted. `grace_seconds: None`
/// leaves the pod's own grace period.
pub(super) async fn delete_pod(
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

/// `time` as seconds since the Unix epoch, the host clock of a snapshot.
pub(super) fn seconds(time: Timestamp) -> f64 {
    time.as_millisecond() as f64 / 1000.0
}

/// `time` to whole seconds, as RFC 3339 (what the status and annotations hold).
pub(crate) fn rfc3339(time: Timestamp) -> String {
    Timestamp::from_second(time.as_second())
        .unwrap_or(time)
        .to_string()
}

pub(super) fn namespace(job: &TrainingJob) -> String {
    job.namespace().unwrap_or_else(|| "default".into())
}

pub(super) fn status_of(job: &TrainingJob) -> TrainingJobStatus {
    job.status.clone().unwrap_or_default()
}

pub(super) fn checkpoint_of(job: &TrainingJob) -> Result<&Checkpoint> {
    job.spec
        .checkpoint
        .as_ref()
        .ok_or_else(|| Error::InvalidSpec {
            job: job.name_any(),
            message: "the job has no `checkpoint` and cannot be moved or rescaled".into(),
        })
}

/// The grace period a gang's pods are stopped with: the checkpoint's, when the process
/// saves on the stop signal; else the pods' own.
pub(super) fn stop_grace(job: &TrainingJob) -> Option<i64> {
    match &job.spec.checkpoint {
        Some(c) if c.method == crate::crd::CheckpointMethod::Signal => {
            Some(i64::from(c.grace_period_seconds))
        }
        _ => None,
    }
}

pub(super) fn describe(placed: &[Placement]) -> String {
    describe_pairs(placed.iter().map(|p| (&p.task, &p.node)))
}

/// `a on n1, b on n2` for (what, node) pairs.
pub(super) fn describe_pairs(
    pairs: impl Iterator<Item = (impl std::fmt::Display, impl std::fmt::Display)>,
) -> String {
    pairs
        .map(|(what, node)| format!("{what} on {node}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
