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

use std::collections::{HashMap, HashSet};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::disruption::{DisruptionBudget, DisruptionRefusal, Gate};
use crate::model::{
    Action, Assignment, Decision, Job, JobLabel, JobPhase, Node, Operation, Resources, Snapshot,
    Task, TaskPhase,
};
use crate::names;

/// Why one action was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error, serde::Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Rejection {
    /// The job is not in the snapshot (finished, or never existed).
    #[error("unknown job `{job}`")]
    UnknownJob {
        /// Job id.
        job: String,
    },
    /// The job has no task of that name.
    #[error("job `{job}` has no task `{task}`")]
    UnknownTask {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
    },
    /// No node of that name.
    #[error("unknown node `{node}`")]
    UnknownNode {
        /// Node name.
        node: String,
    },
    /// The node is cordoned or not ready.
    #[error("node `{node}` is not schedulable")]
    NodeUnschedulable {
        /// Node name.
        node: String,
    },
    /// Placing the task would exceed what the node has left.
    #[error(
        "task `{task}` of job `{job}` does not fit on node `{node}`: it requests {requested}, the node has {free} left"
    )]
    NodeFull {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
        /// Node name.
        node: String,
        /// What the task asks for.
        requested: String,
        /// What is left on the node.
        free: String,
    },
    /// A placement named a task that is already on a node, or named it twice.
    #[error("task `{task}` of job `{job}` is not pending (already placed, or named twice)")]
    TaskNotPending {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
    },
    /// A placement with no tasks.
    #[error("placement for job `{job}` names no tasks")]
    EmptyPlacement {
        /// Job id.
        job: String,
    },
    /// The task may not run on the node (its tolerations, node selector or required
    /// affinity exclude it).
    #[error(
        "task `{task}` of job `{job}` may not run on node `{node}`: the node is outside its eligible set"
    )]
    NotEligible {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
        /// Node name.
        node: String,
    },
    /// A migration's purpose is not a short tag.
    #[error("migration of job `{job}`: purpose {message}")]
    BadPurpose {
        /// Job id.
        job: String,
        /// What is wrong.
        message: String,
    },
    /// The job cannot checkpoint, so it cannot be moved or rescaled.
    #[error("job `{job}` cannot checkpoint, so it cannot be migrated, rescaled or preempted")]
    NotCheckpointable {
        /// Job id.
        job: String,
    },
    /// The job or task is not in a state that allows the action.
    #[error("job `{job}` is {phase}: {what}")]
    WrongPhase {
        /// Job id.
        job: String,
        /// Its phase.
        phase: String,
        /// What cannot be done.
        what: String,
    },
    /// A CPU weight outside (0, 1].
    #[error("CPU weight {weight} for task `{task}` of job `{job}` is outside (0, 1]")]
    WeightOutOfRange {
        /// Job id.
        job: String,
        /// Task name.
        task: String,
        /// The weight asked for.
        weight: f64,
    },
    /// A replica count outside min..max, or equal to the current one.
    #[error("job `{job}` cannot scale to {replicas} replicas: {why}")]
    BadReplicaCount {
        /// Job id.
        job: String,
        /// Count asked for.
        replicas: u32,
        /// Why not.
        why: String,
    },
    /// Two tasks of a job that asks for one task per node would share a node.
    #[error(
        "job `{job}` runs at most one task per node (its pod template has required anti-affinity against its own pods, or a host port): tasks {tasks} would share node `{node}`"
    )]
    SharedNode {
        /// Job id.
        job: String,
        /// The node.
        node: String,
        /// The tasks that would share it.
        tasks: String,
    },
    /// The job already had a move (migration, rescale, preemption) accepted in this
    /// decision, or a placement when this is a move: a job moves at most once per
    /// round, and never in the round it is placed.
    #[error(
        "job `{job}` already has a placement or a move (migration, rescale, preemption) in this decision; a job moves at most once per round, and not in a round that places it"
    )]
    ConflictingAction {
        /// Job id.
        job: String,
    },
    /// A valid disruption the disruption budget turns down (`disruption.rs`).
    #[error(transparent)]
    Disruption(#[from] DisruptionRefusal),
}

