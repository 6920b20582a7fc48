//! [`Cluster`] and [`LiveCluster`] over [`KubeCluster`]: the cluster's clock, the wait
//! for a round, the snapshot, and each accepted action handed to the actor (no action
//! waits out a grace period: a restart only starts here). It carries decisions out; it
//! must not make one.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use switchyard_control::{
    AckRefused, Acknowledged, ActionFailure, ActionOutcome, Advance, CheckpointAck,
    CheckpointRequest, Cluster, LastCheckpoint, LiveCluster, LossAck,
};
use switchyard_core::{Action, JobLabel, Operation, Snapshot, Trigger};

use super::controller::KubeCluster;
use crate::Error;
use crate::act::Migration;
use crate::adopt::parse_adopted_id;
use crate::pods::task_of;

impl Cluster for KubeCluster {
    fn now(&self) -> f64 {
        (self.clock)()
    }

    fn advance(&mut self, until: Option<f64>) -> Advance {
        self.wait(until, &AtomicBool::new(false), &mut |_| {})
    }

    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        self.caches.snapshot((self.clock)(), triggers)
    }

    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) -> Vec<ActionOutcome> {
        let now = self.now_timestamp();
        let mut outcomes = Vec::with_capacity(accepted.len());
        // An adopted gang is released whole: a policy that places it task by task in
        // one decision has its placements carried out together, at the first of them.
        let mut adopted_places: HashMap<&str, Vec<(String, String)>> = HashMap::new();
        for action in accepted {
            if let Operation::Place { job, assignments } = &action.op
                && parse_adopted_id(job).is_some()
            {
                adopted_places
                    .entry(job.as_str())
                    .or_default()
                    .extend(assignments.iter().map(|a| (a.task.clone(), a.node.clone())));
            }
        }
        let mut adopted_placed: HashMap<&str, Result<(), ActionFailure>> = HashMap::new();
        for action in accepted {
            // Leadership can be lost between rounds; a follower must not act.
            if !self.may_act() {
                tracing::warn!("lost leadership; the rest of the decision is not carried out");
                let error = Error::NotLeading {
                    action: format!("{} of job {}", action.op.name(), action.op.job()),
                };
                outcomes.push(Err(error.to_failure()));
                continue;
            }
            let id = action.op.job();
            if parse_adopted_id(id).is_some() {
                let failed = |error: Error| {
                    tracing::warn!(%error, label = error.metric_label(), job = id, "action failed");
                    error.to_failure()
                };
                let outcome = match &action.op {
                    Operation::Place { .. } => adopted_placed
                        .entry(id)
                        .or_insert_with(|| {
                            let all = adopted_places
                                .get(id)
                                .map(Vec::as_slice)
                                .unwrap_or_default();
                            self.place_adopted(id, all, &action.reason, now)
                                .map_err(failed)
                        })
                        .clone(),
                    _ => self.apply_adopted(action, now).map_err(failed),
                };
                outcomes.push(outcome);
                continue;
            }
            let Some((job, pods)) = self.caches.job_and_pods(action.op.job()) else {
                tracing::warn!(job = action.op.job(), "job vanished before its action ran");
                let error = Error::NotFound(format!(
                    "TrainingJob {} is no longer in the cluster",
                    action.op.job()
                ));
                outcomes.push(Err(error.to_failure()));
                continue;
            };
            let actor = &self.actor;
            let reason = action.reason.as_str();
            // Each action returns as soon as its API calls are made: a migration or a
            // rescale only starts here, so no grace period holds up the other actions.
            let outcome = self.handle.block_on(async {
                match &action.op {
                    Operation::Place { assignments, .. } => {
                        let pairs: Vec<(String, String)> = assignments
                            .iter()
                            .map(|a| (a.task.clone(), a.node.clone()))
                            .collect();
                        let placed = actor.place(&job, &pairs, reason, now).await;
                        if placed.is_ok() {
                            self.assume(&job, &pairs);
                        }
                        placed
                    }
                    Operation::Migrate {
                        task,
                        node,
                        purpose,
                        ..
                    } => {
                        let migration = Migration {
                            task: task.as_deref(),
                            node,
                            purpose,
                            reason,
                        };
                        actor.migrate(&job, &pods, migration, now).await
                    }
                    Operation::SetCpuWeight { task, weight, .. } => {
                        match pods.iter().find(|p| task_of(p) == Some(task.as_str())) {
                            Some(pod) => actor.set_cpu_weight(&job, pod, *weight, reason).await,
                            None => {
                                let error =
                                    crate::Error::NotFound(format!("task {task} has no pod"));
                                Err(actor.action_failed(&job, "SetCpuWeight", error).await)
                            }
                        }
                    }
                    Operation::Scale {
                        replicas, nodes, ..
                    } => {
                        actor
                            .scale(&job, &pods, *replicas, nodes, reason, now)
                            .await
                    }
                    Operation::Wait { .. } => Ok(()),
                    Operation::Preempt { .. } => actor.preempt(&job, &pods, reason, now).await,
                }
            });
            match outcome {
                Ok(()) => outcomes.push(Ok(())),
                Err(error) => {
                    tracing::warn!(%error, label = error.metric_label(), job = action.op.job(), "action failed");
                    outcomes.push(Err(error.to_failure()));
                }
            }
        }
        let mut by_job: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
        for label in labels {
            by_job
                .entry(&label.job)
                .or_default()
                .insert(label.key.clone(), label.value.clone());
        }
        for (id, labels) in by_job {
            if let Some(job) = self.caches.training_job(id)
                && let Err(error) = self
                    .handle
                    .block_on(self.actor.set_policy_labels(&job, labels))
            {
                tracing::warn!(%error, job = id, "writing policy labels");
            }
        }
        outcomes
    }

    fn finished_jobs(&self) -> usize {
        self.finished
    }
}

