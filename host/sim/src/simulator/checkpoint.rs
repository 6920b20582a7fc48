//! A stopped job's checkpoint: a migration, a rescale or a preemption asks the job to
//! save one; it is complete after the job's checkpoint cost, or (a job acknowledged by
//! the API) when every asked task says so over `POST /v1/jobs/{id}/checkpoint`. When the
//! job's grace period ends first, the checkpoint is timed out: the job is stopped
//! anyway, and loses the work since its last complete checkpoint (its progress at its
//! last acknowledged stop, or its start). Either way the job then carries the label
//! [`CHECKPOINT_KEPT_LABEL`] and its [`LastCheckpoint`].
//!
//! It decides nothing about which job stops (`actions` carries out the policy's
//! actions and calls here); it owns only the checkpoint's course.

use std::sync::Arc;

use super::Simulator;
use super::state::Asked;
use switchyard_control::{
    AckRefused, Acknowledged, CHECKPOINT_KEPT_LABEL, CheckpointAck, CheckpointOutcome,
    CheckpointRequest, LastCheckpoint,
};
use switchyard_core::{JobPhase, TaskPhase, Trigger};

impl Simulator {
    /// Asks `job` to save a checkpoint before it stops: for a preemption
    /// (`restart_cost` none) it holds its nodes until the checkpoint is over, then
    /// releases them; for a migration or a rescale its tasks restart for
    /// `restart_cost`.
    pub(super) fn ask_checkpoint(&mut self, job: usize, restart_cost: Option<f64>) {
        let spec = &self.jobs[job].spec.checkpoint;
        let cost = spec.cost.unwrap_or(self.config.checkpoint_cost);
        let grace = spec.grace.or(self.config.checkpoint_grace);
        let by_api = spec.acknowledged_by_api;
        let now = self.now;
        let awaiting = self.jobs[job]
            .asked
            .as_ref()
            .is_some_and(|a| a.decided.is_none());
        if awaiting {
            // Stopped again while its tasks save: this stop waits for the same
            // checkpoint, and its restart follows it.
            let asked = self.jobs[job].asked.as_mut().expect("awaiting");
            asked.restart_after = asked.restart_after.max(restart_cost.unwrap_or(0.0));
            return;
        }
        match grace.filter(|_| by_api) {
            Some(grace) => {
                let j = &self.jobs[job];
                let waiting = j
                    .tasks
                    .iter()
                    .filter(|t| t.node.is_some())
                    .map(|t| t.name.clone())
                    .collect();
                self.jobs[job].asked = Some(Asked {
                    at: now,
                    deadline: Some(now + grace),
                    by_api: true,
                    decided: None,
                    waiting,
                    acknowledged: Vec::new(),
                    path: None,
                    restart_after: restart_cost.unwrap_or(0.0),
                });
                self.restart(job, grace);
            }
            None => {
                let decided = match grace {
                    Some(grace) if cost > grace => (CheckpointOutcome::TimedOut, grace),
                    _ => (CheckpointOutcome::Acknowledged, cost),
                };
                self.jobs[job].asked = Some(Asked {
                    at: now,
                    deadline: grace.map(|g| now + g),
                    by_api: false,
                    decided: Some(decided),
                    waiting: Vec::new(),
                    acknowledged: Vec::new(),
                    path: None,
                    restart_after: 0.0,
                });
                self.restart(job, restart_cost.unwrap_or(decided.1));
            }
        }
    }

