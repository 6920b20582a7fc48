//! Carrying a staged restart on: [`Actor::advance_restart`], called whenever the caches
//! change, deletes the annotated pods once their grace period has passed, or as soon as
//! every one of them acknowledged its checkpoint, and, once the old pods are gone,
//! records how the checkpoint ended (`acknowledge`), makes and releases the
//! replacements, or queues the job again after its back-off. It never waits: a call
//! with nothing to do says so, and the caller calls again when the caches change.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::runtime::events::EventType;

use super::acknowledge::keep_record;
use super::actor::{Actor, PODS_CREATED_CONDITION, describe, status_of};
use super::status::set_condition;
use crate::Result;
use crate::crd::{CheckpointRecord, PendingRestart, Phase, RestartAction, TrainingJob};
use crate::pods::{confirmed_stopped, terminated};

/// Where a staged restart stands after [`Actor::advance_restart`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartProgress {
    /// The job has no restart under way.
    Idle,
    /// Waiting for the grace period, for the old pods to be gone, or for the back-off.
    Waiting,
    /// The replacements are made and released, or the job waits in the queue again.
    Done,
}

impl Actor {
    /// Carries `job`'s restart on, if it has one, at `now`: deletes the annotated pods
    /// once the grace period has passed, and once every old pod in `job_pods` is gone,
    /// or deleted and confirmed stopped by the kubelet (the caller leaves out those whose
    /// node is gone or out of service), makes and releases the replacements and records
    /// them, or queues the job again. Never waits: a call that finds nothing to do returns
    /// [`RestartProgress::Waiting`], and the caller calls again when the caches change.
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
            self.stop_old(job, &restart, &old, now).await?;
            // An old pod holds the replacements back until it is deleted and the
            // kubelet confirmed it stopped, or it is gone from `job_pods`.
            let may_run =
                |p: &&Pod| p.metadata.deletion_timestamp.is_none() || !confirmed_stopped(p);
            if old.iter().any(may_run) {
                return Ok(RestartProgress::Waiting);
            }
        }
        // The old pods are gone: the checkpoint they were asked for is over.
        let record = self.checkpoint_record(job, &restart, now);
        if matches!(
            restart.action,
            RestartAction::Recover | RestartAction::Preempt
        ) {
            return self.requeue(job, &restart, record, now).await;
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
            .create_and_release(job, &assignments, status.generation, now)
            .await
        {
            Ok(placed) => placed,
            Err(error) => return Err(self.placement_failed(job, action, error).await),
        };
        let created = format!(
            "{} pod(s) created and released to the scheduler: {}",
            placed.len(),
            describe(&placed)
        );
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
            set_condition(s, PODS_CREATED_CONDITION, "True", "Released", &created);
            if let Some(record) = &record {
                keep_record(s, record);
            }
        })
        .await?;
        self.forget_acks(job, &restart);
        if let Some(record) = &record {
            self.checkpoint_event(job, record, action).await;
        }
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

    /// Deletes those of a restart's `old` pods that are due at `now`: a finished one at
    /// once, one asked by signal at once (its grace period is the delete's), one asked
    /// by the annotation once its whole grace period from when it was asked has passed,
    /// or at once when every one still running has acknowledged its checkpoint since.
    async fn stop_old(
        &self,
        job: &TrainingJob,
        restart: &PendingRestart,
        old: &[&Pod],
        now: Timestamp,
    ) -> Result<()> {
        let delete_after = restart
            .delete_after
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok());
        let grace = match (&restart.delete_after, &job.spec.checkpoint) {
            (None, Some(c)) => Some(i64::from(c.grace_period_seconds)),
            _ => None,
        };
        let running: Vec<&Pod> = old
            .iter()
            .copied()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && !terminated(p))
            .collect();
        let requested = restart.requested_at.parse::<Timestamp>().unwrap_or(now);
        // Every pod asked has its checkpoint written: none waits out its grace period.
        let acknowledged =
            delete_after.is_some() && self.all_acknowledged(job, &running, requested);
        for pod in old
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            let due = match (delete_after, &job.spec.checkpoint) {
                _ if terminated(pod) => true,
                _ if acknowledged => true,
                (None, _) => true,
                // Each pod gets its whole grace period from when it was asked. A
                // leader that stopped between recording the restart and asking left a
                // pod that was never asked: it is asked now, not deleted without a
                // checkpoint.
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
        Ok(())
    }

    /// Ends a `Recover` or `Preempt` restart whose old pods are gone: once the back-off
    /// (of a recovery) has passed, the job is waiting again, with nothing placed.
    async fn requeue(
        &self,
        job: &TrainingJob,
        restart: &PendingRestart,
        record: Option<CheckpointRecord>,
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
                if let Some(record) = &record {
                    keep_record(s, record);
                }
            },
        )
        .await?;
        self.forget_acks(job, restart);
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
        if let Some(record) = &record {
            self.checkpoint_event(job, record, action).await;
        }
        self.event(job, EventType::Normal, reason, action, &note)
            .await;
        Ok(RestartProgress::Done)
    }
}
