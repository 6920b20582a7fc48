//! A placement checked against the account: pending tasks of a job that is not
//! restarting nor moved in this decision, each on a node it is eligible for, one task
//! per node when the job asks for it, and all of them fitting or none bound (a gang is
//! all or nothing).

use std::collections::HashSet;

use super::account::{Account, one_per_node, where_tasks_run};
use super::rejection::Rejection;
use crate::model::{Assignment, JobPhase, TaskPhase};

impl<'a> Account<'a> {
    pub(super) fn place(
        &mut self,
        job_id: &'a str,
        assignments: &'a [Assignment],
    ) -> Result<(), Rejection> {
        let job = self.job(job_id).expect("checked by caller");
        if assignments.is_empty() {
            return Err(Rejection::EmptyPlacement { job: job_id.into() });
        }
        if job.phase == JobPhase::Restarting {
            return Err(Rejection::WrongPhase {
                job: job_id.into(),
                phase: "restarting".into(),
                what: "no placement until it has restarted".into(),
            });
        }
        if self.moved.contains(job_id) {
            return Err(Rejection::ConflictingAction { job: job_id.into() });
        }
        let mut in_group = HashSet::new();
        let mut charges = Vec::with_capacity(assignments.len());
        for a in assignments {
            let task = job.task(&a.task).ok_or_else(|| Rejection::UnknownTask {
                job: job_id.into(),
                task: a.task.clone(),
            })?;
            let pending = task.node.is_none() && task.phase == TaskPhase::Pending;
            let key = (job_id, a.task.as_str());
            if !pending || self.placed.contains(&key) || !in_group.insert(key) {
                return Err(Rejection::TaskNotPending {
                    job: job_id.into(),
                    task: a.task.clone(),
                });
            }
            self.check_eligible(job_id, task, &a.node)?;
            charges.push((a.task.as_str(), a.node.as_str(), task.requests));
        }
        if job.one_task_per_node() {
            let before = self.placed_on.get(job_id).into_iter().flatten().copied();
            let new = assignments
                .iter()
                .map(|a| (a.task.as_str(), a.node.as_str()));
            one_per_node(job_id, where_tasks_run(job).chain(before), new)?;
        }
        self.charge_all(job_id, &charges)?;
        self.placed.extend(in_group);
        self.placed_on.entry(job_id).or_default().extend(
            assignments
                .iter()
                .map(|a| (a.task.as_str(), a.node.as_str())),
        );
        Ok(())
    }
}
