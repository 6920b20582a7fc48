//! The leader's pass over the adopted jobs between rounds: the triggers of a round (jobs
//! that became placeable for the first time or again, jobs gone), the one Event on a
//! gated pod no enabled kind owns and on an owner whose pods run without the gate, the
//! stops (`stop`), and the log followers that read each running pod's loss and its
//! checkpoint acknowledgements. It acts only through the actor; it must not decide.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::SignedDuration;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::EventType;
use switchyard_core::Trigger;

use super::{placeable, reference_to};
use crate::act::{PodAck, Told};
use crate::adopt::{AdoptedJob, NotHeld, Unadoptable};
use crate::cluster::controller::KubeCluster;
use crate::cluster::logs::MAX_FOLLOWERS;
use crate::pods::{delete_key, node_of, phase_of};
use crate::progress::LogPattern;
use crate::{
    LOSS_CONTAINER_ANNOTATION, LOSS_PATTERN_ANNOTATION, NOT_ADOPTED_REASON, PLACEMENT_GATE,
    QUEUE_LABEL,
};

/// A flood of acknowledgement lines from one pod wakes the pass at most this often; the
/// pass looks every second anyway.
const ACK_WAKE_EVERY: SignedDuration = SignedDuration::from_secs(1);

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

/// The message of the one Event on an owner not adopted because `n`'s pods run without
/// the gate.
fn not_held_message(n: &NotHeld) -> String {
    let shown: Vec<&str> = n.ungated.iter().take(5).map(String::as_str).collect();
    let more = match n.ungated.len() - shown.len() {
        0 => String::new(),
        more => format!(" and {more} more"),
    };
    let pods = format!("{}{more}", shown.join(", "));
    match n.gated {
        0 => format!(
            "its pods carry the label {QUEUE_LABEL} but not the scheduling gate {PLACEMENT_GATE} ({pods}): kube-scheduler places them and switchyard neither counts, preempts nor evicts them; add the gate to the pod template for switchyard to schedule the job"
        ),
        gated => format!(
            "switchyard does not adopt this job: {pods} run without ever waiting behind the scheduling gate {PLACEMENT_GATE} (the template lacks it, or it was lifted by hand), so it cannot place or stop the gang whole; its {gated} gated pod(s) wait until their gate is lifted by hand as well, or the job is made again with the gate in every pod template"
        ),
    }
}

impl KubeCluster {
    /// The leader's pass over the adopted jobs: the triggers of a round (jobs that
    /// became placeable for the first time or again, jobs gone), Events on pods no
    /// enabled kind owns and on owners not adopted, stops due, and log followers.
    pub(in crate::cluster) fn adopted_pass(&mut self) -> Vec<Trigger> {
        let grouped = self.caches.adoption.group();
        self.release_grown(&grouped.jobs);
        let mut triggers = Vec::new();
        let active: HashSet<String> = grouped.jobs.iter().map(|j| j.id.clone()).collect();
        let mut gone: Vec<String> = self
            .adopted
            .known
            .iter()
            .filter(|id| !active.contains(*id))
            .cloned()
            .collect();
        gone.sort();
        for id in gone {
            self.adopted.known.remove(&id);
            self.adopted.ended.remove(&id);
            self.adopted.last.remove(&id);
            let stops = format!("stop:{id}:");
            self.adopted.told.retain(|o| !o.starts_with(&stops));
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
            if now_placeable.contains(&job.id) && !self.adopted.placeable.contains(&job.id) {
                match self.adopted.known.insert(job.id.clone()) {
                    true => triggers.push(Trigger::JobArrived(job.id.clone())),
                    false => triggers.push(Trigger::JobPreempted(job.id.clone())),
                }
            }
        }
        self.adopted.placeable = now_placeable;
        self.forget_gone_pods(&grouped.jobs);
        self.tell_unadoptable(&grouped.unadoptable);
        self.tell_not_held(&grouped.not_held);
        self.stop_due(&grouped.jobs);
        self.follow_adopted_logs(&grouped.jobs);
        self.follow_adopted_resizes(&grouped.jobs);
        triggers
    }