impl Rejection {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Rejection::UnknownJob { .. } => "unknown-job",
            Rejection::UnknownTask { .. } => "unknown-task",
            Rejection::UnknownNode { .. } => "unknown-node",
            Rejection::NodeUnschedulable { .. } => "node-unschedulable",
            Rejection::NodeFull { .. } => "node-full",
            Rejection::TaskNotPending { .. } => "task-not-pending",
            Rejection::EmptyPlacement { .. } => "empty-placement",
            Rejection::NotEligible { .. } => "not-eligible",
            Rejection::BadPurpose { .. } => "bad-purpose",
            Rejection::NotCheckpointable { .. } => "not-checkpointable",
            Rejection::WrongPhase { .. } => "wrong-phase",
            Rejection::WeightOutOfRange { .. } => "weight-out-of-range",
            Rejection::BadReplicaCount { .. } => "bad-replica-count",
            Rejection::ConflictingAction { .. } => "conflicting-action",
            Rejection::SharedNode { .. } => "shared-node",
            Rejection::Disruption(refusal) => refusal.metric_label(),
        }
    }
}

/// An action the validator turned down, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RejectedAction {
    /// The action as the policy sent it.
    pub action: Action,
    /// Why it was turned down.
    pub reason: Rejection,
}

/// Why one label was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error, serde::Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum LabelRejection {
    /// The job is not in the snapshot.
    #[error("label on unknown job `{job}`")]
    UnknownJob {
        /// Job id.
        job: String,
    },
    /// The key or value is not what a Kubernetes object label may hold.
    #[error("{message}")]
    Syntax {
        /// What is wrong, naming the key or value.
        message: String,
    },
}

impl LabelRejection {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LabelRejection::UnknownJob { .. } => "label-unknown-job",
            LabelRejection::Syntax { .. } => "label-syntax",
        }
    }
}

/// A label the validator turned down, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RejectedLabel {
    /// The label as the policy sent it.
    pub label: JobLabel,
    /// Why it was turned down.
    pub reason: LabelRejection,
}

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

/// The cluster as the accepted actions so far leave it. Nodes and the jobs the decision
/// names are indexed by name once, so checking a decision is linear in its actions,
/// even with thousands of placements on thousands of nodes; a round that touches two
/// jobs of 25,000 indexes two.
struct Account<'a> {
    jobs: FxHashMap<&'a str, &'a Job>,
    nodes: FxHashMap<&'a str, &'a Node>,
    /// Free room of the nodes the accepted actions changed; the others have what the
    /// snapshot says.
    free: FxHashMap<&'a str, Resources>,
    placed: HashSet<(&'a str, &'a str)>,
    /// Per job, (task, node) of the placements accepted so far in this decision.
    placed_on: FxHashMap<&'a str, Vec<(&'a str, &'a str)>>,
    /// Jobs with a move accepted so far in this decision.
    moved: FxHashSet<&'a str>,
    snapshot: &'a Snapshot,
    /// The nodes of each eligibility set a checked task named, by set id.
    eligible: FxHashMap<u32, FxHashSet<&'a str>>,
    /// The disruption budget of this decision.
    disruptions: Gate<'a>,
}

/// (task, node) of every task of `job` that is on a node.
fn where_tasks_run(job: &Job) -> impl Iterator<Item = (&str, &str)> {
    job.tasks
        .iter()
        .filter_map(|t| Some((t.name.as_str(), t.node.as_deref()?)))
}

/// Refuses a task of `moving` (task, node) on a node where another task of job `job_id`
/// stays (`staying`) or goes. Tasks that already share a node are left alone.
fn one_per_node<'n>(
    job_id: &str,
    staying: impl Iterator<Item = (&'n str, &'n str)>,
    moving: impl Iterator<Item = (&'n str, &'n str)>,
) -> Result<(), Rejection> {
    let mut taken: FxHashMap<&str, &str> = FxHashMap::default();
    for (task, node) in staying {
        taken.entry(node).or_insert(task);
    }
    for (task, node) in moving {
        if let Some(other) = taken.insert(node, task)
            && other != task
        {
            return Err(Rejection::SharedNode {
                job: job_id.into(),
                node: node.into(),
                tasks: format!("`{other}` and `{task}`"),
            });
        }
    }
    Ok(())
}

