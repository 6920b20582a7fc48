//! DRAGON's three procedures (section 3.3) over one snapshot: scale down for the
//! smallest urgent job, adapted FCFS gang placement onto the fewest nodes, scale up onto
//! nodes whose resources idled longer than mu. Pure apart from the idle clock, which the
//! caller keeps in the state blob.

use crate::idle::{IdleClock, Tick};
use crate::task_nodes::TaskNodes;

use switchyard_policy_sdk::{
    Action, Job, JobPhase, Operation, Placement, Resources, Scaling, Snapshot, Task,
    cluster::{Ledger, has_pending_tasks, pending_tasks, total_requests},
};

/// Order of the waiting queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queue {
    /// DRAGON: first come, first served (submit time).
    Fcfs,
    /// The Kubeflow variant: utility, higher first; ties: larger CPU + memory first.
    Utility,
}

/// Tunables.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Seconds a job may wait before it is urgent.
    pub tau: f64,
    /// Seconds a resource must idle before it is given to a running job.
    pub mu: f64,
    /// Queue order.
    pub queue: Queue,
    /// Scale-down and scale-up run; without them DRAGON is the paper's locality-aware
    /// baseline: adapted FCFS gangs on the fewest nodes, nothing else.
    pub scaling: bool,
}

/// The outcome of one round.
#[derive(Debug, Default)]
pub struct Round {
    /// Actions in order: scale-downs, placements, scale-ups.
    pub actions: Vec<Action>,
    /// The idle clock this round leaves, node by node in snapshot order
    /// ([`IdleClock::after_round`] makes the next round's clock of it).
    pub idle_ticks: Vec<Tick>,
    /// Seconds until the next alarm (a job turning urgent, an idle resource reaching mu).
    pub next_alarm: Option<f64>,
    /// Urgent jobs, by position in the snapshot (ids are not copied: on a long trace
    /// nearly every queued job is urgent, every round).
    pub urgent: Vec<usize>,
}

/// Runs one round. `idle` is the clock the previous round left.
pub fn round(snapshot: &Snapshot, params: Params, idle: &IdleClock) -> Round {
    let now = snapshot.time;
    let mut ledger = Ledger::new(snapshot);
    let mut out = Round::default();
    // The queue with each job's position in the snapshot.
    let mut queue: Vec<(usize, &Job)> = snapshot
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.phase == JobPhase::Waiting && has_pending_tasks(j))
        .collect();
    sort_queue(&mut queue, params.queue);
    let waiting: Vec<&Job> = queue.iter().map(|&(_, j)| j).collect();

    // 1. Scale-down alarm.
    let urgent: Vec<(usize, &Job)> = match params.queue {
        Queue::Fcfs => queue
            .iter()
            .copied()
            .filter(|(_, j)| now - j.submit_time > params.tau)
            .collect(),
        Queue::Utility => {
            let top = snapshot
                .jobs
                .iter()
                .filter(|j| j.phase != JobPhase::Waiting)
                .map(|j| j.utility)
                .fold(f64::NEG_INFINITY, f64::max);
            queue
                .first()
                .into_iter()
                .copied()
                .filter(|(_, j)| j.utility > top)
                .collect()
        }
    };
    out.urgent = urgent.iter().map(|&(at, _)| at).collect();
    let mut shrunk = vec![false; snapshot.jobs.len()];
    if let Some(target) = urgent
        .iter()
        .map(|&(_, j)| j)
        .filter(|_| params.scaling)
        .min_by_key(|j| size_key(&total_requests(&j.tasks)))
    {
        let tasks = pending_tasks(target);
        if ledger.clone().pack_gang_of(target, &tasks).is_none() {
            let victims: Vec<&Job> = snapshot
                .jobs
                .iter()
                .filter(|j| j.phase == JobPhase::Running && j.checkpointable)
                .filter(|j| params.queue == Queue::Fcfs || j.utility < target.utility)
                .collect();
            if let Some((plan, trial)) = scale_down_plan(&ledger, &victims, &tasks) {
                ledger = trial;
                for (job, replicas) in plan {
                    if let Some(at) = snapshot.jobs.iter().position(|j| std::ptr::eq(j, job)) {
                        shrunk[at] = true;
                    }
                    out.actions.push(Action {
                        op: Operation::Scale(Scaling { job: job.id.clone(), replicas, nodes: vec![] }),
                        reason: format!(
                            "{} urgent (waited {:.0}s{}); {} has the most surplus: {} -> {} {} replicas (min {})",
                            target.id,
                            now - target.submit_time,
                            match params.queue {
                                Queue::Fcfs => format!(" > tau {}s", params.tau),
                                Queue::Utility => format!(", utility {} above every running job", target.utility),
                            },
                            job.id,
                            job.replicas.current,
                            replicas,
                            job.replicas.role,
                            job.replicas.min
                        ),
                    });
                }
            }
        }
    }

    // 2. Adapted FCFS: every waiting job that fits, in queue order, gang onto the fewest nodes.
    for job in &waiting {
        let tasks = pending_tasks(job);
        if let Some(assignments) = ledger.pack_gang_of(job, &tasks) {
            let mut nodes: Vec<&str> = assignments.iter().map(|a| a.node.as_str()).collect();
            nodes.dedup();
            let reason = format!(
                "first in the {} queue that fits: {} task(s) on {} node(s) ({})",
                match params.queue {
                    Queue::Fcfs => "FCFS",
                    Queue::Utility => "utility",
                },
                tasks.len(),
                nodes.len(),
                nodes.join(", ")
            );
            out.actions.push(Action {
                op: Operation::Place(Placement {
                    job: job.id.clone(),
                    assignments,
                }),
                reason,
            });
        }
    }

    // 3. Scale-up alarm: idle resources on a node, idle for mu, go to jobs already there.
    if params.scaling {
        let task_nodes = TaskNodes::of(snapshot, &ledger);
        scale_up(
            snapshot,
            params,
            &mut ledger,
            &task_nodes,
            &shrunk,
            idle,
            &mut out,
        );
        task_nodes.keep();
    }

    // Alarms: the next job to turn urgent (only scaling acts on urgency).
    if params.queue == Queue::Fcfs && params.scaling {
        for job in &waiting {
            let due = job.submit_time + params.tau - now;
            if due > 0.0 {
                out.next_alarm = Some(out.next_alarm.map_or(due, |a| a.min(due)));
            }
        }
    }
    out.next_alarm = out.next_alarm.map(|a| a + 0.001);
    out
}

