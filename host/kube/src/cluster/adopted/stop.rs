//! An adopted job's stop, after a preemption or a move asked its pods to checkpoint
//! (the annotation): each asked pod is evicted once every asked pod has acknowledged its
//! checkpoint since it was asked (a `switchyard: checkpoint-complete` line in its log,
//! or `POST /v1/jobs/{id}/checkpoint`), or else once its own grace is over. The stop's
//! end is told once on the owner, `CheckpointAcknowledged` or `CheckpointTimedOut`
//! naming the tasks that did not acknowledge, as a TrainingJob's is. An eviction a
//! PodDisruptionBudget refuses (429) is asked again after a back-off per pod, growing
//! and capped, and never sooner than the API server's `Retry-After`; the owner is told
//! once per stop with the budget's message. It evicts; it must never delete a pod.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::runtime::events::EventType;
use switchyard_control::{CheckpointOutcome, LastCheckpoint};

use super::owner_reference;
use super::state::EvictionBackoff;
use crate::act::{Eviction, Refusal, describe_checkpoint};
use crate::adopt::{AdoptedJob, Member};
use crate::cluster::checkpoints::seconds;
use crate::cluster::controller::KubeCluster;
use crate::crd::{CheckpointRecord, CheckpointResult};
use crate::pods::delete_key;
use crate::{
    CHECKPOINT_GRACE_ANNOTATION, DEFAULT_CHECKPOINT_GRACE_SECONDS, EVICTION_REFUSED_REASON,
};

/// The longest checkpoint grace a pod template may ask for, seconds: a day.
const MAX_CHECKPOINT_GRACE_SECONDS: u32 = 86_400;
/// The first wait before asking again for an eviction a budget refused.
pub(crate) const EVICTION_BACKOFF: SignedDuration = SignedDuration::from_secs(5);
/// The longest such wait (the API server's `Retry-After` may ask for longer).
pub(crate) const EVICTION_BACKOFF_MAX: SignedDuration = SignedDuration::from_secs(120);

/// How long `pod` has to checkpoint before it is evicted (its template's
/// [`CHECKPOINT_GRACE_ANNOTATION`], at most a day).
pub(super) fn checkpoint_grace(pod: &Pod) -> SignedDuration {
    let seconds = pod
        .annotations()
        .get(CHECKPOINT_GRACE_ANNOTATION)
        .and_then(|g| g.trim().parse::<u32>().ok())
        .unwrap_or(DEFAULT_CHECKPOINT_GRACE_SECONDS)
        .min(MAX_CHECKPOINT_GRACE_SECONDS);
    SignedDuration::from_secs(i64::from(seconds))
}

/// The one key of adopted job `id`'s stop asked at `requested`, for what is told once
/// per stop.
fn stop_key(id: &str, requested: Timestamp) -> String {
    format!("stop:{id}:{}", requested.as_second())
}

