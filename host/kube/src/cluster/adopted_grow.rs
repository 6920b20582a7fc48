//! The nodes a grow of an elastic adopted job ([`crate::adopt`]) was decided for. A
//! `Scale` that grows an elastic PyTorchJob names one node per new worker; the
//! operator makes those workers later, gated, and a policy that grows running jobs
//! and places only waiting ones (DRAGON) would never place them. So the grow is
//! remembered here, in memory, per job, with its owner's UID and target count, and
//! once the operator has made every new worker the leader's pass releases them to
//! those nodes, all or none, through the same release an explicit placement uses,
//! after the host's pre-release checks on the cluster as it is then. A grow gone
//! stale (another scale, the owner replaced, older than [`GROW_KEPT_FOR`]), whose
//! pods a placement released already, or whose nodes no longer fit, is dropped with a
//! log line, and the pods wait for a `Place` as any held pod does. It carries out a
//! decision already validated; it must not make one.

use std::collections::HashMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use switchyard_core::{Action, Assignment, Decision, Operation, check_decision};

use super::controller::KubeCluster;
use crate::adopt::AdoptedJob;
use crate::pods::held_by_placement_gate;

/// How long a grow's nodes are kept for the operator to make its new workers: long
/// enough for an operator to react and pull nothing, short enough that the nodes the
/// policy chose still say something about the cluster.
pub(crate) const GROW_KEPT_FOR: SignedDuration = SignedDuration::from_secs(300);

/// How many grows are kept at once (one per job); past it the oldest goes.
pub(crate) const MAX_GROWS_KEPT: usize = 1024;

/// A grow of one elastic adopted job, waiting for the operator's new pods.
#[derive(Clone, Debug)]
pub(crate) struct Grow {
    /// The UID of the owner scaled: a new owner of the same name is another job.
    owner_uid: String,
    /// The replicas the scale asked for.
    to: u32,
    /// Each new replica's task and the node decided for it.
    tasks: Vec<(String, String)>,
    /// When the scale was asked.
    at: Timestamp,
    /// The policy's reason for the scale, given again with the release.
    reason: String,
}

/// The grows remembered, by adopted job id.
#[derive(Debug, Default)]
pub(crate) struct Grows {
    by_job: HashMap<String, Grow>,
}

impl Grows {
    /// Remembers that `job` was scaled from `from` to `to` replicas of `role`, the new
    /// ones to `nodes` in order (a grow only: any scale forgets the job's earlier grow).
    pub(crate) fn scaled(
        &mut self,
        job: &AdoptedJob,
        role: &str,
        (from, to): (u32, u32),
        nodes: &[String],
        reason: &str,
        at: Timestamp,
    ) {
        self.by_job.remove(&job.id);
        let added = to.saturating_sub(from);
        if added == 0 {
            return;
        }
        if nodes.len() != added as usize {
            tracing::info!(
                job = job.id,
                added,
                nodes = nodes.len(),
                "a grow names no node for each new replica; its pods wait for a placement"
            );
            return;
        }
        if self.by_job.len() >= MAX_GROWS_KEPT
            && let Some(oldest) = self
                .by_job
                .iter()
                .min_by_key(|(_, g)| g.at)
                .map(|(id, _)| id.clone())
        {
            tracing::info!(job = oldest, "too many grows kept; the oldest is dropped");
            self.by_job.remove(&oldest);
        }
        let tasks = (from..to)
            .zip(nodes)
            .map(|(index, node)| (format!("{role}-{index}"), node.clone()))
            .collect();
        self.by_job.insert(
            job.id.clone(),
            Grow {
                owner_uid: job.uid.clone(),
                to,
                tasks,
                at,
                reason: reason.to_string(),
            },
        );
    }
}

/// What to do with a remembered grow, seen against its job as the caches show it now.
#[derive(Debug, PartialEq)]
enum Next {
    /// The operator has not made every new worker yet.
    Wait,
    /// Every new worker is there, held: release them.
    Release,
    /// Forget it, for this reason.
    Drop(String),
}

