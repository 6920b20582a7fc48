//! Restarts of a job's pods, carried out in stages so that no grace period blocks the
//! control loop: a migration, a rescale, a preemption, and a gang recovery (a member
//! failed, crash-looped, was evicted or deleted, or the scheduler refused it, as a
//! JobSet restarts every job of a set). Each is recorded in the status first, on the
//! status the decision saw only (a controller restarted half-way finishes it and never
//! starts a second), then the pods are asked to checkpoint (the annotation, or the stop
//! signal of a graceful delete); [`Actor::advance_restart`], called whenever the caches
//! change, deletes annotated pods once their grace period has passed and, once the old
//! pods are gone, makes and releases the replacements or queues the job again after its
//! back-off.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::{
    Actor, FAILED_CONDITION, PODS_CREATED_CONDITION, PODS_SCHEDULED_CONDITION, checkpoint_of,
    describe, rfc3339, seconds, set_condition, status_of, stop_grace,
};
use crate::crd::{
    Checkpoint, CheckpointMethod, MoveKindRecord, PendingRestart, Phase, Refusal, RestartAction,
    TaskTarget, TrainingJob, TrainingJobStatus,
};
use crate::pods::{delete_key, placed_node, task_of, terminated};
use crate::{CHECKPOINT_ANNOTATION, Error, FIELD_MANAGER, Result, retry, template};

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

/// Why a gang restarts whole and goes back to the queue ([`Actor::restart_gang`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GangLoss {
    /// Members were lost: each described, with the failures it counts against the
    /// job's `backoffLimit` (none for a disruption: an eviction, a deletion, a pod the
    /// kubelet refused).
    Members(Vec<(String, u32)>),
    /// The scheduler refused members of the placement: (pod, node, reason, message).
    Refused(Vec<(String, String, String, String)>),
}

/// A restart of every pod of a job, as [`Actor::restart_whole_job`] records it.
struct WholeRestart<'a> {
    action: RestartAction,
    /// The move it is in the job's history.
    kind: MoveKindRecord,
    purpose: &'a str,
    /// Nodes the moved tasks were on, and go to (the history's entry).
    from_to: (Vec<String>, Vec<String>),
    /// Where the replacements go (none for a preemption).
    targets: Vec<TaskTarget>,
    checkpoint: &'a Checkpoint,
    reason: &'a str,
    now: Timestamp,
}

