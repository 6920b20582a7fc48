//! The nodes a grow of an elastic adopted job ([`crate::adopt`]) was decided for. A
//! `Scale` that grows an elastic PyTorchJob names one node per new worker; the
//! operator makes those workers later, gated, and a policy that grows running jobs
//! and places only waiting ones (DRAGON) would never place them. So the grow is
//! remembered here, in memory, per job, with its owner's UID and target count, and
//! once the operator has made every new worker the leader's pass releases them to
//! those nodes, all or none, through the same release an explicit placement uses,
//! after the host's pre-release checks on the cluster as it is then. A grow gone
//! stale (another scale, the owner replaced, older than `kept::GROW_KEPT_FOR`), whose
//! pods a placement released already, or whose nodes no longer fit, is dropped with a
//! log line, and the pods wait for a `Place` as any held pod does. It carries out a
//! decision already validated; it must not make one.

mod kept;

use switchyard_core::{Action, Assignment, Decision, Operation, check_decision};

pub(super) use self::kept::Grows;
use self::kept::{Grow, Next, next};
use super::controller::KubeCluster;
use crate::adopt::AdoptedJob;

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
