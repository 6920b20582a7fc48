//! Acknowledged checkpoints on a cluster: the acknowledgements this process has heard
//! (a pod's `switchyard: checkpoint-complete` log line, or `POST /v1/jobs/{id}/checkpoint`
//! naming the job's tasks), whether every pod a restart asked has acknowledged since it
//! was asked (then the pods are deleted at once instead of at the grace period's end),
//! and how the checkpoint ended: the record the status keeps, its condition and Event.
//!
//! Acknowledgements are kept in memory by pod (`namespace/name`): a leader that takes
//! over half-way has not heard them, and stops the pods at the grace period's end.
//! This module decides nothing about which pods stop; `advance` asks it.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::runtime::events::EventType;

use super::actor::{Actor, PodAck, namespace, seconds};
use super::status::set_condition;
use crate::crd::{
    CheckpointRecord, CheckpointResult, PendingRestart, RestartAction, TrainingJob,
    TrainingJobStatus,
};

/// Condition type set after every stop that asked for a checkpoint.
pub const CHECKPOINTED_CONDITION: &str = "Checkpointed";

/// An acknowledgement heard a little before the request it answers still answers it:
/// the request's time is kept in whole seconds.
pub(crate) const CLOCK_SLACK: SignedDuration = SignedDuration::from_secs(1);

impl Actor {
    /// Records that the pod `pod_key` (`namespace/name`) acknowledged its checkpoint.
    /// A later acknowledgement replaces an earlier one.
    pub fn record_ack(&self, pod_key: String, ack: PodAck) {
        self.acks.lock().expect("acks lock").insert(pod_key, ack);
    }

    /// The pod `key`'s (`namespace/name`) latest acknowledgement.
    pub(crate) fn ack_of(&self, key: &str) -> Option<PodAck> {
        self.acks.lock().expect("acks lock").get(key).cloned()
    }

    /// The pod `key`'s acknowledgement heard since `since`.
    fn ack_since(&self, key: &str, since: Timestamp) -> Option<PodAck> {
        self.acks
            .lock()
            .expect("acks lock")
            .get(key)
            .filter(|a| a.time >= since - CLOCK_SLACK)
            .cloned()
    }

    /// Whether every one of `old` that still runs acknowledged its checkpoint since it
    /// was asked (false when none is left to ask).
    pub(super) fn all_acknowledged(
        &self,
        job: &TrainingJob,
        old: &[&Pod],
        asked: Timestamp,
    ) -> bool {
        let ns = namespace(job);
        !old.is_empty()
            && old.iter().all(|pod| {
                let since = self.asked_at(pod).unwrap_or(asked);
                self.ack_since(&format!("{ns}/{}", pod.name_any()), since)
                    .is_some()
            })
    }

    /// How `restart`'s checkpoint ended, now that its old pods are gone: acknowledged
    /// when every pod it stopped acknowledged since the request, else timed out. None
    /// for a restart that asked for no checkpoint (a recovery, or a job without
    /// `checkpoint`).
    pub(super) fn checkpoint_record(
        &self,
        job: &TrainingJob,
        restart: &PendingRestart,
        now: Timestamp,
    ) -> Option<CheckpointRecord> {
        let checkpoint = job.spec.checkpoint.as_ref()?;
        if restart.action == RestartAction::Recover || restart.stopping.is_empty() {
            return None;
        }
        let requested: Timestamp = restart.requested_at.parse().ok()?;
        let ns = namespace(job);
        let job_name = job.name_any();
        let mut acks = Vec::new();
        let mut missing = Vec::new();
        for pod in &restart.stopping {
            let key = format!("{ns}/{pod}");
            match self.ack_since(&key, requested) {
                Some(ack) => acks.push(ack),
                None => missing.push(task_of_pod(&job_name, pod)),
            }
        }
        let since = |t: Timestamp| (seconds(t) - seconds(requested)).max(0.0);
        let record = if missing.is_empty() {
            let last = acks.iter().max_by_key(|a| a.time)?;
            CheckpointRecord {
                outcome: CheckpointResult::Acknowledged,
                seconds: since(last.time),
                path: Some(last.path.clone()),
                requested_at: restart.requested_at.clone(),
                not_acknowledged: Vec::new(),
            }
        } else {
            let grace = SignedDuration::from_secs(checkpoint.grace_period_seconds.into());
            CheckpointRecord {
                outcome: CheckpointResult::TimedOut,
                seconds: since(now.min(requested + grace)),
                path: acks.iter().max_by_key(|a| a.time).map(|a| a.path.clone()),
                requested_at: restart.requested_at.clone(),
                not_acknowledged: missing,
            }
        };
        Some(record)
    }

    /// Forgets the acknowledgements of the pods `restart` stopped, once its record is
    /// kept.
    pub(super) fn forget_acks(&self, job: &TrainingJob, restart: &PendingRestart) {
        let ns = namespace(job);
        let mut acks = self.acks.lock().expect("acks lock");
        for pod in &restart.stopping {
            acks.remove(&format!("{ns}/{pod}"));
        }
    }

    /// Publishes `record`'s Event (`CheckpointAcknowledged`, or a Warning
    /// `CheckpointTimedOut` naming the tasks that did not acknowledge) for `action`.
    pub(super) async fn checkpoint_event(
        &self,
        job: &TrainingJob,
        record: &CheckpointRecord,
        action: &str,
    ) {
        let (type_, reason, note) = describe(record);
        self.event(job, type_, reason, action, &note).await;
    }
}

/// Writes `record` into `status` with its condition.
pub(super) fn keep_record(status: &mut TrainingJobStatus, record: &CheckpointRecord) {
    let (_, reason, note) = describe(record);
    let state = match record.outcome {
        CheckpointResult::Acknowledged => "True",
        CheckpointResult::TimedOut => "False",
    };
    set_condition(status, CHECKPOINTED_CONDITION, state, reason, &note);
    status.last_checkpoint = Some(record.clone());
}

/// The Event type, reason and sentence of a checkpoint's end.
pub(crate) fn describe(record: &CheckpointRecord) -> (EventType, &'static str, String) {
    match record.outcome {
        CheckpointResult::Acknowledged => (
            EventType::Normal,
            "CheckpointAcknowledged",
            format!(
                "every task acknowledged its checkpoint {:.1} s after the request{}; its pods were stopped then",
                record.seconds,
                record
                    .path
                    .as_deref()
                    .map(|p| format!(" (at {p})"))
                    .unwrap_or_default()
            ),
        ),
        CheckpointResult::TimedOut => (
            EventType::Warning,
            "CheckpointTimedOut",
            format!(
                "stopped {:.1} s after the checkpoint request without an acknowledgement from {} (at the grace period's end, or when its pods exited); the work since its previous complete checkpoint is lost",
                record.seconds,
                record.not_acknowledged.join(", ")
            ),
        ),
    }
}

/// The task of the job's pod `pod` (`<job>-<task>-<generation>`).
pub(crate) fn task_of_pod(job: &str, pod: &str) -> String {
    let task = pod
        .strip_prefix(job)
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or(pod);
    task.rsplit_once('-')
        .filter(|(_, generation)| generation.parse::<u32>().is_ok())
        .map_or(task, |(task, _)| task)
        .to_string()
}