impl Actor {
    /// Starts `migration` of `job` at `now`: records the move and the restart in the
    /// status, then asks the pods to checkpoint. Returns at once;
    /// [`Actor::advance_restart`] carries the move on. `job_pods` are the job's current
    /// pods. A job that is not elastic ([`elastic`]) restarts every task with the ones
    /// that move. A failure is reported on the job ([`Actor::action_failed`]).
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
        let moves = |p: &&Pod| task.is_none_or(|t| task_of(p) == Some(t));
        let named: Vec<&Pod> = job_pods.iter().filter(moves).collect();
        let from: Vec<String> = named
            .iter()
            .filter_map(|p| placed_node(p).map(str::to_string))
            .collect();
        let to = vec![node.to_string(); from.len()];
        if named.iter().all(|p| placed_node(p) == Some(node)) {
            self.update_status(job, |status| {
                status.record_move(
                    MoveKindRecord::Migrated,
                    purpose,
                    from.clone(),
                    to.clone(),
                    seconds(now),
                );
            })
            .await?;
            let note = format!("already on {node}, marked only: {reason}");
            self.event(job, EventType::Normal, "Marked", "Migrate", &note)
                .await;
            return Ok(());
        }
        let checkpoint = checkpoint_of(job)?;
        // An elastic job's other processes rejoin the moved ones; a gang's cannot lose
        // a member, so every task restarts, the others where they ran.
        let victims: Vec<&Pod> = if elastic(job) {
            named
                .iter()
                .copied()
                .filter(|p| placed_node(p) != Some(node))
                .collect()
        } else {
            job_pods.iter().collect()
        };
        let targets = victims
            .iter()
            .filter_map(|p| {
                let target = if moves(p) {
                    node
                } else {
                    placed_node(p)?
                };
                Some(TaskTarget {
                    task: task_of(p)?.to_string(),
                    node: target.to_string(),
                })
            })
            .collect();
        let restart = WholeRestart {
            action: RestartAction::Migrate,
            kind: MoveKindRecord::Migrated,
            purpose,
            from_to: (from, to),
            targets,
            checkpoint,
            reason,
            now,
        };
        self.restart_whole_job(job, job_pods, &victims, restart, |status| {
            status.migrations += 1
        })
        .await
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
        let targets: Vec<TaskTarget> = template::tasks(&scaled)
            .into_iter()
            .filter_map(|t| {
                let node = job_pods
                    .iter()
                    .find(|p| task_of(p) == Some(t.name.as_str()))
                    .and_then(placed_node)
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
        let from_to = (
            victims
                .iter()
                .filter_map(|p| placed_node(p).map(str::to_string))
                .collect(),
            targets.iter().map(|t| t.node.clone()).collect(),
        );
        let restart = WholeRestart {
            action: RestartAction::Scale,
            kind: MoveKindRecord::Rescaled,
            purpose: "",
            from_to,
            targets,
            checkpoint,
            reason,
            now,
        };
        self.restart_whole_job(job, job_pods, &victims, restart, |status| {
            status.rescales += 1;
            status.replicas = Some(replicas);
        })
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
        let started = async {
            let checkpoint = checkpoint_of(job)?;
            let victims: Vec<&Pod> = job_pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let from = victims
                .iter()
                .filter_map(|p| placed_node(p).map(str::to_string))
                .collect();
            let restart = WholeRestart {
                action: RestartAction::Preempt,
                kind: MoveKindRecord::Preempted,
                purpose: "",
                from_to: (from, Vec::new()),
                targets: Vec::new(),
                checkpoint,
                reason,
                now,
            };
            self.restart_whole_job(job, job_pods, &victims, restart, |_| {})
                .await
        }
        .await;
        self.reported(job, "Preempt", started).await
    }

    /// Records `restart` of `victims` (some or all of `job_pods`, the job's pods) with
    /// its move, on the status the decision saw only, then asks the pods to checkpoint.
    /// `change` adds what is particular to the restart. Refused as stale when the status
    /// names a pod the caller did not see: a placement newer than the cache, whose pod
    /// the restart would leave running beside its replacement.
    async fn restart_whole_job(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        victims: &[&Pod],
        restart: WholeRestart<'_>,
        change: impl Fn(&mut TrainingJobStatus),
    ) -> Result<()> {
        let (kind, now, checkpoint) = (restart.kind, restart.now, restart.checkpoint);
        let (from, to) = restart.from_to;
        let pending = pending(
            restart.action,
            victims,
            restart.targets,
            checkpoint,
            restart.reason,
            now,
        );
        let generation = status_of(job).generation;
        let last_seen = status_of(job).moves.last().map(|m| m.time);
        let known: HashSet<String> = job_pods.iter().map(|p| p.name_any()).collect();
        self.update_status_if(
            job,
            |fresh| {
                unchanged_since(fresh, generation, &known)?;
                if fresh.moves.last().map(|m| m.time) != last_seen {
                    return Err("it moved since the decision was made".into());
                }
                Ok(())
            },
            |status| {
                status.record_move(kind, restart.purpose, from.clone(), to.clone(), seconds(now));
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
    /// already did, under the call guard like every other write.
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
            self.guard.call(api.patch(&name, &params, &patch))
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

    /// Sends `job`'s whole gang back to the queue at `now` because of `loss`: records
    /// it (failures against `backoffLimit`, disruptions, or the scheduler's refusal) and
    /// a `Recover` restart stopping every pod of `job_pods`, then deletes them (with the
    /// checkpoint's grace period when the process saves on the stop signal);
    /// [`Actor::advance_restart`] queues the job again once they are gone and the
    /// back-off has passed. Past `backoffLimit` the job fails instead. `gone` names pods
    /// the status may name that are no longer there. Nothing is written when the job's
    /// status moved on since it was read.
    pub(crate) async fn restart_gang(
        &self,
        job: &TrainingJob,
        job_pods: &[Pod],
        gone: &[String],
        loss: GangLoss,
        now: Timestamp,
    ) -> Result<()> {
        let status = status_of(job);
        let stopping: Vec<&Pod> = job_pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let verdict = Verdict::of(job, &status, &loss, now);
        let restart = PendingRestart {
            action: RestartAction::Recover,
            stopping: stopping.iter().map(|p| p.name_any()).collect(),
            targets: Vec::new(),
            requested_at: rfc3339(now),
            delete_after: None,
            retry_after: verdict.retry_after.map(rfc3339),
            reason: verdict.what.clone(),
        };
        let generation = status.generation;
        let known: HashSet<String> = job_pods
            .iter()
            .map(|p| p.name_any())
            .chain(gone.iter().cloned())
            .collect();
        self.update_status_if(
            job,
            |fresh| unchanged_since(fresh, generation, &known),
            |s| {
                s.failures += verdict.counted;
                s.disruptions += verdict.disrupted;
                if let Some(refusal) = &verdict.refusal {
                    s.refusal = Some(refusal.clone());
                    set_condition(
                        s,
                        PODS_SCHEDULED_CONDITION,
                        "False",
                        &refusal.reason,
                        &verdict.message,
                    );
                }
                if verdict.give_up {
                    s.phase = Some(Phase::Failed);
                    set_condition(
                        s,
                        FAILED_CONDITION,
                        "True",
                        "BackoffLimitExceeded",
                        &verdict.message,
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
        let grace = stop_grace(job);
        for pod in stopping {
            self.delete_once(job, pod, grace).await?;
        }
        self.event(job, EventType::Warning, verdict.reason, "Recover", &verdict.message)
            .await;
        Ok(())
    }

    /// Carries `job`'s restart on, if it has one, at `now`: deletes the annotated pods
    /// once the grace period has passed, and once none of the old pods is left in
    /// `job_pods` (the pods that still hold up the restart: the caller leaves out those
    /// confirmed gone), makes and releases the replacements and records them, or queues
    /// the job again. Never waits: a call that finds nothing to do returns
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

    /// Deletes those of a restart's `old` pods that are due at `now`: a finished one at
    /// once, one asked by signal at once (its grace period is the delete's), one asked
    /// by the annotation once its whole grace period from when it was asked has passed.
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
        for pod in old
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
        {
            let due = match (delete_after, &job.spec.checkpoint) {
                _ if terminated(pod) => true,
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
}

/// What a gang's loss comes to ([`Actor::restart_gang`]).
struct Verdict {
    /// Failures counted against `backoffLimit`.
    counted: u32,
    /// Members lost to disruptions (not counted).
    disrupted: u32,
    /// The job fails for good.
    give_up: bool,
    /// Not queued again before this.
    retry_after: Option<Timestamp>,
    /// The refusal recorded, for a refused placement.
    refusal: Option<Refusal>,
    /// What happened, per member.
    what: String,
    /// The Event's and the conditions' message.
    message: String,
    /// The Event's reason.
    reason: &'static str,
}

impl Verdict {
    fn of(job: &TrainingJob, status: &TrainingJobStatus, loss: &GangLoss, now: Timestamp) -> Self {
        match loss {
            GangLoss::Members(members) => {
                let counted: u32 = members.iter().map(|(_, c)| c).sum();
                let disrupted = members.iter().filter(|(_, c)| *c == 0).count() as u32;
                let failures = status.failures + counted;
                let give_up = failures > job.spec.backoff_limit;
                let what = members
                    .iter()
                    .map(|(w, _)| w.as_str())
                    .collect::<Vec<_>>()
                    .join("; ");
                let (message, reason) = if give_up {
                    (
                        format!(
                            "{what}: {failures} failure(s), more than the backoffLimit of {}",
                            job.spec.backoff_limit
                        ),
                        "BackoffLimitExceeded",
                    )
                } else if counted == 0 {
                    (
                        format!("{what}: a disruption, not counted; the gang is queued again"),
                        "Disrupted",
                    )
                } else {
                    (
                        format!(
                            "{what}: failure {failures} of at most {}; the gang is queued again after a back-off",
                            job.spec.backoff_limit
                        ),
                        "PodFailed",
                    )
                };
                Verdict {
                    counted,
                    disrupted,
                    give_up,
                    retry_after: (counted > 0).then(|| now + failure_backoff(failures)),
                    refusal: None,
                    what,
                    message,
                    reason,
                }
            }
            GangLoss::Refused(refused) => {
                let count = status.refusal.as_ref().map_or(0, |r| r.count) + 1;
                let backoff = failure_backoff(count);
                let what = refused
                    .iter()
                    .map(|(pod, node, reason, message)| {
                        format!("pod {pod} on {node}: {reason} ({message})")
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                let mut nodes: Vec<String> =
                    refused.iter().map(|(_, node, _, _)| node.clone()).collect();
                nodes.sort();
                nodes.dedup();
                let refusal = Refusal {
                    nodes,
                    reason: refused
                        .first()
                        .map(|(_, _, reason, _)| reason.clone())
                        .unwrap_or_default(),
                    message: what.clone(),
                    count,
                    time: rfc3339(now),
                };
                Verdict {
                    counted: 0,
                    disrupted: 0,
                    give_up: false,
                    retry_after: Some(now + backoff),
                    refusal: Some(refusal),
                    message: format!(
                        "the scheduler refused {what}; the gang is taken back and offered to the policy again after {}s (refusal {count} in a row)",
                        backoff.as_secs()
                    ),
                    what: format!("the scheduler refused {what}"),
                    reason: "PlacementRefused",
                }
            }
        }
    }
}

/// Whether `job` is elastic: its scalable role may run between fewer and more replicas
/// (`minReplicas` below `maxReplicas`), so its processes rejoin members that move. Any
/// other job is a gang whose processes cannot lose a member.
pub(crate) fn elastic(job: &TrainingJob) -> bool {
    job.spec.scalable_role().is_some_and(|r| {
        r.min_replicas.unwrap_or(r.replicas) < r.max_replicas.unwrap_or(r.replicas)
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

/// Refuses a status that moved on since a decision read `generation`: another restart
/// under way, a new generation, a finished job, or a placement of a pod the caller does
/// not know (not in `known`: newer than its cache).
fn unchanged_since(
    fresh: &TrainingJobStatus,
    generation: u32,
    known: &HashSet<String>,
) -> Result<(), String> {
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
    if let Some(unseen) = fresh.placements.iter().find(|p| !known.contains(&p.pod)) {
        return Err(format!(
            "pod {} of task {} is not in the cache yet; a restart now would leave it running",
            unseen.pod, unseen.task
        ));
    }
    Ok(())
}

/// The back-off before a job whose pods failed `failures` times (or whose placement was
/// refused that many times in a row) is queued again: 10 s, doubling with each, at most
/// 6 min (the Job controller's).
pub(crate) fn failure_backoff(failures: u32) -> SignedDuration {
    let seconds = 10u64.saturating_mul(1 << failures.saturating_sub(1).min(10));
    SignedDuration::from_secs(seconds.min(360) as i64)
}
