//! `mode = thesis`: the three kube-scheduler plugin changes of the gang-scheduling
//! thesis (section 4.5), pod by pod, gang-*like* rather than all-or-nothing.
//!
//! 1. Queue sort (Algorithm 1): pods ordered by their job's creation time (the job's
//!    submit time: when its first pod was queued), ties by pod name (`<job>-<task>`, as the pods are named).
//! 2. Filter (Algorithm 2): a job's pods are feasible only once every role the job
//!    needs has at least one task in the snapshot (queued or placed).
//! 3. Score (Algorithm 3): 0 on a node where a pod of another job runs, else 100.
//!
//! Each pod that passes goes alone (one single-task `place`) to the highest-scoring node
//! it fits on, charging the ledger, so a later pod of the same job sees it.

use switchyard_policy_sdk::{
    Action, Assignment, Job, Operation, Placement, Snapshot, Task,
    cluster::{Ledger, pending_tasks},
};

/// The roles `job` must have before any of its pods is placed: the comma-separated
/// `roles` label when the job carries one (e.g. `scheduler,ps,worker`), else its
/// scalable role plus every role its tasks already name.
pub fn required_roles(job: &Job) -> Vec<String> {
    if let Some(l) = job.labels.iter().find(|l| l.key == "roles") {
        return l
            .value
            .split(',')
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .collect();
    }
    let mut roles = vec![job.replicas.role.clone()];
    for t in &job.tasks {
        if !roles.contains(&t.role) {
            roles.push(t.role.clone());
        }
    }
    roles
}

/// Algorithm 2: every required role has a task in the snapshot.
pub fn all_roles_present(job: &Job) -> bool {
    required_roles(job)
        .iter()
        .all(|r| job.tasks.iter().any(|t| &t.role == r))
}

/// Algorithm 3: 0 when a pod of a job other than `job` is on `node`, else 100.
pub fn score(node: &str, job: &str, occupants: &[(String, String)]) -> u32 {
    if occupants.iter().any(|(n, j)| n == node && j != job) {
        0
    } else {
        100
    }
}

/// One round: the queue, the filter, the score, one place per pod that fits.
pub fn decide(snapshot: &Snapshot) -> Vec<Action> {
    let mut ledger = Ledger::new(snapshot);
    // (node, job) of every bound pod, extended with this round's placements.
    let mut occupants: Vec<(String, String)> = snapshot
        .jobs
        .iter()
        .flat_map(|j| {
            j.tasks
                .iter()
                .filter_map(|t| t.node.clone().map(|n| (n, j.id.clone())))
        })
        .collect();
    let mut queue: Vec<(&Job, &Task)> = snapshot
        .jobs
        .iter()
        .flat_map(|j| pending_tasks(j).into_iter().map(move |t| (j, t)))
        .collect();
    queue.sort_by(|a, b| {
        a.0.submit_time
            .total_cmp(&b.0.submit_time)
            .then_with(|| pod_name(a.0, a.1).cmp(&pod_name(b.0, b.1)))
    });
    let mut actions = Vec::new();
    for (job, task) in queue {
        if !all_roles_present(job) {
            continue;
        }
        // Highest score; ties to snapshot order (kube-scheduler picks at random among
        // ties; a policy must be deterministic).
        let best = ledger
            .rooms_for(task)
            .map(|room| (room.name, score(room.name, &job.id, &occupants)))
            .fold(None::<(&str, u32)>, |best, c| match best {
                Some(b) if b.1 >= c.1 => Some(b),
                _ => Some(c),
            })
            .map(|(node, s)| (node.to_string(), s));
        let Some((node, s)) = best else { continue };
        ledger.charge(&node, &task.requests);
        occupants.push((node.clone(), job.id.clone()));
        actions.push(Action {
            op: Operation::Place(Placement {
                job: job.id.clone(),
                assignments: vec![Assignment {
                    task: task.name.clone(),
                    node: node.clone(),
                }],
            }),
            reason: format!(
                "queue: job created t={:.0}s; all roles present; {node} scores {s}{}",
                job.submit_time,
                if s == 0 {
                    " (every node with room hosts another job)"
                } else {
                    ""
                }
            ),
        });
    }
    actions
}

fn pod_name(job: &Job, task: &Task) -> String {
    format!("{}-{}", job.id, task.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::*;

    fn places(actions: &[Action]) -> Vec<(String, String, String)> {
        actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Place(p) => {
                    assert_eq!(p.assignments.len(), 1, "thesis mode places pod by pod");
                    Some((
                        p.job.clone(),
                        p.assignments[0].task.clone(),
                        p.assignments[0].node.clone(),
                    ))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pods_are_queued_by_job_creation_time_then_pod_name() {
        let s = snapshot(
            0.0,
            vec![node("a", 3000)],
            vec![
                job("b").submitted_at(2.0).distributed(1, 1, 1, 1),
                job("a").submitted_at(1.0).distributed(1, 2, 1, 2),
            ],
        );
        let p = places(&decide(&s));
        let order: Vec<String> = p.iter().map(|(j, t, _)| format!("{j}/{t}")).collect();
        assert_eq!(order, ["a/ps-0", "a/worker-0", "a/worker-1"]);
    }

    #[test]
    fn a_job_missing_a_declared_role_is_not_placed_until_it_appears() {
        let j = job("j")
            .distributed(0, 2, 1, 2)
            .label("roles", "scheduler,ps,worker");
        assert!(!all_roles_present(&j));
        assert!(places(&decide(&snapshot(0.0, vec![node("a", 8000)], vec![j]))).is_empty());
        let j = job("j").distributed(1, 2, 1, 2).label("roles", "ps,worker");
        assert!(all_roles_present(&j));
        assert_eq!(
            places(&decide(&snapshot(0.0, vec![node("a", 8000)], vec![j]))).len(),
            3
        );
    }

    #[test]
    fn a_node_hosting_another_jobs_pod_scores_zero() {
        let occupants = vec![
            ("a".to_string(), "other".to_string()),
            ("b".to_string(), "me".to_string()),
        ];
        assert_eq!(score("a", "me", &occupants), 0);
        assert_eq!(score("b", "me", &occupants), 100);
        assert_eq!(score("c", "me", &occupants), 100);
    }

    #[test]
    fn pods_avoid_nodes_where_other_jobs_run() {
        let nodes = vec![node("a", 8000), node("b", 8000)];
        let jobs = vec![
            job("old").running_on("a"),
            job("new").submitted_at(1.0).distributed(1, 1, 1, 1),
        ];
        let p = places(&decide(&snapshot(0.0, nodes, jobs)));
        assert!(p.iter().all(|(_, _, n)| n == "b"), "{p:?}");
    }

    #[test]
    fn a_job_gets_part_of_its_pods_when_the_rest_do_not_fit() {
        // Gang-like, not all-or-nothing: 2 of 3 pods fit.
        let s = snapshot(
            0.0,
            vec![node("a", 2000)],
            vec![job("j").distributed(1, 2, 1, 2)],
        );
        assert_eq!(places(&decide(&s)).len(), 2);
    }
}
