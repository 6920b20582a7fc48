//! Initial placements that several policies share: kube-scheduler's least-allocated
//! pod-by-pod binding (used by policies whose paper does not place at all, e.g.
//! FlowCon) and one job's place in SpeCon's even spread (also the "DS" baseline).
//!
//! Both charge a [`Ledger`] the caller owns, so a policy that also migrates in the same
//! round never counts the same free capacity twice. Nothing here is kept between calls:
//! the walk of the even spread over the queue, with its arrival numbers, is
//! [`crate::spread::EvenSpread`], which the policy stores in its state blob, and which
//! places each job with `place_even`.

use crate::cluster::{
    Ledger, ResourcesExt, has_pending_tasks, nodes_of, one_task_per_node, pending_tasks,
};
use crate::{Action, Assignment, Job, Operation, Placement, Resources, Snapshot, Task};

/// One job's place in the even spread ([`crate::spread::EvenSpread`]).
pub(crate) fn place_even(
    job: &Job,
    pending: &[&Task],
    k: u64,
    workers: &[&str],
    ledger: &mut Ledger,
) -> Option<Action> {
    // Neither "join its other tasks" nor "all on one worker" is allowed for such a job.
    if one_task_per_node(job) {
        let assignments = ledger.pack_gang_of(job, pending)?;
        let why = "its tasks may not share a node: one to a node, first fit".to_string();
        return Some(place(job, assignments, why));
    }
    if let Some(home) = nodes_of(job).first().map(|n| n.to_string())
        && let Some(assignments) = charge_all_on(ledger, pending, &home)
    {
        return Some(place(
            job,
            assignments,
            format!("joins its other tasks on {home}"),
        ));
    }
    // A gang that cannot be packed anywhere fits on no single worker either.
    if ledger.known_not_to_fit(pending) {
        return None;
    }
    let n = workers.len();
    let start = (k % n as u64) as usize;
    for offset in 0..n {
        let worker = workers[(start + offset) % n];
        if let Some(assignments) = charge_all_on(ledger, pending, worker) {
            let why = if offset == 0 {
                format!("arrival #{k} -> worker {start} of {n} ({worker})")
            } else {
                format!(
                    "arrival #{k} -> worker {start} of {n} ({}) has no room; next with room: {worker}",
                    workers[start]
                )
            };
            return Some(place(job, assignments, why));
        }
    }
    let assignments = ledger.pack_gang_of(job, pending)?;
    Some(place(
        job,
        assignments,
        format!("arrival #{k} fits on no single worker; packed onto the fewest nodes"),
    ))
}

/// Charges every task in `tasks` to `node`, or nothing when they do not all fit.
fn charge_all_on(ledger: &mut Ledger, tasks: &[&Task], node: &str) -> Option<Vec<Assignment>> {
    ledger.charge_tasks(node, tasks).then(|| {
        tasks
            .iter()
            .map(|task| Assignment {
                task: task.name.clone(),
                node: node.to_string(),
            })
            .collect()
    })
}

fn place(job: &Job, assignments: Vec<Assignment>, reason: String) -> Action {
    Action {
        op: Operation::Place(Placement {
            job: job.id.clone(),
            assignments,
        }),
        reason,
    }
}

/// How [`pod_by_pod`] ranks the nodes a pod fits on (kube-scheduler's
/// `NodeResourcesFit` strategies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoring {
    /// Most free capacity left wins: spread (kube-scheduler's default).
    LeastAllocated,
    /// Least free capacity left wins: bin packing.
    MostAllocated,
}

impl Scoring {
    fn name(self) -> &'static str {
        match self {
            Scoring::LeastAllocated => "least-allocated",
            Scoring::MostAllocated => "most-allocated",
        }
    }
}

