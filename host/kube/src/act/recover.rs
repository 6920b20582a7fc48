//! Restarting a whole gang and sending it back to the queue, as JobSet restarts every
//! job of a set: a member failed, crash-looped, was evicted or deleted, or the scheduler
//! or the node's kubelet refused the placement. Failures count against the job's
//! `backoffLimit` and delay its return with a back-off; disruptions (evictions,
//! deletions, a node shut down) send it back at once; a refused placement is recorded
//! for the policy ([`crate::PLACEMENT_REFUSED_LABEL`]) and delays its return with a
//! back-off that grows with each refusal in a row, so a placement that cannot happen is
//! not made again round after round.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::runtime::events::EventType;

use super::actor::{
    Actor, FAILED_CONDITION, PODS_SCHEDULED_CONDITION, rfc3339, status_of, stop_grace,
};
use super::restart::unchanged_since;
use super::status::set_condition;
use crate::Result;
use crate::crd::{PendingRestart, Phase, Refusal, RestartAction, TrainingJob, TrainingJobStatus};
use crate::gang::{LostMember, RefusedMember};

/// Why a gang restarts whole and goes back to the queue ([`Actor::restart_gang`]).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GangLoss {
    /// Members were lost.
    Members(Vec<LostMember>),
    /// The scheduler, or the kubelet of their node, refused members of the placement.
    Refused(Vec<RefusedMember>),
}

impl Actor {
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
        self.event(
            job,
            EventType::Warning,
            verdict.reason,
            "Recover",
            &verdict.message,
        )
        .await;
        Ok(())
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
                let counted: u32 = members.iter().map(|m| m.failures).sum();
                let disrupted = members.iter().filter(|m| m.failures == 0).count() as u32;
                let failures = status.failures + counted;
                let give_up = failures > job.spec.backoff_limit;
                let what = members
                    .iter()
                    .map(|m| m.what.as_str())
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
                    .map(|r| {
                        let refused = format!("{} refused pod {} on {}", r.by, r.pod, r.node);
                        format!("{refused}: {} ({})", r.reason, r.message)
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                let mut nodes: Vec<String> = refused.iter().map(|r| r.node.clone()).collect();
                nodes.sort();
                nodes.dedup();
                let refusal = Refusal {
                    nodes,
                    reason: refused
                        .first()
                        .map(|r| r.reason.clone())
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
                        "{what}; the gang is taken back and offered to the policy again after {}s (refusal {count} in a row)",
                        backoff.as_secs()
                    ),
                    what,
                    reason: "PlacementRefused",
                }
            }
        }
    }
}

/// The back-off before a job whose pods failed `failures` times (or whose placement was
/// refused that many times in a row) is queued again: 10 s, doubling with each, at most
/// 6 min (the Job controller's).
pub(crate) fn failure_backoff(failures: u32) -> SignedDuration {
    let seconds = 10u64.saturating_mul(1 << failures.saturating_sub(1).min(10));
    SignedDuration::from_secs(seconds.min(360) as i64)
}
