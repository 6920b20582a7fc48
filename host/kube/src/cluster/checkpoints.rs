//! The checkpoint a job is asked for, as the API shows and takes it on a cluster: a
//! TrainingJob with a staged restart under way that asked for a checkpoint (a
//! migration, a rescale or a preemption) has one requested until its old pods are gone;
//! an acknowledgement over the API names the job's tasks (or all of them) and is
//! recorded like a `switchyard: checkpoint-complete` log line, for the next pass to
//! act on. An adopted id is handed to the adopted jobs' own (`adopted::api`). It makes
//! no API call; the restart's own pass deletes the pods.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use switchyard_control::{
    AckRefused, Acknowledged, CheckpointAck, CheckpointOutcome, CheckpointRequest, LastCheckpoint,
};

use super::controller::KubeCluster;
use crate::act::{PodAck, task_of_pod};
use crate::adopt::parse_adopted_id;
use crate::crd::{CheckpointResult, PendingRestart, RestartAction, TrainingJob};
use crate::pods::job_id;

/// The restart of `job` that asks for a checkpoint now, with its request time.
fn asking(job: &TrainingJob) -> Option<(&PendingRestart, Timestamp)> {
    job.spec.checkpoint.as_ref()?;
    let restart = job.status.as_ref()?.restart.as_ref()?;
    if restart.action == RestartAction::Recover || restart.stopping.is_empty() {
        return None;
    }
    Some((restart, restart.requested_at.parse().ok()?))
}

/// `time` as Unix seconds, the API's clock.
pub(super) fn seconds(time: Timestamp) -> f64 {
    time.as_millisecond() as f64 / 1000.0
}

impl KubeCluster {
    /// The checkpoint asked of the TrainingJob `id` now.
    pub(super) fn checkpoint_asked(&self, id: &str) -> CheckpointRequest {
        if parse_adopted_id(id).is_some() {
            return self.adopted_checkpoint_asked(id);
        }
        let Some(job) = self.caches.training_job(id) else {
            return CheckpointRequest::default();
        };
        let Some((restart, requested)) = asking(&job) else {
            return CheckpointRequest::default();
        };
        let grace = job
            .spec
            .checkpoint
            .as_ref()
            .map_or(0.0, |c| f64::from(c.grace_period_seconds));
        let ns = job.namespace().unwrap_or_default();
        let acknowledged = restart
            .stopping
            .iter()
            .filter(|pod| {
                self.actor
                    .ack_of(&format!("{ns}/{pod}"))
                    .is_some_and(|a| a.time >= requested)
            })
            .map(|pod| task_of_pod(&job.name_any(), pod))
            .collect();
        CheckpointRequest {
            requested: true,
            requested_at: Some(seconds(requested)),
            deadline: Some(seconds(requested) + grace),
            acknowledged,
        }
    }

    /// Records an acknowledgement of the checkpoint asked of the TrainingJob `id`, for
    /// the named task or every asked one; the next pass deletes the pods if every one
    /// has acknowledged.
    pub(super) fn checkpoint_acknowledged(
        &mut self,
        id: &str,
        ack: CheckpointAck,
    ) -> Result<Acknowledged, AckRefused> {
        if parse_adopted_id(id).is_some() {
            return self.adopted_checkpoint_acknowledged(id, ack);
        }
        ack.check_path()?;
        let not_requested = || AckRefused::not_requested(id);
        let job = self.caches.training_job(id).ok_or_else(not_requested)?;
        let (restart, requested) = asking(&job).ok_or_else(not_requested)?;
        let name = job.name_any();
        let ns = job.namespace().unwrap_or_default();
        let asked: Vec<(&String, String)> = restart
            .stopping
            .iter()
            .map(|pod| (pod, task_of_pod(&name, pod)))
            .collect();
        let chosen: Vec<&String> = match &ack.task {
            Some(task) => {
                let pods: Vec<&String> = asked
                    .iter()
                    .filter(|(_, t)| t == task)
                    .map(|(pod, _)| *pod)
                    .collect();
                if pods.is_empty() {
                    return Err(AckRefused::unknown_task(
                        id,
                        task.clone(),
                        asked.iter().map(|(_, t)| t.as_str()),
                    ));
                }
                pods
            }
            None => asked.iter().map(|(pod, _)| *pod).collect(),
        };
        let now = self.now_timestamp();
        for pod in chosen {
            self.actor.record_ack(
                format!("{ns}/{pod}"),
                PodAck {
                    time: now,
                    path: ack.path.clone(),
                    step: ack.step,
                },
            );
        }
        let waiting_for = asked
            .iter()
            .filter(|(pod, _)| {
                self.actor
                    .ack_of(&format!("{ns}/{pod}"))
                    .is_none_or(|a| a.time < requested)
            })
            .map(|(_, task)| task.clone())
            .collect();
        self.revisit.insert(job_id(&job));
        self.caches.changed.notify_one();
        Ok(Acknowledged {
            after_seconds: (seconds(now) - seconds(requested)).max(0.0),
            waiting_for,
        })
    }

    /// How the last checkpoint of each TrainingJob that had one ended.
    pub(super) fn checkpoint_outcomes(&self) -> BTreeMap<String, LastCheckpoint> {
        self.caches
            .managed_jobs()
            .iter()
            .filter_map(|job| {
                let record = job.status.as_ref()?.last_checkpoint.as_ref()?;
                let requested: Timestamp = record.requested_at.parse().ok()?;
                let outcome = match record.outcome {
                    CheckpointResult::Acknowledged => CheckpointOutcome::Acknowledged,
                    CheckpointResult::TimedOut => CheckpointOutcome::TimedOut,
                };
                let last = LastCheckpoint {
                    outcome,
                    seconds: record.seconds,
                    path: record.path.clone(),
                    at: seconds(requested) + record.seconds,
                };
                Some((job_id(job), last))
            })
            .chain(self.adopted_checkpoint_outcomes())
            .collect()
    }
}
