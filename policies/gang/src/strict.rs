//! `mode = strict`: all-or-nothing minimum gangs in submission-time order, with backfill
//! that cannot starve the head of the queue.
//!
//! A job's minimum gang is every task of its non-scalable roles plus `replicas.min` tasks
//! of its scalable role (Volcano's and coscheduling's "min members"); tasks already
//! bound count towards it. It is placed in one `place` action onto the fewest nodes, or
//! not at all, so no partial gang ever holds resources. The replicas above the minimum
//! (a job submitted with more than `replicas.min` of its scalable role) are placed after
//! every minimum gang of the round, one by one as they fit, preferring the nodes the job
//! is on: in the same round as their minimum gang when there is room, else later. They
//! never hold back a minimum gang: they only get what the round's gangs left, and
//! nothing while a starving gang waits at the head of the queue. When pods are created
//! role by role, the snapshot shows only part of a gang: a job whose `tasks` label (its
//! total task count) says members of its minimum gang do not exist yet waits, placing
//! nothing, until they do.

use switchyard_policy_sdk::{
    Action, Assignment, Job, Operation, Placement, Snapshot, Task, TaskPhase,
    cluster::{Ledger, pending_tasks},
};

/// What happened to one waiting job this round.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Its minimum gang was placed whole (with as many extra replicas as fit).
    Placed,
    /// Does not fit now; waits.
    Waiting,
    /// The head of the queue, starving: nothing behind it may go first.
    Blocking,
    /// Could not fit even on the empty cluster: never blocks anyone.
    NeverFits,
    /// Not every member of its minimum gang exists yet (its `tasks` label says how many
    /// tasks the job has).
    Incomplete,
    /// Its minimum gang already runs; extra replicas were placed this round.
    ExtrasPlaced,
    /// Its minimum gang already runs; its extra replicas wait for room.
    ExtrasWaiting,
}

/// The job's whole gang size from its `tasks` label, when it has a valid one.
pub fn declared_tasks(job: &Job) -> Option<usize> {
    job.labels
        .iter()
        .find(|l| l.key == "tasks")
        .and_then(|l| l.value.trim().parse().ok())
}

/// A job's pending tasks, split into what must go together and what may follow.
#[derive(Debug, Default)]
pub struct Gang<'a> {
    /// The pending members of the minimum gang: every pending task of a non-scalable
    /// role, and the scalable role's pending tasks up to `replicas.min` bound ones.
    /// Empty once the minimum gang runs.
    pub minimum: Vec<&'a Task>,
    /// The pending replicas above the minimum.
    pub extras: Vec<&'a Task>,
}

/// Splits `job`'s pending tasks into its minimum gang and its extra replicas.
pub fn gang(job: &Job) -> Gang<'_> {
    let scalable = |t: &Task| t.role == job.replicas.role;
    // Running or restarting: it holds its place in the gang.
    let bound = job
        .tasks
        .iter()
        .filter(|t| scalable(t) && (t.node.is_some() || t.phase != TaskPhase::Pending))
        .count();
    let mut missing = (job.replicas.min as usize).saturating_sub(bound);
    let mut out = Gang::default();
    for task in pending_tasks(job) {
        if !scalable(task) {
            out.minimum.push(task);
        } else if missing > 0 {
            missing -= 1;
            out.minimum.push(task);
        } else {
            out.extras.push(task);
        }
    }
    out
}

/// How many members of `job`'s minimum gang do not exist yet, from its `tasks` label
/// (the job's task count at submission: its non-scalable tasks plus
/// `replicas.current`). Without the label, none: the gang is whatever tasks exist.
pub fn missing_members(job: &Job) -> usize {
    let Some(total) = declared_tasks(job) else {
        return 0;
    };
    let scalable = job
        .tasks
        .iter()
        .filter(|t| t.role == job.replicas.role)
        .count();
    let fixed = job.tasks.len() - scalable;
    let expected_fixed = total.saturating_sub(job.replicas.current as usize);
    expected_fixed.saturating_sub(fixed) + (job.replicas.min as usize).saturating_sub(scalable)
}