/// A running job that may grow: its position in the snapshot, itself, and the task a
/// new replica copies.
struct Grower<'a> {
    at: usize,
    job: &'a Job,
    template: &'a Task,
    /// Replicas added this round.
    added: u32,
    /// Where they go, one node name per replica.
    nodes: Vec<String>,
}

/// Step 3: on each schedulable node whose idle room some job already there could use,
/// start or read the node's idle clock; once it has run for mu, give the room to those
/// jobs, a replica at a time, in job order, up to their max. Nodes and jobs are found by
/// position (the growers on each node are listed once, in job order; a kept instance
/// keeps the positions of the tasks of the jobs that did not change, [`TaskNodes`]), so a
/// round on a large cluster compares no names but the idle clock's one per idle node.
fn scale_up(
    snapshot: &Snapshot,
    params: Params,
    ledger: &mut Ledger,
    task_nodes: &TaskNodes,
    shrunk: &[bool],
    idle: &IdleClock,
    out: &mut Round,
) {
    let now = snapshot.time;
    let mut growers: Vec<Grower> = snapshot
        .jobs
        .iter()
        .enumerate()
        .filter(|&(at, j)| j.phase == JobPhase::Running && j.checkpointable && !shrunk[at])
        .filter(|(_, j)| j.replicas.current < j.replicas.max)
        .filter_map(|(at, job)| {
            let template = task_nodes.of_job(at).template?;
            Some(Grower {
                at,
                job,
                template: &job.tasks[template as usize],
                added: 0,
                nodes: Vec::new(),
            })
        })
        .collect();
    // The growers with tasks on each node, in job order, as one list per node (`start`
    // marks where each node's part of `on_node` begins).
    let node_count = snapshot.nodes.len();
    let mut start = vec![0u32; node_count + 1];
    let mut node_of_task: Vec<(u32, u32)> = Vec::new();
    for (g, grower) in growers.iter().enumerate() {
        let mut last = None;
        for &at in &task_nodes.of_job(grower.at).nodes {
            // A job's tasks on one node are usually next to each other; a repeat further
            // on is caught below.
            if last == Some(at) {
                continue;
            }
            last = Some(at);
            node_of_task.push((at, g as u32));
        }
    }
    // Stable by node: each node's growers stay in job order; a job listed twice on a
    // node (tasks there apart) keeps its first place.
    node_of_task.sort_by_key(|&(at, _)| at);
    node_of_task.dedup();
    for &(at, _) in &node_of_task {
        start[at as usize + 1] += 1;
    }
    for at in 0..node_count {
        start[at + 1] += start[at];
    }
    let on_node: Vec<u32> = node_of_task.iter().map(|&(_, g)| g).collect();

    let mut clock = idle.reader();
    let mut ticks: Vec<Tick> = Vec::new();
    for (at, node) in snapshot
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.schedulable)
    {
        let here = &on_node[start[at] as usize..start[at + 1] as usize];
        let user = |ledger: &Ledger, growers: &[Grower]| {
            here.iter().copied().find(|&g| {
                let grower = &growers[g as usize];
                grower.job.replicas.current + grower.added < grower.job.replicas.max
                    && ledger.fits_task_at(at, grower.template)
            })
        };
        if user(ledger, &growers).is_none() {
            continue;
        }
        let (since, from) = match clock.find(&node.name) {
            Some((from, since)) => (since, Some(from)),
            None => (now, None),
        };
        if now - since < params.mu {
            ticks.push(Tick {
                node: at,
                since,
                from,
            });
            let due = since + params.mu - now;
            out.next_alarm = Some(out.next_alarm.map_or(due, |a: f64| a.min(due)));
            continue;
        }
        while let Some(g) = user(ledger, &growers) {
            let grower = &mut growers[g as usize];
            ledger.charge_task_at(at, grower.template);
            grower.added += 1;
            grower.nodes.push(node.name.clone());
        }
    }
    out.idle_ticks = ticks;
    for grower in growers.into_iter().filter(|g| g.added > 0) {
        let job = grower.job;
        let replicas = job.replicas.current + grower.added;
        out.actions.push(Action {
            reason: format!(
                "resources idle over mu = {}s on {}, where {} already runs: {} -> {} {} replicas (max {})",
                params.mu,
                grower.nodes.join(", "),
                job.id,
                job.replicas.current,
                replicas,
                job.replicas.role,
                job.replicas.max
            ),
            op: Operation::Scale(Scaling {
                job: job.id.clone(),
                replicas,
                nodes: grower.nodes,
            }),
        });
    }
}

