//! The adopted jobs' part of a round ([`crate::adopt`]): their accepted actions carried
//! out (a placement released all or none, a preemption or a move asked as a checkpoint,
//! everything else refused with the reason), and what the leader keeps between its
//! passes over them ([`AdoptedPass`]). The pass itself is in its submodules:
//!
//! - `pass`: which jobs arrived, became placeable again or finished (the policy's
//!   triggers), the Events on pods and owners it does not adopt, the log followers.
//! - `stop`: the checkpoint a preemption asked for, ended at once when every asked pod
//!   acknowledged it or at its grace's end, and the evictions, backed off while a
//!   PodDisruptionBudget refuses them.
//! - `api`: the checkpoint request and acknowledgements of the API for adopted ids.
//! - `state`: what the pass keeps between passes ([`AdoptedPass`]).
//!
//! It carries decisions out; it must not make one, nor write an owner.

mod api;
mod pass;
mod state;
mod stop;

pub(super) use self::state::AdoptedPass;

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use switchyard_core::{Action, Operation};

use super::controller::KubeCluster;
use crate::Error;
use crate::adopt::{AdoptedJob, Integration};
use crate::pods::{held_by_placement_gate, pod_requests};

/// The owner of kind `kind`, `namespace/name` with `uid`, as its Events name it.
fn reference_to(kind: Integration, namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(kind.api_version().into()),
        kind: Some(kind.kind().into()),
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        uid: Some(uid.to_string()).filter(|u| !u.is_empty()),
        ..ObjectReference::default()
    }
}

/// The owner of `job`, as its Events name it.
fn owner_reference(job: &AdoptedJob) -> ObjectReference {
    reference_to(job.kind, &job.namespace, &job.name, &job.uid)
}

/// Whether `job` can be placed now: the owner made every member, nothing is stopping
/// or asked to checkpoint, and a member waits behind the placement gate.
fn placeable(job: &AdoptedJob) -> bool {
    job.complete()
        && job.stopping == 0
        && !job.checkpoint_asked()
        && job.members.iter().any(|m| held_by_placement_gate(&m.pod))
}

impl KubeCluster {
    /// Adopted job `id`, as the caches show it now.
    fn adopted_now(&self, id: &str) -> crate::Result<AdoptedJob> {
        self.caches.adoption.adopted(id).ok_or_else(|| {
            Error::NotFound(format!(
                "adopted job {id} is no longer in the cluster (its owner, or every pod of its queue, is gone)"
            ))
        })
    }

    /// Releases adopted job `id`'s held pods to the nodes `assignments` (task, node)
    /// name: every one of them, or none. A policy may place a gang task by task within
    /// one decision; the caller gathers them, so the gang is released whole.
    pub(super) fn place_adopted(
        &self,
        id: &str,
        assignments: &[(String, String)],
        reason: &str,
        now: Timestamp,
    ) -> crate::Result<()> {
        let job = self.adopted_now(id)?;
        let owner = owner_reference(&job);
        if !placeable(&job) {
            return Err(Error::Unsupported(format!(
                "adopted job {id} is not placeable now: {} of its {} pods exist, {} stopping",
                job.members.len(),
                job.shape.gang,
                job.stopping
            )));
        }
        let held: Vec<&Pod> = job
            .members
            .iter()
            .filter(|m| held_by_placement_gate(&m.pod))
            .map(|m| &*m.pod)
            .collect();
        let mut pairs: Vec<(&Pod, &str)> = Vec::with_capacity(assignments.len());
        for (task, node) in assignments {
            let member = job
                .members
                .iter()
                .find(|m| m.task == *task && held_by_placement_gate(&m.pod))
                .ok_or_else(|| {
                    Error::NotFound(format!("adopted job {id} has no pod held for task {task}"))
                })?;
            pairs.push((member.pod.as_ref(), node.as_str()));
        }
        let named: HashSet<&str> = assignments.iter().map(|(t, _)| t.as_str()).collect();
        if named.len() != assignments.len() || pairs.len() != held.len() {
            return Err(Error::Unsupported(format!(
                "adopted job {id} is placed whole: the decision names {} of its {} held pods",
                named.len(),
                held.len()
            )));
        }
        if let Some(refused) = self.caches.adopted_placement_refusal(&job, &pairs) {
            return Err(refused);
        }
        self.handle
            .block_on(self.actor.release_adopted(&owner, id, &pairs, reason, now))?;
        let mut assumed = self.caches.assumed.lock().expect("assumed lock");
        for (pod, node) in &pairs {
            let namespace = pod.namespace().unwrap_or_default();
            assumed.released(&namespace, &pod.name_any(), node, pod_requests(pod));
        }
        Ok(())
    }

    /// Carries out `action`, other than a placement ([`KubeCluster::place_adopted`]),
    /// on an adopted job (its id names one, see [`crate::adopt::parse_adopted_id`]).
    pub(super) fn apply_adopted(&self, action: &Action, now: Timestamp) -> crate::Result<()> {
        let id = action.op.job();
        let job = self.adopted_now(id)?;
        let owner = owner_reference(&job);
        let reason = action.reason.as_str();
        match &action.op {
            Operation::Preempt { .. } | Operation::Migrate { .. } => {
                let verb = match &action.op {
                    Operation::Preempt { .. } => "Preempt",
                    _ => "Migrate",
                };
                if !job.shape.checkpointable {
                    return Err(Error::Unsupported(format!(
                        "adopted job {id} is not checkpointable: its {} would not make an evicted pod again without failing",
                        job.kind.kind()
                    )));
                }
                // A move is carried out as a preemption: the owner makes the pods anew,
                // gated, and the policy places them where it wants them then.
                let pods: Vec<&Pod> = job.members.iter().map(|m| &*m.pod).collect();
                self.handle.block_on(
                    self.actor
                        .ask_adopted_checkpoint(&owner, id, &pods, verb, reason, now),
                )
            }
            Operation::Wait { .. } | Operation::Place { .. } => Ok(()),
            Operation::SetCpuWeight { task, weight, .. } => {
                self.set_adopted_cpu_weight(&job, &owner, task, *weight, reason)
            }
            Operation::Scale {
                replicas, nodes, ..
            } => self.scale_adopted(&job, &owner, (*replicas, nodes.as_slice()), reason),
        }
    }
}