/// Places waiting gangs, then extra replicas. `starve_after` is how long (seconds since
/// submission) the oldest waiting job may be overtaken by later, smaller ones before the
/// queue stops behind it until it fits.
pub fn decide(snapshot: &Snapshot, starve_after: f64) -> (Vec<Action>, Vec<(String, Outcome)>) {
    let mut ledger = Ledger::new(snapshot);
    let mut queue: Vec<&Job> = snapshot
        .jobs
        .iter()
        .filter(|j| !pending_tasks(j).is_empty())
        .collect();
    queue.sort_by(|a, b| a.submit_time.total_cmp(&b.submit_time));
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    // Per job in queue order: its action so far (a placement is completed by pass 2).
    let mut decided: Vec<(&Job, Decided)> = Vec::new();
    let mut blocked_by: Option<&str> = None;

    // Pass 1: minimum gangs, all or nothing, oldest first.
    for job in queue {
        let missing = missing_members(job);
        if missing > 0 {
            // Not a blocker either: a gang that does not exist yet cannot be waited for.
            outcomes.push((job.id.clone(), Outcome::Incomplete));
            decided.push((
                job,
                Decided::Wait(format!(
                    "{missing} member(s) of its minimum gang do not exist yet; it is placed once they do"
                )),
            ));
            continue;
        }
        let gang = gang(job);
        if gang.minimum.is_empty() {
            // Its minimum gang runs: only extras are pending, for pass 2.
            outcomes.push((job.id.clone(), Outcome::ExtrasWaiting));
            decided.push((job, Decided::Extras));
            continue;
        }
        if let Some(head) = blocked_by {
            outcomes.push((job.id.clone(), Outcome::Waiting));
            decided.push((
                job,
                Decided::Wait(format!(
                    "queued behind {head}, which has waited longer than {starve_after}s"
                )),
            ));
            continue;
        }
        if let Some(assignments) = ledger.pack_gang(&gang.minimum) {
            outcomes.push((job.id.clone(), Outcome::Placed));
            decided.push((job, Decided::Gang(assignments)));
            continue;
        }
        let size = gang.minimum.len();
        if Ledger::from_nodes(&empty_cluster(snapshot))
            .pack_gang(&gang.minimum)
            .is_none()
        {
            outcomes.push((job.id.clone(), Outcome::NeverFits));
            decided.push((
                job,
                Decided::Wait(format!(
                    "minimum gang of {size} task(s) does not fit even on the empty cluster"
                )),
            ));
            continue;
        }
        let waited = snapshot.time - job.submit_time;
        if waited > starve_after {
            blocked_by = Some(&job.id);
            outcomes.push((job.id.clone(), Outcome::Blocking));
            decided.push((job, Decided::Wait(format!(
                "minimum gang of {size} task(s) does not fit; waited {waited:.0}s > {starve_after}s, so later jobs and extra replicas wait behind it"
            ))));
        } else {
            outcomes.push((job.id.clone(), Outcome::Waiting));
            decided.push((
                job,
                Decided::Wait(format!(
                    "minimum gang of {size} task(s) does not fit yet; later jobs that fit may go ahead"
                )),
            ));
        }
    }

    // Pass 2: extra replicas of jobs whose minimum gang runs or was just placed, oldest
    // job first, with what the gangs left; none while a starving gang waits.
    let mut actions = Vec::with_capacity(decided.len());
    for ((job, decision), outcome) in decided.into_iter().zip(outcomes.iter_mut()) {
        let placed_now = match decision {
            Decided::Gang(assignments) => assignments,
            Decided::Extras => Vec::new(),
            Decided::Wait(reason) => {
                actions.push(wait(job, reason));
                continue;
            }
        };
        let extras = gang(job).extras;
        let (more, waiting) = match blocked_by {
            Some(_) => (Vec::new(), extras.len()),
            None => place_extras(&mut ledger, job, &placed_now, &extras),
        };
        let extras_note = match blocked_by {
            _ if extras.is_empty() => String::new(),
            Some(head) => format!(
                "{} extra replica(s) wait while {head} starves at the head",
                extras.len()
            ),
            None if waiting == 0 => format!("its {} extra replica(s) fit too", more.len()),
            None => format!(
                "{} of its {} extra replica(s) fit, {waiting} wait for room",
                more.len(),
                extras.len()
            ),
        };
        if placed_now.is_empty() && more.is_empty() {
            actions.push(wait(job, format!("minimum gang runs; {extras_note}")));
            continue;
        }
        let reason = if placed_now.is_empty() {
            outcome.1 = Outcome::ExtrasPlaced;
            let nodes = distinct(more.iter().map(|a| a.node.as_str()));
            format!("minimum gang runs; {extras_note}, on {}", nodes.join(", "))
        } else {
            let nodes = distinct(placed_now.iter().map(|a| a.node.as_str()));
            let mut reason = format!(
                "minimum gang of {} task(s) fits on {} node(s): {}",
                placed_now.len(),
                nodes.len(),
                nodes.join(", ")
            );
            if !extras_note.is_empty() {
                reason.push_str("; ");
                reason.push_str(&extras_note);
            }
            reason
        };
        let mut assignments = placed_now;
        assignments.extend(more);
        actions.push(Action {
            op: Operation::Place(Placement {
                job: job.id.clone(),
                assignments,
            }),
            reason,
        });
    }
    (actions, outcomes)
}