fn sort_queue(queue: &mut [(usize, &Job)], order: Queue) {
    match order {
        Queue::Fcfs => queue.sort_by(|(_, a), (_, b)| a.submit_time.total_cmp(&b.submit_time)),
        Queue::Utility => queue.sort_by(|(_, a), (_, b)| {
            let size = |j: &Job| {
                let r = total_requests(&j.tasks);
                r.cpu_millis as f64 / 1000.0 + r.memory_bytes as f64 / (1u64 << 30) as f64
            };
            b.utility
                .total_cmp(&a.utility)
                .then(size(b).total_cmp(&size(a)))
        }),
    }
}

fn size_key(r: &Resources) -> (u32, u64, u64) {
    (r.gpus, r.cpu_millis, r.memory_bytes)
}

/// Replicas of the scalable role, highest-numbered first (the ones a shrink stops).
fn highest_replicas(job: &Job) -> Vec<&Task> {
    let mut tasks: Vec<&Task> = job
        .tasks
        .iter()
        .filter(|t| t.role == job.replicas.role)
        .collect();
    let number = |t: &Task| {
        t.name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    tasks.sort_by_key(|t| std::cmp::Reverse(number(t)));
    tasks
}

/// Scale victims down, most surplus first, one replica at a time, until `tasks` fit as a
/// gang. `None` when even every victim at its minimum is not enough (no action then).
pub fn scale_down_plan<'a>(
    ledger: &Ledger,
    victims: &[&'a Job],
    tasks: &[&Task],
) -> Option<(Vec<(&'a Job, u32)>, Ledger)> {
    let mut order: Vec<&Job> = victims
        .iter()
        .copied()
        .filter(|j| j.replicas.current > j.replicas.min)
        .collect();
    order.sort_by_key(|j| std::cmp::Reverse(j.replicas.current - j.replicas.min));
    let mut trial = ledger.clone();
    let mut plan: Vec<(&Job, u32)> = Vec::new();
    for job in order {
        let surplus = (job.replicas.current - job.replicas.min) as usize;
        for (i, task) in highest_replicas(job).into_iter().take(surplus).enumerate() {
            if let Some(node) = task.node.as_deref() {
                trial.release(node, &task.requests);
            }
            let replicas = job.replicas.current - i as u32 - 1;
            match plan.last_mut() {
                Some(last) if last.0.id == job.id => last.1 = replicas,
                _ => plan.push((job, replicas)),
            }
            let mut check = trial.clone();
            if check.pack_gang(tasks).is_some() {
                return Some((plan, trial));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::*;

    const P: Params = Params {
        tau: 100.0,
        mu: 50.0,
        queue: Queue::Fcfs,
        scaling: true,
    };

    fn ops(r: &Round) -> Vec<String> {
        r.actions
            .iter()
            .map(|a| match &a.op {
                Operation::Place(p) => {
                    let mut nodes: Vec<&str> =
                        p.assignments.iter().map(|x| x.node.as_str()).collect();
                    nodes.dedup();
                    format!("place {} {}", p.job, nodes.join("+"))
                }
                Operation::Scale(s) => {
                    format!("scale {} {} [{}]", s.job, s.replicas, s.nodes.join(","))
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// A running elastic job with `workers` 1-GPU workers (min 1, max 4) on `node`.
    fn elastic(id: &str, workers: u32, node: &str) -> Job {
        job(id)
            .requests(1000, 1)
            .distributed(0, workers, 1, 4)
            .running_on(node)
    }

    fn gpu_nodes() -> Vec<switchyard_policy_sdk::Node> {
        vec![node("n1", 16000).gpus(4), node("n2", 16000).gpus(4)]
    }

    #[test]
    fn an_urgent_job_scales_down_the_job_with_most_surplus_just_enough() {
        let jobs = vec![
            elastic("a", 4, "n1"),
            job("b")
                .requests(1000, 1)
                .distributed(0, 3, 2, 4)
                .running_on("n2"),
            job("u").requests(1000, 1).distributed(0, 2, 2, 2),
        ];
        let r = round(
            &snapshot(150.0, gpu_nodes(), jobs),
            P,
            &IdleClock::default(),
        );
        assert_eq!(r.urgent, [2], "u (the third job) is urgent");
        // One replica of `a` plus the GPU left on n2 is just enough: no second replica stops.
        assert_eq!(ops(&r), ["scale a 3 []", "place u n1+n2"]);
        assert!(
            r.actions[0]
                .reason
                .contains("u urgent (waited 150s > tau 100s)"),
            "{}",
            r.actions[0].reason
        );
    }

    #[test]
    fn no_full_scale_down_plan_means_no_action() {
        let jobs = vec![
            elastic("a", 2, "n1"),
            job("u").requests(1000, 4).distributed(0, 2, 2, 2),
        ];
        let nodes = vec![node("n1", 16000).gpus(4)];
        let r = round(&snapshot(150.0, nodes, jobs), P, &IdleClock::default());
        assert!(
            ops(&r).iter().all(|o| !o.starts_with("scale a")),
            "{:?}",
            ops(&r)
        );
        assert!(!ops(&r).iter().any(|o| o.starts_with("place")));
    }

    #[test]
    fn without_scaling_an_urgent_job_shrinks_nobody_and_idle_resources_grow_nobody() {
        let locality = Params {
            scaling: false,
            ..P
        };
        let jobs = vec![
            elastic("a", 4, "n1"),
            job("b")
                .requests(1000, 1)
                .distributed(0, 3, 2, 4)
                .running_on("n2"),
            job("u").requests(1000, 1).distributed(0, 2, 2, 2),
        ];
        let r = round(
            &snapshot(150.0, gpu_nodes(), jobs),
            locality,
            &IdleClock::default(),
        );
        assert!(r.actions.is_empty(), "{:?}", ops(&r));
        // The same round with scaling shrinks `a` (see the test above): the flag decides.
        let idle = IdleClock::from_pairs([("n1".to_string(), 0.0)]);
        let jobs = vec![elastic("a", 2, "n1"), elastic("b", 4, "n2")];
        let r = round(&snapshot(100.0, gpu_nodes(), jobs.clone()), locality, &idle);
        assert!(r.actions.is_empty(), "{:?}", ops(&r));
        let r = round(&snapshot(100.0, gpu_nodes(), jobs), P, &idle);
        assert_eq!(ops(&r), ["scale a 4 [n1,n1]"]);
    }

    #[test]
    fn a_job_not_yet_urgent_scales_nothing_and_sets_an_alarm() {
        let jobs = vec![
            elastic("a", 4, "n1"),
            elastic("b", 4, "n2"),
            job("u").submitted_at(100.0).requests(1000, 1),
        ];
        let r = round(
            &snapshot(150.0, gpu_nodes(), jobs),
            P,
            &IdleClock::default(),
        );
        assert!(r.actions.is_empty(), "{:?}", ops(&r));
        assert!((r.next_alarm.unwrap() - 50.001).abs() < 1e-6);
    }

    #[test]
    fn fcfs_skips_a_job_that_does_not_fit_and_places_the_next() {
        let jobs = vec![
            elastic("a", 3, "n1"),
            job("big")
                .submitted_at(1.0)
                .requests(1000, 1)
                .distributed(0, 6, 6, 6),
            job("small")
                .submitted_at(2.0)
                .requests(1000, 1)
                .distributed(0, 2, 2, 2),
        ];
        let r = round(&snapshot(10.0, gpu_nodes(), jobs), P, &IdleClock::default());
        assert_eq!(ops(&r), ["place small n2"]);
    }

    #[test]
    fn a_gang_goes_onto_the_fewest_nodes_in_one_action() {
        let nodes = vec![node("n1", 16000).gpus(2), node("n2", 16000).gpus(4)];
        let r = round(
            &snapshot(
                0.0,
                nodes,
                vec![job("g").requests(1000, 1).distributed(1, 3, 3, 3)],
            ),
            P,
            &IdleClock::default(),
        );
        assert_eq!(ops(&r), ["place g n2"]);
    }

    #[test]
    fn idle_resources_scale_up_only_jobs_already_on_that_node_after_mu() {
        let jobs = vec![elastic("a", 2, "n1"), elastic("b", 4, "n2")];
        // First seen idle now: alarm in mu.
        let r = round(
            &snapshot(0.0, gpu_nodes(), jobs.clone()),
            P,
            &IdleClock::default(),
        );
        assert!(r.actions.is_empty());
        let clock = IdleClock::default().after_round(&r.idle_ticks, &gpu_nodes());
        assert_eq!(clock.get("n1"), Some(0.0));
        assert_eq!(clock.get("n2"), None);
        // After mu: a grows onto n1 only, up to its max.
        let r = round(&snapshot(60.0, gpu_nodes(), jobs), P, &clock);
        assert_eq!(ops(&r), ["scale a 4 [n1,n1]"]);
    }

    #[test]
    fn a_job_with_no_task_on_an_idle_node_does_not_grow_there() {
        let nodes = vec![node("n1", 16000).gpus(4), node("n2", 16000).gpus(4)];
        let jobs = vec![
            job("a")
                .requests(1000, 1)
                .distributed(0, 4, 1, 8)
                .running_on("n1"),
        ];
        let idle = IdleClock::from_pairs([("n2".to_string(), 0.0)]);
        let r = round(&snapshot(100.0, nodes, jobs), P, &idle);
        assert!(r.actions.is_empty(), "{:?}", ops(&r));
    }

    #[test]
    fn the_utility_queue_puts_higher_utility_first_and_preempts_lower_utility_jobs() {
        let p = Params {
            queue: Queue::Utility,
            ..P
        };
        let nodes = vec![node("n1", 16000).gpus(4)];
        let jobs = vec![
            elastic("low", 4, "n1").utility(1.0),
            job("w1").submitted_at(1.0).requests(1000, 1).utility(2.0),
            job("w2").submitted_at(2.0).requests(1000, 2).utility(5.0),
        ];
        let r = round(&snapshot(5.0, nodes, jobs), p, &IdleClock::default());
        assert_eq!(r.urgent, [2], "w2 (the third job) is urgent");
        assert_eq!(ops(&r), ["scale low 2 []", "place w2 n1"]);
    }
}