/// kube-scheduler's default: pod by pod in job submission order, each onto the best
/// node by `scoring`. No gang. Like kube-scheduler, a large cluster is sampled: a pod's
/// search stops once it found [`feasible_nodes_to_find`] nodes it fits on, and the next
/// pod's search starts where the previous one stopped, so placing a backlog of 10,000
/// pods on 5,000 nodes scores 500 nodes per pod rather than all of them. Up to 100 nodes
/// every node is scored and ties go to the first node (kube-scheduler breaks ties at
/// random).
///
/// A pod that fits on no node is remembered for the round: placing only shrinks the
/// nodes' room, so a later pod asking at least as much of every resource cannot fit
/// either and is skipped without a search. The outcome is the same as searching; a long
/// queue behind a full cluster costs a comparison per pod instead of a pass over every
/// node.
pub fn pod_by_pod(snapshot: &Snapshot, ledger: &mut Ledger, scoring: Scoring) -> Vec<Action> {
    pod_by_pod_placing(snapshot, ledger, scoring).0
}

/// [`pod_by_pod`], with the snapshot position of the job of each action.
pub fn pod_by_pod_placing(
    snapshot: &Snapshot,
    ledger: &mut Ledger,
    scoring: Scoring,
) -> (Vec<Action>, Vec<usize>) {
    let nodes = ledger.node_count();
    let to_find = feasible_nodes_to_find(nodes);
    let mut start = 0;
    let mut actions = Vec::new();
    // Requests (and the eligibility set they were limited to) that found no node: a
    // task asking at least as much of the same set finds none either.
    let mut fit_nowhere: Vec<(Resources, Option<u32>)> = Vec::new();
    let mut positions = Vec::new();
    for (at, job) in snapshot
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| has_pending_tasks(j))
    {
        // A job whose tasks may not share a node skips the nodes it is on already.
        let apart = one_task_per_node(job);
        let mut taken: Vec<String> = match apart {
            true => nodes_of(job).into_iter().map(str::to_string).collect(),
            false => Vec::new(),
        };
        for task in pending_tasks(job) {
            if !apart
                && fit_nowhere
                    .iter()
                    .any(|(failed, set)| *set == task.eligible && task.requests.covers(failed))
            {
                continue;
            }
            let mut looked_at = nodes;
            let mut best: Option<(&str, f64)> = None;
            let rooms = ledger
                .rooms_for_from(task, start)
                .filter(|(_, room)| !taken.iter().any(|t| t == room.name));
            for (found, (step, room)) in rooms.enumerate() {
                let spread = room.least_allocated_score(&task.requests);
                let score = match scoring {
                    Scoring::LeastAllocated => spread,
                    Scoring::MostAllocated => 100.0 - spread,
                };
                if best.is_none_or(|(_, b)| score > b) {
                    best = Some((room.name, score));
                }
                if found + 1 == to_find {
                    looked_at = step + 1;
                    break;
                }
            }
            if to_find < nodes {
                start = (start + looked_at) % nodes;
            }
            let Some((node, score)) = best.map(|(node, score)| (node.to_string(), score)) else {
                // A failed search looked at every node, so `start` has not moved. A job
                // kept apart may have skipped nodes another task could still use.
                if !apart {
                    fit_nowhere.push((task.requests, task.eligible));
                }
                continue;
            };
            if apart {
                taken.push(node.clone());
            }
            ledger.charge(&node, &task.requests);
            let reason = format!(
                "{} fits on {node}, {} score {score:.0}",
                task.name,
                scoring.name()
            );
            let assignment = Assignment {
                task: task.name.clone(),
                node,
            };
            actions.push(place(job, vec![assignment], reason));
            positions.push(at);
        }
    }
    (actions, positions)
}