fn show(r: &Resources) -> String {
    format!(
        "{}m CPU, {} B memory, {} GPU",
        r.cpu_millis, r.memory_bytes, r.gpus
    )
}

impl<'a> Account<'a> {
    fn new(snapshot: &'a Snapshot, decision: &Decision, disruptions: Gate<'a>) -> Self {
        let named: FxHashSet<&str> = decision.actions.iter().map(|a| a.op.job()).collect();
        // No action, no job to index (and no id of the snapshot hashed).
        let jobs = if named.is_empty() {
            &[][..]
        } else {
            &snapshot.jobs[..]
        };
        Self {
            jobs: jobs
                .iter()
                .filter(|j| named.contains(j.id.as_str()))
                .map(|j| (j.id.as_str(), &**j))
                .rev()
                .collect(),
            nodes: snapshot
                .nodes
                .iter()
                .map(|n| (n.name.as_str(), &**n))
                .rev()
                .collect(),
            free: FxHashMap::default(),
            placed: HashSet::new(),
            placed_on: FxHashMap::default(),
            moved: FxHashSet::default(),
            snapshot,
            eligible: FxHashMap::default(),
            disruptions,
        }
    }

    /// Refuses `node` for `task` when the task's eligibility set leaves it out.
    fn check_eligible(&mut self, job: &str, task: &'a Task, node: &str) -> Result<(), Rejection> {
        let Some(set) = task.eligible else {
            return Ok(());
        };
        let snapshot = self.snapshot;
        let nodes = self.eligible.entry(set).or_insert_with(|| {
            snapshot
                .node_set(set)
                .map(|s| {
                    s.nodes
                        .iter()
                        .filter_map(|&i| snapshot.nodes.get(i as usize))
                        .map(|n| n.name.as_str())
                        .collect()
                })
                .unwrap_or_default()
        });
        if nodes.contains(node) {
            Ok(())
        } else {
            Err(Rejection::NotEligible {
                job: job.into(),
                task: task.name.clone(),
                node: node.into(),
            })
        }
    }

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
            Operation::Preempt { .. } => {
                // Its nodes are released only once the checkpoint is saved, so nothing
                // placed in this round can use them yet.
                self.claim_move(job_id)?;
                self.disruptions.admit(job)?;
                self.disruptions.disrupted();
                self.moved.insert(job_id);
                Ok(())
            }
        }
    }

    fn job(&self, id: &str) -> Option<&'a Job> {
        self.jobs.get(id).copied()
    }

    fn node_free(&self, node: &str) -> Result<Resources, Rejection> {
        let n = self.nodes.get(node).ok_or_else(|| Rejection::UnknownNode {
            node: node.to_string(),
        })?;
        if !n.schedulable {
            return Err(Rejection::NodeUnschedulable {
                node: node.to_string(),
            });
        }
        Ok(self.free_now(n))
    }

    fn free_now(&self, node: &Node) -> Resources {
        match self.free.get(node.name.as_str()) {
            Some(free) => *free,
            None => node.allocatable.saturating_minus(&node.requested),
        }
    }

    /// Charges `(node, request)` pairs all at once or not at all.
    fn charge_all(
        &mut self,
        job: &str,
        charges: &[(&'a str, &'a str, Resources)],
    ) -> Result<(), Rejection> {
        let mut trial: HashMap<&'a str, Resources> = HashMap::new();
        for (task, node, request) in charges {
            let free = match trial.get(node) {
                Some(f) => *f,
                None => self.node_free(node)?,
            };
            if !free.covers(request) {
                return Err(Rejection::NodeFull {
                    job: job.into(),
                    task: task.to_string(),
                    node: node.to_string(),
                    requested: show(request),
                    free: show(&free),
                });
            }
            trial.insert(node, free.saturating_minus(request));
        }
        self.free.extend(trial);
        Ok(())
    }

    fn place(&mut self, job_id: &'a str, assignments: &'a [Assignment]) -> Result<(), Rejection> {
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

    fn migrate(
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

    fn scale(
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
}