    /// Forgets the acknowledgements and back-offs of pods no adopted job has any more.
    fn forget_gone_pods(&mut self, jobs: &[AdoptedJob]) {
        let present: HashSet<String> = jobs
            .iter()
            .flat_map(|j| j.members.iter().chain(&j.stopping_members))
            .map(|m| delete_key(&m.pod))
            .collect();
        self.adopted
            .acks
            .lock()
            .expect("acks lock")
            .retain(|uid, _| present.contains(uid));
        self.adopted.backoff.retain(|uid, _| present.contains(uid));
    }

    /// Tells `occasion` once (see [`crate::act::Told`]) unless this leader already has;
    /// `tell` publishes it.
    pub(super) fn tell_once_per_occasion(
        &mut self,
        occasion: String,
        tell: impl std::future::Future<Output = crate::Result<Told>>,
    ) {
        if self.adopted.told.contains(&occasion) || !self.may_act() {
            return;
        }
        match self.handle.block_on(tell) {
            Ok(_) => {
                self.adopted.told.insert(occasion);
            }
            // Told at a later pass.
            Err(error) => tracing::warn!(%error, occasion, "telling an Event once"),
        }
    }

    /// One Event per gated pod no enabled kind owns, whichever replica leads.
    fn tell_unadoptable(&mut self, unadoptable: &[Unadoptable]) {
        let present: HashSet<String> = unadoptable
            .iter()
            .filter_map(|u| u.pod.metadata.uid.clone())
            .map(|uid| format!("pod:{uid}"))
            .collect();
        self.adopted
            .told
            .retain(|o| !o.starts_with("pod:") || present.contains(o));
        for u in unadoptable {
            let Some(uid) = u.pod.metadata.uid.clone() else {
                continue;
            };
            let message = not_enabled_message(u);
            let actor = self.actor.clone();
            let pod = u.pod.clone();
            self.tell_once_per_occasion(format!("pod:{uid}"), async move {
                actor.tell_not_enabled(&pod, &message).await
            });
        }
    }

    /// One Event per owner not adopted because some of its pods run without the gate,
    /// whichever replica leads: a Warning when others wait behind the gate (they are
    /// stuck), else a Normal one (kube-scheduler runs the job; nothing waits).
    fn tell_not_held(&mut self, not_held: &[NotHeld]) {
        let present: HashSet<String> = not_held
            .iter()
            .map(|n| format!("owner:{}", n.uid))
            .collect();
        self.adopted
            .told
            .retain(|o| !o.starts_with("owner:") || present.contains(o));
        for n in not_held {
            if n.uid.is_empty() {
                continue;
            }
            let reference = reference_to(n.kind, &n.namespace, &n.name, &n.uid);
            let note = not_held_message(n);
            let occasion = format!("notadopted.{}", n.uid);
            let type_ = match n.gated {
                0 => EventType::Normal,
                _ => EventType::Warning,
            };
            let actor = self.actor.clone();
            self.tell_once_per_occasion(format!("owner:{}", n.uid), async move {
                actor
                    .tell_once(
                        &reference,
                        &occasion,
                        type_,
                        NOT_ADOPTED_REASON,
                        "Adopt",
                        &note,
                    )
                    .await
            });
        }
    }

    /// Follows the log of every running pod of an adopted job for its loss and its
    /// checkpoint acknowledgements: the template's [`LOSS_PATTERN_ANNOTATION`] (else
    /// [`crate::DEFAULT_LOG_PATTERN`]) in its [`LOSS_CONTAINER_ANNOTATION`] container
    /// (else the first), with the followers and back-offs the TrainingJobs' pods use.
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
                let (acks, uid) = (self.adopted.acks.clone(), delete_key(pod));
                let task = self.handle.spawn(async move {
                    // Each line is this pod's acknowledgement, kept under its UID: the
                    // follower of a pod that its owner made again never speaks for the
                    // new one.
                    let heard = |ack: PodAck| {
                        let time = ack.time;
                        let previous = acks.lock().expect("acks lock").insert(uid.clone(), ack);
                        if previous.is_none_or(|p| time >= p.time + ACK_WAKE_EVERY) {
                            caches.changed.notify_one();
                        }
                    };
                    let followed = crate::cluster::follow_log(
                        api,
                        &name,
                        container,
                        pattern,
                        &caches,
                        &id,
                        || clock(),
                        heard,
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
