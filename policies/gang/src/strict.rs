//! `mode = strict`: all-or-nothing gangs in submission-time order, with backfill that
//! cannot starve the head of the queue.
//!
//! A job's gang is all of its pending tasks (a fresh job: all its tasks, its "min
//! members"). It is placed in one `place` action onto the fewest nodes, or not at all,
//! so no partial gang ever holds resources. When pods are created role by role, the
//! snapshot shows only part of a gang: a job whose `tasks` label (its total task count)
//! exceeds the tasks it has so far waits, placing nothing, until the rest exist.

use switchyard_policy_sdk::{
    Action, Job, Operation, Placement, Snapshot, Task, TaskPhase,
    cluster::{Ledger, has_pending_tasks},
};

/// What happened to one waiting job this round.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Placed whole.
    Placed,
    /// Does not fit now; waits.
    Waiting,
    /// The head of the queue, starving: nothing behind it may go first.
    Blocking,
    /// Could not fit even on the empty cluster: never blocks anyone.
    NeverFits,
    /// Not every task of the gang exists yet (its `tasks` label says how many will).
    Incomplete,
}

/// The job's whole gang size from its `tasks` label, when it has a valid one.
pub fn declared_tasks(job: &Job) -> Option<usize> {
    job.labels
        .iter()
        .find(|l| l.key == "tasks")
        .and_then(|l| l.value.trim().parse().ok())
}

/// Why a job waits, with what its reason needs: the reason is written only if the
/// `wait` is sent (a queue of thousands waits every round, and the policy sends a job's
/// wait only when its outcome changes).
#[derive(Clone, Copy, Debug)]
pub enum Why<'a> {
    /// `exist` of its `total` tasks exist.
    Incomplete { exist: usize, total: usize },
    /// Behind `head`, which starves.
    Behind { head: &'a str },
    /// Does not fit even on the empty cluster.
    NeverFits { count: usize },
    /// Starving: waited `waited` seconds.
    Blocking { count: usize, waited: f64 },
    /// Does not fit yet.
    Waiting { count: usize },
}

impl Why<'_> {
    /// The `wait` action's reason.
    pub fn reason(&self, starve_after: f64) -> String {
        match *self {
            Why::Incomplete { exist, total } => {
                format!("{exist} of its {total} tasks exist so far; the gang is placed once all do")
            }
            Why::Behind { head } => {
                format!("queued behind {head}, which has waited longer than {starve_after}s")
            }
            Why::NeverFits { count } => {
                format!("gang of {count} task(s) does not fit even on the empty cluster")
            }
            Why::Blocking { count, waited } => format!(
                "gang of {count} task(s) does not fit; waited {waited:.0}s > {starve_after}s, so later jobs wait behind it"
            ),
            Why::Waiting { count } => format!(
                "gang of {count} task(s) does not fit yet; later jobs that fit may go ahead"
            ),
        }
    }
}

/// One round's result: the placements, then per waiting job (by its position in the
/// snapshot) its outcome and, unless placed, why it waits.
pub struct Round<'a> {
    /// `place` actions, in queue order.
    pub actions: Vec<Action>,
    /// `(snapshot position, outcome, why it waits)` in queue order; `why` is `None`
    /// for a placed job.
    pub outcomes: Vec<(usize, Outcome, Option<Why<'a>>)>,
}

/// Places waiting gangs. `starve_after` is how long (seconds since submission) the
/// oldest waiting job may be overtaken by later, smaller ones before the queue stops
/// behind it until it fits.
pub fn decide(snapshot: &Snapshot, starve_after: f64) -> (Vec<Action>, Vec<(String, Outcome)>) {
    let Round {
        mut actions,
        outcomes,
    } = round(snapshot, starve_after);
    let mut labelled = Vec::with_capacity(outcomes.len());
    for (at, outcome, why) in outcomes {
        let job = &snapshot.jobs[at];
        if let Some(why) = why {
            actions.push(wait(job, why.reason(starve_after)));
        }
        labelled.push((job.id.clone(), outcome));
    }
    (actions, labelled)
}

/// What a round needs of a job before it looks at its tasks: read once from the job,
/// so a policy that keeps it per job reads a queued job again only when it changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// It has a task not yet on a node: it is queued.
    pub pending: bool,
    /// Its `tasks` label names more tasks than exist: `(exist, total)`.
    pub incomplete: Option<(usize, usize)>,
}

impl Facts {
    /// `job`'s facts.
    pub fn of(job: &Job) -> Self {
        let pending = has_pending_tasks(job);
        let exist = job.tasks.len();
        Self {
            pending,
            incomplete: pending
                .then(|| declared_tasks(job))
                .flatten()
                .filter(|&total| exist < total)
                .map(|total| (exist, total)),
        }
    }
}

