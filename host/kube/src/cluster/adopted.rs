//! The adopted jobs' part of a round ([`crate::adopt`]): their accepted actions carried
//! out (a placement released all or none, a preemption or a move asked as a checkpoint,
//! everything else refused with the reason), and the leader's pass over them between
//! rounds: which arrived, became placeable again or finished (the policy's triggers),
//! the one Event on a gated pod no enabled kind owns, the evictions whose checkpoint
//! grace is over, and the loss read from their pods' logs. It carries decisions out; it
//! must not make one, nor write an owner.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::Api;
use switchyard_core::{Action, Operation, Trigger};

use super::controller::KubeCluster;
use super::logs::MAX_FOLLOWERS;
use crate::act::Eviction;
use crate::adopt::{AdoptedJob, Unadoptable};
use crate::pods::{held_by_placement_gate, node_of, phase_of, pod_requests};
use crate::progress::LogPattern;
use crate::{
    CHECKPOINT_GRACE_ANNOTATION, DEFAULT_CHECKPOINT_GRACE_SECONDS, Error,
    LOSS_CONTAINER_ANNOTATION, LOSS_PATTERN_ANNOTATION, PLACEMENT_GATE, QUEUE_LABEL,
};

/// The longest checkpoint grace a pod template may ask for, seconds: a day.
const MAX_CHECKPOINT_GRACE_SECONDS: u32 = 86_400;

/// The owner of `job`, as its Events name it.
fn owner_reference(job: &AdoptedJob) -> ObjectReference {
    ObjectReference {
        api_version: Some(job.kind.api_version().into()),
        kind: Some(job.kind.kind().into()),
        name: Some(job.name.clone()),
        namespace: Some(job.namespace.clone()),
        uid: Some(job.uid.clone()).filter(|u| !u.is_empty()),
        ..ObjectReference::default()
    }
}

/// Whether `job` can be placed now: the owner made every member, nothing is stopping
/// or asked to checkpoint, and a member waits behind the placement gate.
fn placeable(job: &AdoptedJob) -> bool {
    job.complete()
        && job.stopping == 0
        && !job.checkpoint_asked()
        && job.members.iter().any(|m| held_by_placement_gate(&m.pod))
}

/// How long `pod` has to checkpoint before it is evicted (its template's
/// [`CHECKPOINT_GRACE_ANNOTATION`], at most a day).
fn checkpoint_grace(pod: &Pod) -> SignedDuration {
    let seconds = pod
        .annotations()
        .get(CHECKPOINT_GRACE_ANNOTATION)
        .and_then(|g| g.trim().parse::<u32>().ok())
        .unwrap_or(DEFAULT_CHECKPOINT_GRACE_SECONDS)
        .min(MAX_CHECKPOINT_GRACE_SECONDS);
    SignedDuration::from_secs(i64::from(seconds))
}

