//! Starting a restart of a job's pods: a migration, a rescale, a preemption. Each is
//! recorded in the status first, on the status the decision saw only (a controller
//! restarted half-way finishes it and never starts a second), then the pods are asked
//! to checkpoint (the annotation, or the stop signal of a graceful delete);
//! [`super::advance`] carries it on from there.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::actor::{Actor, checkpoint_of, rfc3339, seconds, status_of};
use crate::crd::{
    Checkpoint, CheckpointMethod, MoveKindRecord, PendingRestart, Phase, RestartAction, TaskTarget,
    TrainingJob, TrainingJobStatus,
};
use crate::pods::{delete_key, placed_node, task_of};
use crate::{CHECKPOINT_ANNOTATION, Error, FIELD_MANAGER, Result, retry, template};

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
    /// pods. A job that is not elastic (its scalable role cannot run with fewer or more
    /// replicas) restarts every task with the ones that move. A failure is reported on
    /// the job ([`Actor::action_failed`]).
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
                let target = if moves(p) { node } else { placed_node(p)? };
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
                status.record_move(
                    kind,
                    restart.purpose,
                    from.clone(),
                    to.clone(),
                    seconds(now),
                );
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
    pub(super) async fn annotate_once(
        &self,
        job: &TrainingJob,
        pod: &Pod,
        now: Timestamp,
    ) -> Result<()> {
        self.annotate_pod_once(&self.pods(job), pod, now).await
    }

    /// [`Actor::annotate_once`] on a pod of `api` (a TrainingJob's, or an adopted
    /// one's).
    pub(super) async fn annotate_pod_once(
        &self,
        api: &Api<Pod>,
        pod: &Pod,
        now: Timestamp,
    ) -> Result<()> {
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
    pub(crate) fn asked_at(&self, pod: &Pod) -> Option<Timestamp> {
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
pub(super) fn unchanged_since(
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