/// What pass 1 decided for a job.
enum Decided {
    /// Its minimum gang goes, on these nodes.
    Gang(Vec<Assignment>),
    /// Its minimum gang runs already; extras only.
    Extras,
    /// Nothing for it this round, and why.
    Wait(String),
}

/// Places `extras` one by one where they fit, on the job's nodes first (those it runs
/// on, then those its gang was just given), else the first node with room. Returns the
/// assignments and how many extras are left waiting.
fn place_extras(
    ledger: &mut Ledger,
    job: &Job,
    placed_now: &[Assignment],
    extras: &[&Task],
) -> (Vec<Assignment>, usize) {
    let mut home: Vec<String> = job.tasks.iter().filter_map(|t| t.node.clone()).collect();
    home.extend(placed_now.iter().map(|a| a.node.clone()));
    let mut assignments = Vec::new();
    for task in extras {
        let node = home
            .iter()
            .find(|n| ledger.fits(n, &task.requests))
            .cloned()
            .or_else(|| {
                ledger
                    .nodes_fitting(&task.requests)
                    .first()
                    .map(|n| n.to_string())
            });
        if let Some(node) = node
            && ledger.charge(&node, &task.requests)
        {
            home.push(node.clone());
            assignments.push(Assignment {
                task: task.name.clone(),
                node,
            });
        }
    }
    let waiting = extras.len() - assignments.len();
    (assignments, waiting)
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

fn empty_cluster(snapshot: &Snapshot) -> Vec<switchyard_policy_sdk::Node> {
    use switchyard_policy_sdk::cluster::ResourcesExt;
    snapshot
        .nodes
        .iter()
        .cloned()
        .map(|mut n| {
            n.requested = switchyard_policy_sdk::Resources::zero();
            n
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// Tasks each job is given this round, by job.
    fn assigned(actions: &[Action], job: &str) -> Vec<(String, String)> {
        actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Place(p) if p.job == job => Some(p.assignments.clone()),
                _ => None,
            })
            .flatten()
            .map(|a| (a.task, a.node))
            .collect()
    }

    /// One ps and four workers of 1 CPU, at least two workers: min gang ps + 2 workers.
    fn elastic(id: &str) -> Job {
        job(id).distributed(1, 4, 2, 4)
    }

    #[test]
    fn the_minimum_gang_is_the_fixed_roles_plus_min_replicas_and_bound_ones_count() {
        let fresh = elastic("e");
        let g = gang(&fresh);
        let names = |ts: &[&Task]| ts.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&g.minimum), ["ps-0", "worker-0", "worker-1"]);
        assert_eq!(names(&g.extras), ["worker-2", "worker-3"]);
        // Running ps and one worker: one more worker completes the minimum.
        let partly = elastic("e").task_on("ps-0", "a").task_on("worker-3", "a");
        let g = gang(&partly);
        assert_eq!(names(&g.minimum), ["worker-0"]);
        assert_eq!(names(&g.extras), ["worker-1", "worker-2"]);
    }

    #[test]
    fn the_minimum_gang_goes_when_it_fits_and_extras_only_as_far_as_room_allows() {
        // Room for 4 of the 5 tasks: ps + 2 workers (the minimum) and one extra.
        let s = snapshot(0.0, vec![node("a", 4000)], vec![elastic("e")]);
        let (actions, outcomes) = decide(&s, 300.0);
        assert_eq!(outcomes, [("e".to_string(), Outcome::Placed)]);
        let tasks: Vec<String> = assigned(&actions, "e").into_iter().map(|a| a.0).collect();
        assert_eq!(tasks, ["ps-0", "worker-0", "worker-1", "worker-2"]);
        assert_eq!(
            actions.len(),
            1,
            "one place action for the gang and its extras"
        );
        assert!(
            actions[0]
                .reason
                .contains("1 of its 2 extra replica(s) fit, 1 wait"),
            "{}",
            actions[0].reason
        );
        // Room for exactly the minimum: no extra.
        let s = snapshot(0.0, vec![node("a", 3000)], vec![elastic("e")]);
        let (actions, _) = decide(&s, 300.0);
        assert_eq!(assigned(&actions, "e").len(), 3);
    }

    #[test]
    fn extras_of_a_running_gang_are_placed_later_as_room_appears() {
        let running = elastic("e")
            .task_on("ps-0", "a")
            .task_on("worker-0", "a")
            .task_on("worker-1", "a");
        // Node a is full; b has room for one worker.
        let nodes = vec![node("a", 3000), node("b", 1000)];
        let (actions, outcomes) = decide(&snapshot(50.0, nodes, vec![running.clone()]), 300.0);
        assert_eq!(outcomes, [("e".to_string(), Outcome::ExtrasPlaced)]);
        assert_eq!(
            assigned(&actions, "e"),
            [("worker-2".to_string(), "b".to_string())]
        );
        // No room at all: the extras wait, and the job is labelled so.
        let (actions, outcomes) =
            decide(&snapshot(50.0, vec![node("a", 3000)], vec![running]), 300.0);
        assert_eq!(outcomes, [("e".to_string(), Outcome::ExtrasWaiting)]);
        assert!(matches!(&actions[0].op, Operation::Wait(j) if j == "e"));
    }

    #[test]
    fn a_minimum_gang_that_does_not_fit_places_nothing_not_even_its_extras_room() {
        // Room for 2 tasks: ps + 1 worker would fit, the minimum (3 tasks) does not.
        let nodes = vec![node("a", 4000).requested(res(2000, 0))];
        let (actions, outcomes) = decide(&snapshot(0.0, nodes, vec![elastic("e")]), 300.0);
        assert!(placed(&actions).is_empty());
        assert_eq!(outcomes, [("e".to_string(), Outcome::Waiting)]);
    }

    #[test]
    fn extras_never_take_the_room_a_later_jobs_minimum_gang_needs() {
        // 5 CPUs: e's minimum (3) then f's (2 tasks: 1 ps + 1 worker); e's extras get
        // nothing although e comes first.
        let jobs = vec![
            elastic("e"),
            job("f").submitted_at(1.0).distributed(1, 1, 1, 1),
        ];
        let (actions, outcomes) = decide(&snapshot(0.0, vec![node("a", 5000)], jobs), 300.0);
        assert_eq!(
            outcomes,
            [
                ("e".to_string(), Outcome::Placed),
                ("f".to_string(), Outcome::Placed)
            ]
        );
        assert_eq!(assigned(&actions, "e").len(), 3);
        assert_eq!(assigned(&actions, "f").len(), 2);
    }

    #[test]
    fn a_starving_head_holds_back_later_gangs_and_every_extra_replica() {
        // `big` (3 CPUs) has waited past starve-after on a node with 2 CPUs free; the
        // running elastic job's extras and the later small job would fit, but wait.
        let running = elastic("e")
            .submitted_at(0.0)
            .task_on("ps-0", "a")
            .task_on("worker-0", "a")
            .task_on("worker-1", "a");
        let jobs = vec![
            running,
            job("big").submitted_at(1.0).requests(3000, 0),
            job("small").submitted_at(2.0),
        ];
        let nodes = vec![node("a", 5000)];
        let (actions, outcomes) = decide(&snapshot(400.0, nodes, jobs), 300.0);
        assert!(placed(&actions).is_empty(), "{actions:?}");
        assert_eq!(
            outcomes,
            [
                ("e".to_string(), Outcome::ExtrasWaiting),
                ("big".to_string(), Outcome::Blocking),
                ("small".to_string(), Outcome::Waiting)
            ]
        );
        assert!(
            actions[0].reason.contains("while big starves"),
            "{}",
            actions[0].reason
        );
    }

    #[test]
    fn a_gang_is_complete_once_its_minimum_exists_though_extras_may_come_later() {
        // Label: 1 ps + 4 workers = 5 tasks; min 2 workers. Only the ps exists: waits.
        let mut only_ps = elastic("e").label("tasks", "5");
        only_ps.tasks.retain(|t| t.role == "ps");
        assert_eq!(missing_members(&only_ps), 2);
        let (actions, outcomes) =
            decide(&snapshot(0.0, vec![node("a", 8000)], vec![only_ps]), 300.0);
        assert!(placed(&actions).is_empty());
        assert_eq!(outcomes, [("e".to_string(), Outcome::Incomplete)]);
        // The ps and two workers exist: that is the minimum gang, it goes.
        let mut three = elastic("e").label("tasks", "5");
        three.tasks.truncate(3);
        assert_eq!(missing_members(&three), 0);
        let (actions, _) = decide(&snapshot(0.0, vec![node("a", 8000)], vec![three]), 300.0);
        assert_eq!(assigned(&actions, "e").len(), 3);
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
}