/// The message of the one Event on `pod`, gated in this queue and owned by no enabled
/// kind.
fn not_enabled_message(u: &Unadoptable) -> String {
    let queue = u.pod.labels().get(QUEUE_LABEL).cloned().unwrap_or_default();
    let head =
        format!("this pod waits behind the scheduling gate {PLACEMENT_GATE} in queue {queue}, but");
    match u.kind {
        Some(kind) => format!(
            "{head} switchyard does not adopt {}s here: start it with --integrations={kind} (or remove the gate)",
            kind.kind()
        ),
        None => format!(
            "{head} its owner, {}, is not a kind switchyard adopts (--integrations accepts job, jobset, pytorchjob): remove the gate",
            u.owner
        ),
    }
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

    /// The leader's pass over the adopted jobs: the triggers of a round (jobs that
    /// became placeable for the first time or again, jobs gone), Events on pods no
    /// enabled kind owns, evictions due, and log followers.
    pub(super) fn adopted_pass(&mut self) -> Vec<Trigger> {
        let grouped = self.caches.adoption.group();
        self.release_grown(&grouped.jobs);
        let mut triggers = Vec::new();
        let active: HashSet<String> = grouped.jobs.iter().map(|j| j.id.clone()).collect();
        let mut gone: Vec<String> = self
            .known_adopted
            .iter()
            .filter(|id| !active.contains(*id))
            .cloned()
            .collect();
        gone.sort();
        for id in gone {
            self.known_adopted.remove(&id);
            self.caches.loss.lock().expect("loss lock").forget(&id);
            triggers.push(Trigger::JobFinished(id));
        }
        let now_placeable: HashSet<String> = grouped
            .jobs
            .iter()
            .filter(|j| placeable(j))
            .map(|j| j.id.clone())
            .collect();
        for job in &grouped.jobs {
            if now_placeable.contains(&job.id) && !self.adopted_placeable.contains(&job.id) {
                match self.known_adopted.insert(job.id.clone()) {
                    true => triggers.push(Trigger::JobArrived(job.id.clone())),
                    false => triggers.push(Trigger::JobPreempted(job.id.clone())),
                }
            }
        }
        self.adopted_placeable = now_placeable;
        self.tell_unadoptable(&grouped.unadoptable);
        self.evict_due(&grouped.jobs);
        self.follow_adopted_logs(&grouped.jobs);
        self.follow_adopted_resizes(&grouped.jobs);
        triggers
    }

    /// One Event per gated pod no enabled kind owns (per leader: a new leader tells
    /// again once).
    fn tell_unadoptable(&mut self, unadoptable: &[Unadoptable]) {
        let present: HashSet<String> = unadoptable
            .iter()
            .filter_map(|u| u.pod.metadata.uid.clone())
            .collect();
        self.told_not_enabled.retain(|uid| present.contains(uid));
        for u in unadoptable {
            let Some(uid) = u.pod.metadata.uid.clone() else {
                continue;
            };
            if self.told_not_enabled.contains(&uid) || !self.may_act() {
                continue;
            }
            let message = not_enabled_message(u);
            self.handle
                .block_on(self.actor.tell_not_enabled(&u.pod, &message));
            self.told_not_enabled.insert(uid);
        }
    }

    /// Evicts the members of adopted jobs whose checkpoint grace is over.
    fn evict_due(&mut self, jobs: &[AdoptedJob]) {
        let now = self.now_timestamp();
        for job in jobs {
            for member in &job.members {
                let Some(asked) = self.actor.asked_at(&member.pod) else {
                    continue;
                };
                if now < asked + checkpoint_grace(&member.pod) || !self.may_act() {
                    continue;
                }
                match self.handle.block_on(self.actor.evict_once(&member.pod)) {
                    Ok(Eviction::Sent | Eviction::Gone) => {}
                    Ok(Eviction::Refused(why)) => tracing::info!(
                        pod = member.pod.name_any(),
                        job = job.id,
                        why,
                        "eviction refused for now; asked again at the next pass"
                    ),
                    Err(error) => {
                        tracing::warn!(%error, job = job.id, "evicting a member of an adopted job")
                    }
                }
            }
        }
    }

    /// Follows the log of every running pod of an adopted job for its loss: the
    /// template's [`LOSS_PATTERN_ANNOTATION`] (else [`crate::DEFAULT_LOG_PATTERN`]) in its
    /// [`LOSS_CONTAINER_ANNOTATION`] container (else the first), with the followers and
    /// back-offs the TrainingJobs' pods use.
    fn follow_adopted_logs(&mut self, jobs: &[AdoptedJob]) {
        let now = std::time::Instant::now();
        for job in jobs {
            for member in &job.members {
                let pod = &member.pod;
                let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
                let running = phase_of(pod) == Some("Running") && node_of(pod).is_some();
                let waiting = self.follow_backoff.get(&key).is_some_and(|b| now < b.until);
                if !running
                    || waiting
                    || self.followed.contains_key(&key)
                    || self.followed.len() >= MAX_FOLLOWERS
                {
                    continue;
                }
                let annotations = pod.annotations();
                let pattern = annotations
                    .get(LOSS_PATTERN_ANNOTATION)
                    .map_or(crate::DEFAULT_LOG_PATTERN, String::as_str);
                let pattern = match LogPattern::compile(&job.id, pattern) {
                    Ok(p) => p,
                    Err(error) => {
                        tracing::warn!(%error, "not following the adopted job's logs");
                        break;
                    }
                };
                let container = annotations
                    .get(LOSS_CONTAINER_ANNOTATION)
                    .cloned()
                    .or_else(|| {
                        pod.spec
                            .as_ref()?
                            .containers
                            .first()
                            .map(|c| c.name.clone())
                    });
                let api: Api<Pod> =
                    Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
                let (caches, name, id, clock) = (
                    self.caches.clone(),
                    pod.name_any(),
                    job.id.clone(),
                    self.clock.clone(),
                );
                let task = self.handle.spawn(async move {
                    // An adopted job's stop waits out its grace period: its lines that
                    // acknowledge a checkpoint are not taken.
                    let followed = super::follow_log(
                        api,
                        &name,
                        container,
                        pattern,
                        &caches,
                        &id,
                        || clock(),
                        |_| {},
                    )
                    .await;
                    if let Err(error) = &followed {
                        tracing::warn!(%error, "log follower of an adopted pod stopped");
                    }
                    followed
                });
                self.followed.insert(key, (job.id.clone(), task));
            }
        }
    }
}
