//! Checks a policy's decision against the snapshot it was made for, action by action.
//!
//! Actions are checked in order against a running account of the cluster, so two
//! placements that each fit alone but not together are caught: the first is accepted and
//! the second rejected. An invalid action is rejected with a reason and the others still
//! go through; a rejected placement binds none of its tasks (a gang is all or nothing).
//! A job is moved (migrated, rescaled, preempted) at most once per decision, and never
//! in a decision that also places any of its tasks: a placement and a restart of one
//! job in one round would leave the restart stopping pods that do not include the ones
//! the placement is making, and the job's task could run twice. Several placements of
//! distinct pending tasks of one job stay allowed (a pod-by-pod policy, as kube-scheduler
//! itself places).
//! A disruption that passes every rule here is also put to the disruption budget, when
//! the caller gives one (`disruption.rs` owns those rules).
//!
//! - `rejection`: what is said of a refused action or label.
//! - `account`: the running account and the checks every action shares.
//! - `placement`, `moves`: what a placement, and a migration, rescale or preemption,
//!   must satisfy.

mod account;
mod moves;
mod placement;
mod rejection;

use rustc_hash::FxHashMap;

use account::Account;
pub use rejection::{LabelRejection, RejectedAction, RejectedLabel, Rejection};

use crate::disruption::{DisruptionBudget, Gate};
use crate::model::{Action, Decision, JobLabel, Operation, Snapshot};
use crate::names;

/// The outcome of checking one decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Checked {
    /// Actions to apply, in the policy's order.
    pub accepted: Vec<Action>,
    /// Actions turned down.
    pub rejected: Vec<RejectedAction>,
    /// Labels to set, in the policy's order.
    pub labels: Vec<JobLabel>,
    /// Labels turned down.
    pub rejected_labels: Vec<RejectedLabel>,
}

/// Checks every action and label of `decision` against `snapshot`, with no
/// disruption budget.
pub fn check_decision(snapshot: &Snapshot, decision: &Decision) -> Checked {
    check_decision_within(snapshot, decision, DisruptionBudget::OFF)
}

/// Checks every action and label of `decision` against `snapshot`, and every valid
/// disruption (a migration to another node, a rescale, a preemption) against `budget`.
pub fn check_decision_within(
    snapshot: &Snapshot,
    decision: &Decision,
    budget: DisruptionBudget,
) -> Checked {
    let mut account = Account::new(snapshot, decision, Gate::new(budget, snapshot));
    let mut checked = Checked::default();
    for action in &decision.actions {
        match account.check(&action.op) {
            Ok(()) => checked.accepted.push(action.clone()),
            Err(reason) => checked.rejected.push(RejectedAction {
                action: action.clone(),
                reason,
            }),
        }
    }
    check_labels(snapshot, &decision.labels, &mut checked);
    checked
}

/// Labels must name a job of the snapshot and follow Kubernetes' label syntax (they
/// become object labels); each bad one is rejected on its own.
fn check_labels(snapshot: &Snapshot, labels: &[JobLabel], checked: &mut Checked) {
    if labels.is_empty() {
        return;
    }
    // The labels' jobs, found by a walk from the newest job that stops once each is:
    // labels mostly name the jobs that just arrived or changed, and indexing every id
    // of a long queue each round cost more than the rest of the check.
    let mut named: FxHashMap<&str, bool> = labels.iter().map(|l| (l.job.as_str(), false)).collect();
    let mut missing = named.len();
    for job in snapshot.jobs.iter().rev() {
        if missing == 0 {
            break;
        }
        if let Some(found) = named.get_mut(job.id.as_str())
            && !*found
        {
            *found = true;
            missing -= 1;
        }
    }
    for label in labels {
        let verdict = if !named[label.job.as_str()] {
            Err(LabelRejection::UnknownJob {
                job: label.job.clone(),
            })
        } else {
            names::check_label_key(&label.key)
                .and_then(|()| names::check_label_value(&label.value))
                .map_err(|message| LabelRejection::Syntax { message })
        };
        match verdict {
            Ok(()) => checked.labels.push(label.clone()),
            Err(reason) => checked.rejected_labels.push(RejectedLabel {
                label: label.clone(),
                reason,
            }),
        }
    }
}

impl<'a> Account<'a> {
    /// Checks one operation against the account and, when it passes, charges it.
    fn check(&mut self, op: &'a Operation) -> Result<(), Rejection> {
        let job_id = op.job();
        let job = self.job(job_id).ok_or_else(|| Rejection::UnknownJob {
            job: job_id.to_string(),
        })?;
        match op {
            Operation::Place { assignments, .. } => self.place(job_id, assignments),
            Operation::Migrate {
                task,
                node,
                purpose,
                ..
            } => self.migrate(job_id, task.as_deref(), node, purpose),
            Operation::SetCpuWeight { task, weight, .. } => {
                job.task(task).ok_or_else(|| Rejection::UnknownTask {
                    job: job_id.into(),
                    task: task.clone(),
                })?;
                if !(weight.is_finite() && *weight > 0.0 && *weight <= 1.0) {
                    return Err(Rejection::WeightOutOfRange {
                        job: job_id.into(),
                        task: task.clone(),
                        weight: *weight,
                    });
                }
                Ok(())
            }
            Operation::Scale {
                replicas, nodes, ..
            } => self.scale(job_id, *replicas, nodes),
            Operation::Wait { .. } => Ok(()),
            Operation::Preempt { .. } => self.preempt(job_id),
        }
    }
}