impl KubeCluster {
    /// The members of `job` asked to checkpoint, each with when.
    pub(super) fn asked_members<'a>(&self, job: &'a AdoptedJob) -> Vec<(&'a Member, Timestamp)> {
        job.members
            .iter()
            .filter_map(|m| Some((m, self.actor.asked_at(&m.pod)?)))
            .collect()
    }

    /// Evicts the asked members of adopted jobs that are due: all of a job's once every
    /// one acknowledged, else each at its grace's end; tells how the checkpoint ended.
    pub(super) fn stop_due(&mut self, jobs: &[AdoptedJob]) {
        let now = self.now_timestamp();
        for job in jobs {
            let asked = self.asked_members(job);
            let Some(requested) = asked.iter().map(|(_, t)| *t).min() else {
                continue;
            };
            let missing: Vec<&Member> = asked
                .iter()
                .filter(|(m, t)| self.adopted.ack_since(&m.pod, *t).is_none())
                .map(|(m, _)| *m)
                .collect();
            let due: Vec<&Member> = asked
                .iter()
                .filter(|(m, t)| missing.is_empty() || now >= *t + checkpoint_grace(&m.pod))
                .map(|(m, _)| *m)
                .collect();
            if due.is_empty() || !self.may_act() {
                continue;
            }
            self.checkpoint_ended(job, &asked, &missing, requested, now);
            for member in due {
                self.evict_member(job, member, requested, now);
            }
        }
    }

    /// Tells once how `job`'s checkpoint asked at `requested` ended, and keeps it for
    /// `GET /v1/jobs/{id}/checkpoint`'s outcomes: acknowledged when none is `missing`.
    fn checkpoint_ended(
        &mut self,
        job: &AdoptedJob,
        asked: &[(&Member, Timestamp)],
        missing: &[&Member],
        requested: Timestamp,
        now: Timestamp,
    ) {
        if self.adopted.ended.get(&job.id) == Some(&requested) {
            return;
        }
        self.adopted.ended.insert(job.id.clone(), requested);
        let last = asked
            .iter()
            .filter_map(|(m, t)| self.adopted.ack_since(&m.pod, *t))
            .max_by_key(|a| a.time);
        let since = |t: Timestamp| (seconds(t) - seconds(requested)).max(0.0);
        let record = match (missing.is_empty(), &last) {
            (true, Some(last)) => CheckpointRecord {
                outcome: CheckpointResult::Acknowledged,
                seconds: since(last.time),
                path: Some(last.path.clone()),
                requested_at: requested.to_string(),
                not_acknowledged: Vec::new(),
            },
            _ => CheckpointRecord {
                outcome: CheckpointResult::TimedOut,
                seconds: since(now),
                path: last.as_ref().map(|a| a.path.clone()),
                requested_at: requested.to_string(),
                not_acknowledged: missing.iter().map(|m| m.task.clone()).collect(),
            },
        };
        let outcome = match record.outcome {
            CheckpointResult::Acknowledged => CheckpointOutcome::Acknowledged,
            CheckpointResult::TimedOut => CheckpointOutcome::TimedOut,
        };
        self.adopted.last.insert(
            job.id.clone(),
            LastCheckpoint {
                outcome,
                seconds: record.seconds,
                path: record.path.clone(),
                at: seconds(requested) + record.seconds,
            },
        );
        let (type_, reason, note) = describe_checkpoint(&record);
        let (actor, owner) = (self.actor.clone(), owner_reference(job));
        let occasion = format!("{}.checkpoint.{}", job.kind.name(), requested.as_second());
        self.tell_once_per_occasion(
            format!("{}:end", stop_key(&job.id, requested)),
            async move {
                actor
                    .tell_once(&owner, &occasion, type_, reason, "Checkpoint", &note)
                    .await
            },
        );
    }

    /// Evicts `member` of `job` (whose stop was asked at `requested`) unless its
    /// back-off holds it; a refusal backs it off and is told once per stop.
    fn evict_member(
        &mut self,
        job: &AdoptedJob,
        member: &Member,
        requested: Timestamp,
        now: Timestamp,
    ) {
        let key = delete_key(&member.pod);
        if self
            .adopted
            .backoff
            .get(&key)
            .is_some_and(|b| now < b.until)
        {
            return;
        }
        let refusal = match self.handle.block_on(self.actor.evict_once(&member.pod)) {
            Ok(Eviction::Sent | Eviction::Gone) => {
                self.adopted.backoff.remove(&key);
                return;
            }
            Ok(Eviction::Refused(refusal)) => refusal,
            Err(error) => {
                tracing::warn!(%error, job = job.id, "evicting a member of an adopted job");
                return;
            }
        };
        let wait = self
            .adopted
            .backoff
            .get(&key)
            .map_or(EVICTION_BACKOFF, |b| (b.wait * 2).min(EVICTION_BACKOFF_MAX));
        let asked_for = SignedDuration::from_secs(i64::from(refusal.retry_after.unwrap_or(0)));
        let wait = wait.max(asked_for);
        self.adopted.backoff.insert(
            key,
            EvictionBackoff {
                until: now + wait,
                wait,
            },
        );
        tracing::info!(
            pod = member.pod.name_any(),
            job = job.id,
            why = refusal.message,
            wait = wait.as_secs(),
            "eviction refused for now"
        );
        let note = refused_note(member, &refusal, wait);
        let (actor, owner) = (self.actor.clone(), owner_reference(job));
        let occasion = format!(
            "{}.evictionrefused.{}",
            job.kind.name(),
            requested.as_second()
        );
        self.tell_once_per_occasion(
            format!("{}:refused", stop_key(&job.id, requested)),
            async move {
                actor
                    .tell_once(
                        &owner,
                        &occasion,
                        EventType::Warning,
                        EVICTION_REFUSED_REASON,
                        "Evict",
                        &note,
                    )
                    .await
            },
        );
    }
}

/// The note of the Event on an owner whose `member`'s eviction `refusal` refused,
/// asked again after `wait`.
fn refused_note(member: &Member, refusal: &Refusal, wait: SignedDuration) -> String {
    format!(
        "evicting pod {} (task {}) after its checkpoint was refused by the API server: {}; switchyard asks again in {} s, waiting longer after each refusal (at most {} s, or what the API server asks), until the budget allows it",
        member.pod.name_any(),
        member.task,
        refusal.message,
        wait.as_secs(),
        EVICTION_BACKOFF_MAX.as_secs()
    )
}