/// What `grow` asks now, of `job` (`None`: the job is gone) at `now`.
fn next(grow: &Grow, job: Option<&AdoptedJob>, now: Timestamp) -> Next {
    let Some(job) = job else {
        return Next::Drop("the job is no longer in the cluster".into());
    };
    if job.uid != grow.owner_uid {
        return Next::Drop(format!(
            "its owner was replaced (UID {} instead of {})",
            job.uid, grow.owner_uid
        ));
    }
    match &job.shape.scaling {
        Ok(elastic) if elastic.replicas == grow.to => {}
        Ok(elastic) => {
            return Next::Drop(format!(
                "its owner asks for {} replicas now, not the {} of the grow",
                elastic.replicas, grow.to
            ));
        }
        Err(why) => return Next::Drop(format!("it is no longer elastic: {why}")),
    }
    if now > grow.at + GROW_KEPT_FOR {
        return Next::Drop(format!(
            "its new workers did not all arrive within {}s of the scale",
            GROW_KEPT_FOR.as_secs()
        ));
    }
    let mut held = 0;
    for (task, _) in &grow.tasks {
        match job.members.iter().find(|m| &m.task == task) {
            Some(m) if held_by_placement_gate(&m.pod) => held += 1,
            Some(m) => {
                return Next::Drop(format!(
                    "its pod {} was released already (a placement came first)",
                    m.pod.metadata.name.as_deref().unwrap_or(task)
                ));
            }
            None => {}
        }
    }
    match held == grow.tasks.len() && job.complete() {
        true => Next::Release,
        false => Next::Wait,
    }
}

impl KubeCluster {
    /// Remembers the nodes of a grow of adopted job `job` ([`Grows::scaled`]).
    pub(super) fn remember_grow(
        &self,
        job: &AdoptedJob,
        role: &str,
        from_to: (u32, u32),
        nodes: &[String],
        reason: &str,
    ) {
        let now = self.now_timestamp();
        self.adopted_grows
            .lock()
            .expect("grows lock")
            .scaled(job, role, from_to, nodes, reason, now);
    }

    /// Releases the new workers of each remembered grow whose operator has made them
    /// all, to the nodes decided, when the host's checks on the cluster as it is now
    /// accept that placement; drops the grows gone stale. A job released here is not
    /// news for the next round: its pods are placed, not waiting.
    pub(super) fn release_grown(&mut self, jobs: &[AdoptedJob]) {
        if !self.may_act() {
            return;
        }
        let now = self.now_timestamp();
        let mut ready: Vec<(String, Grow)> = Vec::new();
        {
            let mut grows = self.adopted_grows.lock().expect("grows lock");
            grows.by_job.retain(|id, grow| {
                match next(grow, jobs.iter().find(|j| &j.id == id), now) {
                    Next::Wait => true,
                    Next::Release => {
                        ready.push((id.clone(), grow.clone()));
                        false
                    }
                    Next::Drop(why) => {
                        tracing::info!(
                            job = id,
                            why,
                            "a grow's nodes are dropped; its new pods wait for a placement"
                        );
                        false
                    }
                }
            });
        }
        if ready.is_empty() {
            return;
        }
        let snapshot = self.caches.snapshot((self.clock)(), Vec::new());
        for (id, grow) in ready {
            let place = Action {
                op: Operation::Place {
                    job: id.clone(),
                    assignments: grow
                        .tasks
                        .iter()
                        .map(|(task, node)| Assignment {
                            task: task.clone(),
                            node: node.clone(),
                        })
                        .collect(),
                },
                reason: grow.reason.clone(),
            };
            let decision = Decision {
                actions: vec![place],
                ..Decision::default()
            };
            if let Some(rejected) = check_decision(&snapshot, &decision).rejected.first() {
                tracing::info!(job = id, why = %rejected.reason, "a grow's nodes no longer fit; its new pods wait for a placement");
                continue;
            }
            let reason = format!(
                "the nodes of its grow to {} replicas: {}",
                grow.to, grow.reason
            );
            match self.place_adopted(&id, &grow.tasks, &reason, now) {
                Ok(()) => self.adopted.released_between_rounds(&id),
                Err(error) => {
                    tracing::info!(job = id, %error, "a grow's new pods were not released to its nodes; they wait for a placement")
                }
            }
        }
    }
}