/// [`decide`], with the placements and the outcomes apart and no reason written for a
/// `wait`: a round costs no allocation per waiting job.
pub fn round(snapshot: &Snapshot, starve_after: f64) -> Round<'_> {
    let facts: Vec<Facts> = snapshot.jobs.iter().map(Facts::of).collect();
    round_with(snapshot, starve_after, &facts)
}

/// [`round`], with each job's [`Facts`] given (`facts[i]` for `snapshot.jobs[i]`).
pub fn round_with<'a>(snapshot: &'a Snapshot, starve_after: f64, facts: &[Facts]) -> Round<'a> {
    let mut ledger = Ledger::new(snapshot);
    let mut empty = ledger.emptied();
    let mut queue: Vec<usize> = (0..snapshot.jobs.len())
        .filter(|&i| facts[i].pending)
        .collect();
    // Stable, and the snapshot lists jobs mostly by arrival: nearly one pass.
    queue.sort_by(|&a, &b| {
        snapshot.jobs[a]
            .submit_time
            .total_cmp(&snapshot.jobs[b].submit_time)
    });
    let mut actions = Vec::new();
    let mut outcomes = Vec::with_capacity(queue.len());
    let mut blocked_by: Option<&str> = None;
    let mut tasks: Vec<&Task> = Vec::new();
    for at in queue {
        let job = &snapshot.jobs[at];
        if let Some((exist, total)) = facts[at].incomplete {
            // Not a blocker either: a gang that does not exist yet cannot be waited for.
            let why = Why::Incomplete { exist, total };
            outcomes.push((at, Outcome::Incomplete, Some(why)));
            continue;
        }
        if let Some(head) = blocked_by {
            outcomes.push((at, Outcome::Waiting, Some(Why::Behind { head })));
            continue;
        }
        tasks.clear();
        tasks.extend(
            job.tasks
                .iter()
                .filter(|t| t.phase == TaskPhase::Pending && t.node.is_none()),
        );
        if let Some(assignments) = ledger.pack_gang_of(job, &tasks) {
            let nodes = distinct(assignments.iter().map(|a| a.node.as_str())).join(", ");
            let count = nodes.split(", ").count();
            actions.push(Action {
                op: Operation::Place(Placement {
                    job: job.id.clone(),
                    assignments,
                }),
                reason: format!(
                    "whole gang of {} task(s) fits on {} node(s): {}",
                    tasks.len(),
                    count,
                    nodes
                ),
            });
            outcomes.push((at, Outcome::Placed, None));
            continue;
        }
        let count = tasks.len();
        if !empty.could_pack_of(job, &tasks) {
            outcomes.push((at, Outcome::NeverFits, Some(Why::NeverFits { count })));
            continue;
        }
        let waited = snapshot.time - job.submit_time;
        if waited > starve_after {
            blocked_by = Some(&job.id);
            let why = Why::Blocking { count, waited };
            outcomes.push((at, Outcome::Blocking, Some(why)));
        } else {
            outcomes.push((at, Outcome::Waiting, Some(Why::Waiting { count })));
        }
    }
    Round { actions, outcomes }
}

fn wait(job: &Job, reason: String) -> Action {
    Action {
        op: Operation::Wait(job.id.clone()),
        reason,
    }
}

fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::cluster::ONE_TASK_PER_NODE_LABEL;
    use switchyard_policy_sdk::testing::*;

    fn placed(actions: &[Action]) -> Vec<(String, usize)> {
        actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Place(p) => Some((p.job.clone(), p.assignments.len())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_gang_that_does_not_fit_places_nothing_at_all() {
        // 3 tasks of 2 CPUs on two 3-CPU nodes: two would fit, the gang does not.
        let s = snapshot(
            0.0,
            vec![node("a", 3000), node("b", 3000)],
            vec![job("g").requests(2000, 0).distributed(1, 2, 2, 2)],
        );
        let (actions, outcomes) = decide(&s, 300.0);
        assert!(placed(&actions).is_empty());
        assert_eq!(outcomes, [("g".to_string(), Outcome::NeverFits)]);
        // Fits on the empty cluster but not now: one task would fit, none is placed.
        let nodes = vec![node("a", 4000).requested(res(3000, 0)), node("b", 4000)];
        let s = snapshot(
            0.0,
            nodes,
            vec![job("g").requests(2000, 0).distributed(1, 2, 2, 2)],
        );
        let (actions, outcomes) = decide(&s, 300.0);
        assert!(placed(&actions).is_empty());
        assert_eq!(outcomes, [("g".to_string(), Outcome::Waiting)]);
    }

    #[test]
    fn a_gang_whose_pods_are_not_all_created_waits_for_the_rest() {
        let nodes = vec![node("a", 8000)];
        // 1 ps + 2 workers exist; the label says 5 tasks will.
        let partial = job("g").distributed(1, 2, 2, 2).label("tasks", "5");
        let (actions, outcomes) = decide(&snapshot(0.0, nodes.clone(), vec![partial]), 300.0);
        assert!(placed(&actions).is_empty());
        assert_eq!(outcomes, [("g".to_string(), Outcome::Incomplete)]);
        let whole = job("g").distributed(1, 4, 4, 4).label("tasks", "5");
        let (actions, _) = decide(&snapshot(0.0, nodes, vec![whole]), 300.0);
        assert_eq!(placed(&actions), [("g".to_string(), 5)]);
    }

    #[test]
    fn a_gang_that_fits_goes_whole_in_one_action_onto_the_fewest_nodes() {
        let s = snapshot(
            0.0,
            vec![node("a", 2000), node("b", 4000)],
            vec![job("g").distributed(1, 3, 3, 3)],
        );
        let (actions, _) = decide(&s, 300.0);
        assert_eq!(placed(&actions), [("g".to_string(), 4)]);
        let Operation::Place(p) = &actions[0].op else {
            panic!()
        };
        assert!(p.assignments.iter().all(|x| x.node == "b"), "{p:?}");
    }

    #[test]
    fn jobs_are_taken_by_submit_time_not_snapshot_order() {
        let s = snapshot(
            0.0,
            vec![node("a", 2000)],
            vec![
                job("late").submitted_at(5.0).requests(2000, 0),
                job("early").submitted_at(1.0).requests(2000, 0),
            ],
        );
        assert_eq!(placed(&decide(&s, 300.0).0), [("early".to_string(), 1)]);
    }

    #[test]
    fn a_later_job_that_fits_goes_ahead_of_a_young_blocked_one() {
        let nodes = vec![node("a", 4000).requested(res(2000, 0))];
        let jobs = vec![
            job("big").submitted_at(0.0).requests(3000, 0),
            job("small").submitted_at(1.0),
        ];
        let (actions, outcomes) = decide(&snapshot(10.0, nodes, jobs), 300.0);
        assert_eq!(placed(&actions), [("small".to_string(), 1)]);
        assert_eq!(outcomes[0], ("big".to_string(), Outcome::Waiting));
    }

    #[test]
    fn a_starving_head_stops_later_jobs_from_going_ahead() {
        let nodes = vec![node("a", 4000).requested(res(2000, 0))];
        let jobs = vec![
            job("big").submitted_at(0.0).requests(3000, 0),
            job("small").submitted_at(1.0),
        ];
        let (actions, outcomes) = decide(&snapshot(301.0, nodes, jobs), 300.0);
        assert!(placed(&actions).is_empty());
        assert_eq!(outcomes[0], ("big".to_string(), Outcome::Blocking));
        assert!(
            actions[1].reason.contains("behind big"),
            "{}",
            actions[1].reason
        );
    }

    #[test]
    fn a_gang_whose_tasks_may_not_share_a_node_and_outnumber_the_nodes_never_fits_and_never_blocks()
    {
        // Four one-CPU tasks, one to a node, on three roomy nodes: packed together they
        // would fit on one, apart they never can; starving, the job must not block the
        // queue behind it.
        let apart = job("apart")
            .distributed(1, 3, 3, 3)
            .label(ONE_TASK_PER_NODE_LABEL, "true");
        let nodes = vec![node("a", 8000), node("b", 8000), node("c", 8000)];
        let jobs = vec![apart, job("small").submitted_at(1.0)];
        let (actions, outcomes) = decide(&snapshot(1000.0, nodes.clone(), jobs), 300.0);
        assert_eq!(outcomes[0], ("apart".to_string(), Outcome::NeverFits));
        assert_eq!(placed(&actions), [("small".to_string(), 1)]);
        // With a fourth node it fits, one task on each.
        let mut nodes = nodes;
        nodes.push(node("d", 8000));
        let apart = job("apart")
            .distributed(1, 3, 3, 3)
            .label(ONE_TASK_PER_NODE_LABEL, "true");
        let (actions, _) = decide(&snapshot(0.0, nodes, vec![apart]), 300.0);
        let Operation::Place(p) = &actions[0].op else {
            panic!("{actions:?}")
        };
        assert_eq!(
            distinct(p.assignments.iter().map(|a| a.node.as_str())).len(),
            4
        );
    }
}
