//! The moves of a running job checked against the account: a migration, a rescale and a
//! preemption. Each needs a checkpointable running job not yet placed or moved in this
//! decision (a job moves at most once per round), and each that disrupts the job is put
//! to the decision's disruption budget; a migration and a growth need room and
//! eligibility on their target nodes, and free their source nodes' room.

use super::account::{Account, one_per_node, where_tasks_run};
use super::rejection::Rejection;
use crate::model::JobPhase;
use crate::names;

impl<'a> Account<'a> {
    fn claim_move(&mut self, job_id: &'a str) -> Result<(), Rejection> {
        let job = self.job(job_id).expect("checked by caller");
        if !job.checkpointable {
            return Err(Rejection::NotCheckpointable { job: job_id.into() });
        }
        if job.phase != JobPhase::Running {
            return Err(Rejection::WrongPhase {
                job: job_id.into(),
                phase: format!("{:?}", job.phase).to_lowercase(),
                what: "only a running job can be migrated, rescaled or preempted".into(),
            });
        }
        if self.moved.contains(job_id) || self.placed_on.contains_key(job_id) {
            return Err(Rejection::ConflictingAction { job: job_id.into() });
        }
        Ok(())
    }

    pub(super) fn migrate(
        &mut self,
        job_id: &'a str,
        task: Option<&'a str>,
        node: &'a str,
        purpose: &str,
    ) -> Result<(), Rejection> {
        let job = self.job(job_id).expect("checked by caller");
        names::check_label_value(purpose).map_err(|message| Rejection::BadPurpose {
            job: job_id.into(),
            message,
        })?;
        self.claim_move(job_id)?;
        let moving: Vec<_> = match task {
            Some(name) => vec![job.task(name).ok_or_else(|| Rejection::UnknownTask {
                job: job_id.into(),
                task: name.into(),
            })?],
            None => job.tasks.iter().collect(),
        };
        if let Some(t) = moving.iter().find(|t| t.node.is_none()) {
            return Err(Rejection::WrongPhase {
                job: job_id.into(),
                phase: "running".into(),
                what: format!("task `{}` is not on a node, so it cannot move", t.name),
            });
        }
        for t in moving.iter().filter(|t| t.node.as_deref() != Some(node)) {
            self.check_eligible(job_id, t, node)?;
        }
        // Migrating to the node a task is on only marks the job: no disruption.
        let disrupts = moving.iter().any(|t| t.node.as_deref() != Some(node));
        if disrupts {
            self.disruptions.admit(job)?;
        }
        if job.one_task_per_node() {
            let moved = |name: &str| moving.iter().any(|t| t.name == name);
            let staying = where_tasks_run(job).filter(|(task, _)| !moved(task));
            let new = moving.iter().map(|t| (t.name.as_str(), node));
            one_per_node(job_id, staying, new)?;
        }
        let charges: Vec<_> = moving
            .iter()
            .filter(|t| t.node.as_deref() != Some(node))
            .map(|t| (t.name.as_str(), node, t.requests))
            .collect();
        self.charge_all(job_id, &charges)?;
        for t in moving.iter().filter(|t| t.node.as_deref() != Some(node)) {
            let source = t.node.as_deref().expect("checked above");
            if let Some(&n) = self.nodes.get(source) {
                let released = self.free_now(n).plus(&t.requests);
                self.free.insert(n.name.as_str(), released);
            }
        }
        if disrupts {
            self.disruptions.disrupted();
        }
        self.moved.insert(job_id);
        Ok(())
    }

    pub(super) fn scale(
        &mut self,
        job_id: &'a str,
        replicas: u32,
        nodes: &'a [String],
    ) -> Result<(), Rejection> {
        let job = self.job(job_id).expect("checked by caller");
        let r = &job.replicas;
        let bad = |why: String| Rejection::BadReplicaCount {
            job: job_id.into(),
            replicas,
            why,
        };
        if replicas < r.min || replicas > r.max {
            return Err(bad(format!("allowed range is {}..={}", r.min, r.max)));
        }
        if replicas == r.current {
            return Err(bad("it already runs that many".into()));
        }
        self.claim_move(job_id)?;
        self.disruptions.admit(job)?;
        let template = job
            .tasks
            .iter()
            .find(|t| t.role == r.role)
            .ok_or_else(|| bad(format!("it has no task of its scalable role `{}`", r.role)))?;
        if replicas > r.current {
            let added = (replicas - r.current) as usize;
            if nodes.len() != added {
                return Err(bad(format!(
                    "growing by {added} needs {added} target nodes, got {}",
                    nodes.len()
                )));
            }
            for n in nodes {
                self.check_eligible(job_id, template, n)?;
            }
            if job.one_task_per_node() {
                // The added replicas take the next indices of the role.
                let added_names: Vec<String> = (r.current..replicas)
                    .map(|i| format!("{}-{i}", r.role))
                    .collect();
                let added = added_names
                    .iter()
                    .zip(nodes)
                    .map(|(task, node)| (task.as_str(), node.as_str()));
                one_per_node(job_id, where_tasks_run(job), added)?;
            }
            let charges: Vec<_> = nodes
                .iter()
                .map(|n| (template.name.as_str(), n.as_str(), template.requests))
                .collect();
            self.charge_all(job_id, &charges)?;
        } else if !nodes.is_empty() {
            return Err(bad("shrinking takes no target nodes".into()));
        }
        self.disruptions.disrupted();
        self.moved.insert(job_id);
        Ok(())
    }

    /// A preemption: the job checkpoints and leaves its nodes. Its nodes are released
    /// only once the checkpoint is saved, so nothing placed in this round can use them
    /// yet.
    pub(super) fn preempt(&mut self, job_id: &'a str) -> Result<(), Rejection> {
        let job = self.job(job_id).expect("checked by caller");
        self.claim_move(job_id)?;
        self.disruptions.admit(job)?;
        self.disruptions.disrupted();
        self.moved.insert(job_id);
        Ok(())
    }
}
