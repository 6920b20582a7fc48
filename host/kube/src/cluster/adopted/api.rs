//! What the API takes and shows for adopted ids (`<kind>:<namespace>/<name>`), through
//! the same command path as a TrainingJob's: the checkpoint asked of an adopted job now
//! (`GET /v1/jobs/{id}/checkpoint`), a task's acknowledgement of it (`POST`), recorded
//! like a `switchyard: checkpoint-complete` line for the next pass to act on, and how
//! its last checkpoint ended. (Loss samples pushed for an adopted id join its series in
//! the cluster's `push_loss`, beside a TrainingJob's.) It makes no API call.

use switchyard_control::{
    AckRefused, Acknowledged, CheckpointAck, CheckpointRequest, LastCheckpoint,
};

use super::stop::checkpoint_grace;
use crate::act::PodAck;
use crate::cluster::checkpoints::seconds;
use crate::cluster::controller::KubeCluster;
use crate::pods::delete_key;

impl KubeCluster {
    /// The checkpoint asked of adopted job `id` now: since its first asked pod was
    /// asked, until the last one's grace ends.
    pub(in crate::cluster) fn adopted_checkpoint_asked(&self, id: &str) -> CheckpointRequest {
        let Ok(job) = self.adopted_now(id) else {
            return CheckpointRequest::default();
        };
        let asked = self.asked_members(&job);
        let Some(requested) = asked.iter().map(|(_, t)| *t).min() else {
            return CheckpointRequest::default();
        };
        let deadline = asked
            .iter()
            .map(|(m, t)| *t + checkpoint_grace(&m.pod))
            .max();
        CheckpointRequest {
            requested: true,
            requested_at: Some(seconds(requested)),
            deadline: deadline.map(seconds),
            acknowledged: asked
                .iter()
                .filter(|(m, t)| self.adopted.ack_since(&m.pod, *t).is_some())
                .map(|(m, _)| m.task.clone())
                .collect(),
        }
    }

    /// Records an acknowledgement of the checkpoint asked of adopted job `id`, for the
    /// named task or every asked one (only this job's asked tasks are taken); the next
    /// pass evicts the pods if every one has acknowledged.
    pub(in crate::cluster) fn adopted_checkpoint_acknowledged(
        &mut self,
        id: &str,
        ack: CheckpointAck,
    ) -> Result<Acknowledged, AckRefused> {
        ack.check_path()?;
        let not_requested = || AckRefused::not_requested(id);
        let job = self.adopted_now(id).map_err(|_| not_requested())?;
        let asked = self.asked_members(&job);
        let requested = asked
            .iter()
            .map(|(_, t)| *t)
            .min()
            .ok_or_else(not_requested)?;
        let chosen: Vec<_> = asked
            .iter()
            .filter(|(m, _)| ack.task.as_ref().is_none_or(|task| m.task == *task))
            .collect();
        if let (Some(task), true) = (&ack.task, chosen.is_empty()) {
            return Err(AckRefused::unknown_task(
                id,
                task.clone(),
                asked.iter().map(|(m, _)| m.task.as_str()),
            ));
        }
        let now = self.now_timestamp();
        {
            let mut acks = self.adopted.acks.lock().expect("acks lock");
            for (member, _) in chosen {
                let heard = PodAck {
                    time: now,
                    path: ack.path.clone(),
                    step: ack.step,
                };
                acks.insert(delete_key(&member.pod), heard);
            }
        }
        let waiting_for = asked
            .iter()
            .filter(|(m, t)| self.adopted.ack_since(&m.pod, *t).is_none())
            .map(|(m, _)| m.task.clone())
            .collect();
        self.caches.changed.notify_one();
        Ok(Acknowledged {
            after_seconds: (seconds(now) - seconds(requested)).max(0.0),
            waiting_for,
        })
    }

    /// How the last checkpoint of each adopted job ended, since this process leads.
    pub(in crate::cluster) fn adopted_checkpoint_outcomes(
        &self,
    ) -> impl Iterator<Item = (String, LastCheckpoint)> + '_ {
        self.adopted
            .last
            .iter()
            .map(|(id, last)| (id.clone(), last.clone()))
    }
}