/// kube-scheduler's `numFeasibleNodesToFind` with the default (adaptive)
/// `percentageOfNodesToScore`: every node up to 100; beyond, 50 % less one point per
/// 125 nodes, at least 5 %, and never fewer than 100 nodes.
pub fn feasible_nodes_to_find(nodes: usize) -> usize {
    const MIN_FEASIBLE_NODES: usize = 100;
    const MIN_PERCENTAGE: usize = 5;
    if nodes <= MIN_FEASIBLE_NODES {
        return nodes;
    }
    let percentage = 50usize.saturating_sub(nodes / 125).max(MIN_PERCENTAGE);
    (nodes * percentage / 100).max(MIN_FEASIBLE_NODES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Operation;
    use crate::spread::EvenSpread;
    use crate::testing::{job, node, snapshot};

    fn placed_on(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match &a.op {
                Operation::Place(p) => p.assignments[0].node.clone(),
                other => panic!("not a placement: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn the_nodes_to_score_follow_kube_schedulers_adaptive_percentage() {
        assert_eq!(feasible_nodes_to_find(64), 64);
        assert_eq!(feasible_nodes_to_find(100), 100);
        assert_eq!(feasible_nodes_to_find(300), 144); // 48 %
        assert_eq!(feasible_nodes_to_find(1_000), 420); // 42 %
        assert_eq!(feasible_nodes_to_find(5_000), 500); // 10 %
        assert_eq!(feasible_nodes_to_find(20_000), 1_000); // floor of 5 %
    }

    #[test]
    fn a_job_kept_one_task_per_node_gets_a_node_for_each_task_or_waits() {
        use crate::cluster::ONE_TASK_PER_NODE_LABEL;
        use crate::testing::JobBuilder;
        let nodes = vec![node("n0", 8000), node("n1", 8000), node("n2", 8000)];
        let apart = job("a")
            .distributed(0, 2, 2, 2)
            .requests(1000, 0)
            .task_on("worker-0", "n0")
            .label(ONE_TASK_PER_NODE_LABEL, "true");
        let s = snapshot(0.0, nodes, vec![apart]);
        let actions = pod_by_pod(&s, &mut Ledger::new(&s), Scoring::MostAllocated);
        // Bin-packing would pick n0 (worker-0 is there); the job's rule sends it elsewhere.
        assert_eq!(placed_on(&actions), ["n1"]);
        let packed = job("b").distributed(0, 2, 2, 2).requests(1000, 0);
        let s = snapshot(0.0, vec![node("n0", 8000), node("n1", 8000)], vec![packed]);
        let actions = pod_by_pod(&s, &mut Ledger::new(&s), Scoring::MostAllocated);
        assert_eq!(placed_on(&actions), ["n0", "n0"], "no label: packed");
    }

    #[test]
    fn a_gang_whose_tasks_may_not_share_a_node_is_packed_one_to_a_node_or_not_at_all() {
        use crate::cluster::{ONE_TASK_PER_NODE_LABEL, pending_tasks};
        use crate::testing::JobBuilder;
        let three = || vec![node("n0", 8000), node("n1", 8000), node("n2", 8000)];
        let apart = job("a")
            .distributed(0, 3, 3, 3)
            .requests(1000, 0)
            .label(ONE_TASK_PER_NODE_LABEL, "true");
        let s = snapshot(0.0, three(), vec![apart.clone()]);
        let mut ledger = Ledger::new(&s);
        let nodes: Vec<String> = ledger
            .pack_gang_of(&apart, &pending_tasks(&apart))
            .expect("three nodes for three tasks")
            .into_iter()
            .map(|a| a.node)
            .collect();
        assert_eq!(nodes, ["n0", "n1", "n2"]);
        let together = job("b").distributed(0, 3, 3, 3).requests(1000, 0);
        let s = snapshot(0.0, three(), vec![together.clone()]);
        let packed = Ledger::new(&s).pack_gang_of(&together, &pending_tasks(&together));
        let nodes: Vec<String> = packed.unwrap().into_iter().map(|a| a.node).collect();
        assert_eq!(nodes, ["n0", "n0", "n0"], "no label: the fewest nodes");
        // Two nodes for three tasks that may not share one: nothing, and nothing charged.
        let two = vec![node("n0", 8000), node("n1", 8000)];
        let s = snapshot(0.0, two, vec![apart.clone()]);
        let mut ledger = Ledger::new(&s);
        assert!(
            ledger
                .pack_gang_of(&apart, &pending_tasks(&apart))
                .is_none()
        );
        let untouched = Ledger::new(&s);
        assert!(
            ["n0", "n1"]
                .iter()
                .all(|n| format!("{:?}", ledger.free(n)) == format!("{:?}", untouched.free(n))),
            "a failed packing charges nothing"
        );
        // The even spread, which would put a job on one worker, keeps them apart too.
        let s = snapshot(0.0, three(), vec![apart]);
        let actions = EvenSpread::default().place(&s, &mut Ledger::new(&s));
        let Operation::Place(placement) = &actions[0].op else {
            panic!("not a placement: {actions:?}")
        };
        let mut nodes: Vec<&str> = placement
            .assignments
            .iter()
            .map(|a| a.node.as_str())
            .collect();
        nodes.dedup();
        assert_eq!(nodes.len(), 3, "{actions:?}");
    }

    #[test]
    fn a_small_cluster_is_scored_whole_and_ties_go_to_the_first_node() {
        let nodes = (0..50).map(|i| node(&format!("n{i}"), 4000)).collect();
        let s = snapshot(0.0, nodes, vec![job("a"), job("b")]);
        let actions = pod_by_pod(&s, &mut Ledger::new(&s), Scoring::LeastAllocated);
        assert_eq!(placed_on(&actions), ["n0", "n1"]);
    }

    #[test]
    fn a_large_cluster_is_sampled_and_the_next_search_starts_where_the_last_stopped() {
        let nodes = (0..300).map(|i| node(&format!("n{i}"), 4000)).collect();
        let s = snapshot(0.0, nodes, vec![job("a"), job("b"), job("c")]);
        let actions = pod_by_pod(&s, &mut Ledger::new(&s), Scoring::LeastAllocated);
        // 144 nodes scored per pod; the untouched nodes tie, so each pod takes the
        // first it saw. Scoring all 300 would have put `c` on n1.
        assert_eq!(placed_on(&actions), ["n0", "n144", "n288"]);
    }

    #[test]
    fn a_pod_that_fits_nowhere_skips_larger_pods_but_not_smaller_ones() {
        use crate::testing::JobBuilder;
        let nodes = vec![node("n0", 4000), node("n1", 4000)];
        let jobs = vec![
            job("big").requests(3000, 0),
            job("two-a").requests(2000, 0),
            job("two-b").requests(2000, 0),
            job("too-big").requests(3000, 0),
            job("bigger").requests(3500, 0),
            job("medium").requests(1500, 0),
            job("small").requests(1000, 0),
        ];
        let s = snapshot(0.0, nodes, jobs);
        let actions = pod_by_pod(&s, &mut Ledger::new(&s), Scoring::LeastAllocated);
        let placed: Vec<&str> = actions
            .iter()
            .map(|a| match &a.op {
                Operation::Place(p) => p.job.as_str(),
                other => panic!("not a placement: {other:?}"),
            })
            .collect();
        // n0 keeps 1000 after `big`, n1 nothing after the two 2000s. `too-big` fits
        // nowhere, `bigger` is skipped, `medium` (smaller in CPU) is searched and fits
        // nowhere either, and `small` still finds n0.
        assert_eq!(placed, ["big", "two-a", "two-b", "small"]);
    }

    #[test]
    fn pod_by_pod_and_the_even_spread_keep_each_task_inside_its_eligible_set() {
        use crate::testing::SnapshotBuilder;
        let nodes = vec![
            node("cpu-0", 4000),
            node("gpu-0", 4000),
            node("gpu-1", 4000),
        ];
        let s = snapshot(0.0, nodes, vec![job("free"), job("gpu-a"), job("gpu-b")])
            .only_on("gpu-a", &["gpu-1"])
            .only_on("gpu-b", &["gpu-0", "gpu-1"]);
        let actions = pod_by_pod(&s, &mut Ledger::new(&s), Scoring::LeastAllocated);
        assert_eq!(placed_on(&actions), ["cpu-0", "gpu-1", "gpu-0"]);
        // The even spread would send arrival #0 to worker 0 and #1 to worker 1.
        let s = snapshot(0.0, s.nodes.clone(), vec![job("gpu-a"), job("gpu-b")])
            .only_on("gpu-a", &["gpu-1"])
            .only_on("gpu-b", &["cpu-0"]);
        let actions = EvenSpread::default().place(&s, &mut Ledger::new(&s));
        assert_eq!(placed_on(&actions), ["gpu-1", "cpu-0"]);
    }
}
