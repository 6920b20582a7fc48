//! Initial placements that several policies share: SpeCon's even spread (also the "DS"
//! baseline) and kube-scheduler's least-allocated pod-by-pod binding (used by policies
//! whose paper does not place at all, e.g. FlowCon).
//!
//! Both charge a [`Ledger`] the caller owns, so a policy that also migrates in the same
//! round never counts the same free capacity twice. Neither keeps anything in statics:
//! the even spread's arrival counter lives in [`EvenSpread`], which the policy stores in
//! its state blob.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::{Ledger, nodes_of, pending_tasks};
use crate::{Action, Assignment, Job, Operation, Placement, Snapshot, Task};

/// The fixed, even initial placement of SpeCon's evaluation: the k-th arriving job goes to
/// worker `k mod |W|` (snapshot node order), or the next worker round the ring with room.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EvenSpread {
    /// Arrival number of every job seen while waiting and still active.
    arrivals: BTreeMap<String, u64>,
    /// Arrival number the next new job gets.
    next: u64,
}

impl EvenSpread {
    /// The arrival number given to `job`, if it has one.
    pub fn arrival_of(&self, job: &str) -> Option<u64> {
        self.arrivals.get(job).copied()
    }

    /// One `place` action per job with pending tasks that fits: all its pending tasks on
    /// one worker, chosen as described on [`EvenSpread`]. A job whose tasks fit on no
    /// single worker is packed onto the fewest nodes instead (all or nothing); a job that
    /// fits nowhere waits for the next call. A job that already has tasks on a node gets
    /// its missing tasks there when they fit.
    pub fn place(&mut self, snapshot: &Snapshot, ledger: &mut Ledger) -> Vec<Action> {
        self.arrivals
            .retain(|id, _| snapshot.jobs.iter().any(|j| &j.id == id));
        let workers: Vec<String> = snapshot.nodes.iter().map(|n| n.name.clone()).collect();
        let mut actions = Vec::new();
        for job in &snapshot.jobs {
            let pending = pending_tasks(job);
            if pending.is_empty() || workers.is_empty() {
                continue;
            }
            let k = *self.arrivals.entry(job.id.clone()).or_insert_with(|| {
                self.next += 1;
                self.next - 1
            });
            if let Some(action) = place_even(job, &pending, k, &workers, ledger) {
                actions.push(action);
            }
        }
        actions
    }
}

fn place_even(
    job: &Job,
    pending: &[&Task],
    k: u64,
    workers: &[String],
    ledger: &mut Ledger,
) -> Option<Action> {
    if let Some(home) = nodes_of(job).first().map(|n| n.to_string())
        && let Some(assignments) = charge_all_on(ledger, pending, &home)
    {
        return Some(place(
            job,
            assignments,
            format!("joins its other tasks on {home}"),
        ));
    }
    let n = workers.len();
    let start = (k % n as u64) as usize;
    for offset in 0..n {
        let worker = &workers[(start + offset) % n];
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
    let assignments = ledger.pack_gang(pending)?;
    Some(place(
        job,
        assignments,
        format!("arrival #{k} fits on no single worker; packed onto the fewest nodes"),
    ))
}

/// Charges every task in `tasks` to `node`, or nothing when they do not all fit.
fn charge_all_on(ledger: &mut Ledger, tasks: &[&Task], node: &str) -> Option<Vec<Assignment>> {
    let mut trial = ledger.clone();
    let mut assignments = Vec::with_capacity(tasks.len());
    for task in tasks {
        if !trial.charge(node, &task.requests) {
            return None;
        }
        assignments.push(Assignment {
            task: task.name.clone(),
            node: node.to_string(),
        });
    }
    *ledger = trial;
    Some(assignments)
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
/// node by `scoring` (ties to the first node). No gang.
pub fn pod_by_pod(snapshot: &Snapshot, ledger: &mut Ledger, scoring: Scoring) -> Vec<Action> {
    let mut actions = Vec::new();
    for job in &snapshot.jobs {
        for task in pending_tasks(job) {
            let best = ledger
                .rooms_fitting(&task.requests)
                .map(|room| {
                    let spread = room.least_allocated_score(&task.requests);
                    let score = match scoring {
                        Scoring::LeastAllocated => spread,
                        Scoring::MostAllocated => 100.0 - spread,
                    };
                    (room.name, score)
                })
                .fold(None::<(&str, f64)>, |best, cand| match best {
                    Some(b) if b.1 >= cand.1 => Some(b),
                    _ => Some(cand),
                })
                .map(|(node, score)| (node.to_string(), score));
            if let Some((node, score)) = best {
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
            }
        }
    }
    actions
}