    /// The checkpoint of `job` is over (its restart came due): it keeps its progress or
    /// loses what it did since its last complete checkpoint, is labelled so, and either
    /// releases its nodes (a preemption: the returned trigger) or restarts.
    pub(super) fn end_checkpoint(&mut self, job: usize) -> Option<Trigger> {
        self.settle(job);
        let now = self.now;
        let j = &mut self.jobs[job];
        let asked = j.asked.take()?;
        let (outcome, seconds) = asked
            .decided
            .unwrap_or((CheckpointOutcome::TimedOut, now - asked.at));
        match outcome {
            CheckpointOutcome::Acknowledged => j.kept_work = j.work_done,
            CheckpointOutcome::TimedOut => {
                let lost = (j.work_done - j.kept_work).max(0.0);
                if lost > 0.0 {
                    j.work_lost += lost;
                    j.work_done = j.kept_work;
                    // Evaluations resume from the restored step.
                    let every = j.spec.eval_every;
                    j.next_eval = ((j.kept_work / every).floor() + 1.0) * every;
                }
            }
        }
        j.last_checkpoint = Some(LastCheckpoint {
            outcome,
            seconds,
            path: asked.path,
            at: now,
        });
        Arc::make_mut(&mut j.labels).insert(
            CHECKPOINT_KEPT_LABEL.to_string(),
            outcome.kept_label().to_string(),
        );
        if j.checkpointing {
            self.release_preempted(job);
            return Some(Trigger::JobPreempted(self.jobs[job].spec.id.clone()));
        }
        j.restart_until = None;
        if asked.restart_after > 0.0 {
            self.restart(job, asked.restart_after);
        } else {
            j.phase = JobPhase::Running;
            for t in j.tasks.iter_mut().filter(|t| t.node.is_some()) {
                t.phase = TaskPhase::Running;
            }
            self.touch_job(job);
        }
        None
    }

    /// The checkpoint asked of the job `id` now (none for a job not in the cluster).
    pub fn checkpoint_request(&self, id: &str) -> CheckpointRequest {
        let asked = self
            .job_index
            .get(id)
            .and_then(|&j| self.jobs[j].asked.as_ref())
            // Acknowledged by every task: over, though the job stops at the next event.
            .filter(|a| !(a.by_api && a.decided.is_some()));
        match asked {
            Some(asked) => CheckpointRequest {
                requested: true,
                requested_at: Some(asked.at),
                deadline: asked.deadline,
                acknowledged: asked.acknowledged.clone(),
            },
            None => CheckpointRequest::default(),
        }
    }

    /// Takes a task's acknowledgement of the checkpoint asked of the job `id` (one that
    /// waits for the API); once every asked task has acknowledged, the job stops at
    /// once, its progress kept.
    pub fn acknowledge_checkpoint(
        &mut self,
        id: &str,
        ack: CheckpointAck,
    ) -> Result<Acknowledged, AckRefused> {
        ack.check_path()?;
        let not_requested = || AckRefused::not_requested(id);
        let job = *self.job_index.get(id).ok_or_else(not_requested)?;
        let now = self.now;
        let asked = self.jobs[job].asked.as_mut().ok_or_else(not_requested)?;
        if !asked.by_api {
            return Err(AckRefused::NotAwaited {
                job: id.to_string(),
            });
        }
        if asked.decided.is_some() {
            return Err(not_requested());
        }
        match ack.task {
            Some(task) => match asked.waiting.iter().position(|t| *t == task) {
                Some(at) => {
                    let task = asked.waiting.remove(at);
                    asked.acknowledged.push(task);
                }
                // A task that acknowledges twice is told the same as the first time.
                None if asked.acknowledged.contains(&task) => {}
                None => {
                    let asked_tasks = asked.waiting.iter().chain(&asked.acknowledged);
                    return Err(AckRefused::unknown_task(
                        id,
                        task,
                        asked_tasks.map(String::as_str),
                    ));
                }
            },
            None => asked.acknowledged.append(&mut asked.waiting),
        }
        asked.path = Some(ack.path);
        let after_seconds = now - asked.at;
        let waiting_for = asked.waiting.clone();
        if waiting_for.is_empty() {
            asked.decided = Some((CheckpointOutcome::Acknowledged, after_seconds));
            // Over now: the restart comes due at once, and the next advance ends it.
            self.jobs[job].restart_until = Some(now);
            self.touch_job(job);
            self.recompute();
        }
        Ok(Acknowledged {
            after_seconds,
            waiting_for,
        })
    }

    /// How the last checkpoint of each active job that had one ended.
    pub fn last_checkpoints(&self) -> impl Iterator<Item = (&str, &LastCheckpoint)> + '_ {
        self.active.iter().filter_map(|&j| {
            let job = &self.jobs[j];
            Some((job.spec.id.as_str(), job.last_checkpoint.as_ref()?))
        })
    }

    /// Work the job `id` lost to timed-out checkpoints so far.
    pub fn work_lost(&self, id: &str) -> Option<f64> {
        Some(self.jobs[*self.job_index.get(id)?].work_lost)
    }
}