impl LiveCluster for KubeCluster {
    fn advance_live(
        &mut self,
        until: Option<f64>,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Self),
    ) -> Advance {
        self.wait(until, stop, between)
    }

    fn push_loss(&mut self, job: &str, step: u64, value: f64) -> LossAck {
        // An adopted job's pushed samples join the series its log's go to, with the same
        // bounds; a TrainingJob takes them only when its spec says so.
        let what = match parse_adopted_id(job) {
            Some(_) => "adopted job",
            None => {
                let Some(training_job) = self.caches.training_job(job) else {
                    return LossAck::Ignored {
                        note: format!("TrainingJob {job} is no longer in the cluster"),
                    };
                };
                if !training_job.spec.progress.push {
                    return LossAck::Ignored {
                        note: format!(
                            "TrainingJob {job} does not take pushed samples; set `spec.progress.push: true`"
                        ),
                    };
                }
                "TrainingJob"
            }
        };
        if self
            .caches
            .record_sample(job, (self.clock)(), Some(step), value)
        {
            // Followers do not write statuses; the leader writes the series on its next
            // look at the caches.
            LossAck::Accepted
        } else {
            LossAck::Ignored {
                note: format!("step {step} is already in {what} {job}'s loss series"),
            }
        }
    }

    fn checkpoint_request(&mut self, job: &str) -> CheckpointRequest {
        self.checkpoint_asked(job)
    }

    fn acknowledge_checkpoint(
        &mut self,
        job: &str,
        ack: CheckpointAck,
    ) -> Result<Acknowledged, AckRefused> {
        self.checkpoint_acknowledged(job, ack)
    }

    fn last_checkpoints(&mut self) -> BTreeMap<String, LastCheckpoint> {
        self.checkpoint_outcomes()
    }

    fn synced(&self) -> bool {
        self.caches.synced()
    }

    fn summary_every(&self) -> Duration {
        Duration::from_secs(1)
    }
}
