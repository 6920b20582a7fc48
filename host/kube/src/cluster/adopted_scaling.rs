//! What the policy may change of an adopted job's resources ([`crate::adopt`]): a task's
//! CPU weight, carried out as an in-place resize relative to the owner's pod template
//! and followed until the kubelet applied it, deferred it or found it infeasible; and
//! an elastic job's replica count, asked of the owner's `scale` subresource (a grow's
//! nodes kept for its new workers, [`super::adopted_grow`]). Each is
//! checked against the caches as they are now (the snapshot the policy decided on may
//! be older), and refused with the reason where the owner does not allow it. It carries
//! decisions out; it must not make one.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::ResourceExt;

use super::controller::KubeCluster;
use crate::act::{AdoptedWeight, AskedResize, OwnerScale, resize_told, weight_not_offered};
use crate::adopt::{AdoptedJob, ELASTIC_ROLE, asked_millis};
use crate::pods::node_of;
use crate::template::{ResizeState, resize_state};
use crate::{Error, Result};

impl KubeCluster {
    /// Sets the CPU weight of task `task` of adopted job `job` (whose owner is `owner`):
    /// its pod's training container resized to `weight` times the CPU its owner's
    /// template requests. Refused when the template requests no CPU, when the kubelet
    /// would restart the container to resize it, or when the pod is not on a node yet.
    pub(super) fn set_adopted_cpu_weight(
        &self,
        job: &AdoptedJob,
        owner: &ObjectReference,
        task: &str,
        weight: f64,
        reason: &str,
    ) -> Result<()> {
        let id = job.id.as_str();
        if !(weight.is_finite() && weight > 0.0 && weight <= 1.0) {
            return Err(weight_not_offered(
                id,
                task,
                &format!("a weight is in (0, 1], not {weight}"),
            ));
        }
        let member = job.members.iter().find(|m| m.task == task).ok_or_else(|| {
            Error::NotFound(format!("adopted job {id} has no live pod for task {task}"))
        })?;
        let template = job.shape.cpu.get(&member.role).ok_or_else(|| {
            let why = format!(
                "the pod template of its role `{}` has no container",
                member.role
            );
            weight_not_offered(id, task, &why)
        })?;
        if let Some(why) = template.refusal() {
            return Err(weight_not_offered(id, task, &why));
        }
        let pod: &Pod = &member.pod;
        if node_of(pod).is_none() {
            return Err(weight_not_offered(
                id,
                task,
                &format!("its pod {} is not on a node yet", pod.name_any()),
            ));
        }
        let asked = AdoptedWeight {
            container: &template.container,
            template_millis: template.millis,
            weight,
        };
        let millis = self
            .handle
            .block_on(self.actor.resize_adopted(owner, id, pod, asked, reason))?;
        if let Some(uid) = pod.metadata.uid.clone() {
            self.adopted_resizes.lock().expect("resizes lock").insert(
                uid,
                AskedResize {
                    owner: owner.clone(),
                    id: id.to_string(),
                    container: template.container.clone(),
                    millis,
                    told: "ResizeRequested",
                },
            );
        }
        Ok(())
    }

    /// Asks the owner of the elastic adopted job `job` for `replicas` replicas of its
    /// scalable role; a grow's `nodes` (one per new replica) are remembered, and the
    /// new workers released to them once the operator made them
    /// ([`super::adopted_grow`]). Refused when its owner is not elastic, when `replicas`
    /// is outside its bounds, or while its pods are stopping or asked to checkpoint.
    pub(super) fn scale_adopted(
        &self,
        job: &AdoptedJob,
        owner: &ObjectReference,
        (replicas, nodes): (u32, &[String]),
        reason: &str,
    ) -> Result<()> {
        let id = job.id.as_str();
        let elastic = job.shape.scaling.as_ref().map_err(|why| {
            Error::Unsupported(format!("Scale is not offered for adopted job {id}: {why}"))
        })?;
        if !(elastic.min..=elastic.max).contains(&replicas) {
            return Err(Error::Unsupported(format!(
                "adopted job {id} may run {} to {} workers (its elasticPolicy), not {replicas}",
                elastic.min, elastic.max
            )));
        }
        if job.stopping > 0 || job.checkpoint_asked() {
            let asked = match job.checkpoint_asked() {
                true => ", a checkpoint asked of its pods",
                false => "",
            };
            return Err(Error::Unsupported(format!(
                "adopted job {id} is restarting ({} of its pods stopping{asked}): it is scaled once that is over",
                job.stopping
            )));
        }
        if replicas == elastic.replicas {
            return Ok(());
        }
        let resource = job.kind.api_resource();
        let scale = OwnerScale {
            resource: &resource,
            namespace: &job.namespace,
            name: &job.name,
            from: elastic.replicas,
            to: replicas,
            resource_version: elastic.resource_version.as_deref(),
        };
        self.handle
            .block_on(self.actor.scale_adopted(owner, id, scale, reason))?;
        let from_to = (elastic.replicas, replicas);
        self.remember_grow(job, ELASTIC_ROLE, from_to, nodes, reason);
        Ok(())
    }

    /// Tells the owners of `jobs` what became of the resizes this leader asked of their
    /// pods: one Event each time where one stands changes (applied, deferred,
    /// infeasible), and no more once it is applied or the pod is gone.
    pub(super) fn follow_adopted_resizes(&mut self, jobs: &[AdoptedJob]) {
        let live: HashMap<&str, &Pod> = jobs
            .iter()
            .flat_map(|j| &j.members)
            .filter_map(|m| Some((m.pod.metadata.uid.as_deref()?, &*m.pod)))
            .collect();
        let mut changed: Vec<(String, AskedResize, ResizeState, Pod)> = Vec::new();
        {
            let mut asked = self.adopted_resizes.lock().expect("resizes lock");
            asked.retain(|uid, _| live.contains_key(uid.as_str()));
            for (uid, resize) in asked.iter() {
                let pod = live[uid.as_str()];
                // The cache has not seen the resize yet (or someone resized it since).
                if asked_millis(pod, &resize.container) != Some(resize.millis) {
                    continue;
                }
                let state = resize_state(pod);
                if resize_told(&state) != resize.told {
                    changed.push((uid.clone(), resize.clone(), state, pod.clone()));
                }
            }
        }
        if changed.is_empty() || !self.may_act() {
            return;
        }
        for (uid, resize, state, pod) in &changed {
            let told =
                self.handle.block_on(
                    self.actor
                        .tell_resize(&resize.owner, &resize.id, pod, state),
                );
            let mut asked = self.adopted_resizes.lock().expect("resizes lock");
            match state {
                ResizeState::Applied => {
                    asked.remove(uid);
                }
                _ => {
                    if let Some(entry) = asked.get_mut(uid) {
                        entry.told = told;
                    }
                }
            }
        }
    }
}
