//! FlowCon as a plain function of (settings, snapshot, state): placement, the listener,
//! Algorithm 1 per worker, weights and labels. What it keeps between calls, and the
//! blob it writes, are [`crate::memory`]'s. No WIT glue.

use std::borrow::Cow;
use std::cell::Cell;

use rustc_hash::FxHashMap;
use switchyard_policy_sdk::{
    Action, CpuWeight, Decision, Description, Job, JobLabel, JobPhase, Operation, Setting,
    Snapshot, Trigger,
    cluster::Ledger,
    incremental,
    placement::{Scoring, pod_by_pod_placing},
    progress::{Normalisation, value_at},
    settings::{ParamSpec, Settings, parameters},
};

use crate::memory::{JobState, List, Memory, WorkerState};

/// FlowCon's parameters.
pub const SPEC: &[ParamSpec] = &[
    ParamSpec {
        name: "alpha",
        default: "0.01",
        doc: "threshold on growth efficiency G = P / R (normalised progress per second per CPU core)",
    },
    ParamSpec {
        name: "itval",
        default: "30",
        doc: "initial interval of Algorithm 1 in seconds (doubles while all jobs are in CL)",
    },
    ParamSpec {
        name: "beta",
        default: "2",
        doc: "a CL job's limit is at least 1 / (beta * jobs on its worker) of the worker",
    },
    ParamSpec {
        name: "limits",
        default: "share",
        doc: "share: a limit L is L of the worker, as `docker update --cpus` gives it, sent as the weight that yields that share; weight: L sent as the weight itself",
    },
    ParamSpec {
        name: "spare_capped",
        default: "true",
        doc: "true: a job seen using less than an equal split of its worker while unlimited (its own parallelism caps it) is not limited below that usage while it stays under an equal split, since progress it loses cannot be made up when the worker has room later; false: the thesis's floor alone",
    },
    ParamSpec {
        name: "normalisation",
        default: "initial",
        doc: "what E is divided by: initial (first value seen) or max (running maximum |value|)",
    },
];

/// Typed, checked settings.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Threshold on G.
    pub alpha: f64,
    /// Initial interval.
    pub itval: f64,
    /// Floor factor.
    pub beta: f64,
    /// Divisor of E.
    pub normalisation: Normalisation,
    /// How a limit becomes a CPU weight.
    pub limits: Limits,
    /// Never hold a parallelism-capped job below the share it uses unlimited.
    pub spare_capped: bool,
}

/// How FlowCon's limits (fractions of the worker) become CPU weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limits {
    /// The weight that gives each job the share of the worker its limit gives it under
    /// Docker ([`docker_shares`]): the thesis's reading.
    Share,
    /// The limit itself as the weight (under contention a job then gets less than its
    /// limit: 0.25 beside a job at 1 is 20 % of the worker, not the thesis's 25 %).
    Weight,
}

impl Params {
    /// Resolves and checks `given`.
    pub fn parse(given: &[Setting]) -> Result<Self, String> {
        let s = Settings::resolve(SPEC, given)?;
        Ok(Self {
            alpha: s.f64_in("alpha", 0.0, 1e6)?,
            itval: s.f64_in("itval", 1.0, 86_400.0)?,
            beta: s.f64_in("beta", 1e-3, 1e6)?,
            normalisation: Normalisation::parse(s.choice("normalisation", Normalisation::CHOICES)?)
                .expect("choice checked"),
            limits: match s.choice("limits", &["share", "weight"])? {
                "share" => Limits::Share,
                _ => Limits::Weight,
            },
            spare_capped: s.choice("spare_capped", &["true", "false"])? == "true",
        })
    }
}

/// Algorithm 1, lines 4-13, for one job.
pub fn next_list(list: List, g: f64, alpha: f64) -> List {
    match (g < alpha, list) {
        (true, List::NL) => List::WL,
        (true, _) => List::CL,
        (false, _) => List::NL,
    }
}

/// Name, version, summary and parameters.
pub fn describe() -> Description {
    Description {
        name: "flowcon".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        summary: "FlowCon: per-worker CPU weights from growth efficiency (NL/WL/CL), exponential back-off".into(),
        parameters: parameters(SPEC),
        reads_loss: true, // its growth efficiency is read off each job's loss series
    }
}

/// Checks the settings and fills defaults.
pub fn configure(given: &[Setting]) -> Result<Vec<Setting>, String> {
    Params::parse(given)?;
    Ok(Settings::resolve(SPEC, given)?.to_settings())
}

/// One round.
pub fn decide(given: &[Setting], snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    let p = Params::parse(given)?;
    let mut memory = Memory::read(blob)?;
    // The states of the jobs that left are forgotten here.
    memory.follow(snapshot);
    let now = snapshot.time;
    let mut ledger = Ledger::new(snapshot);
    let (mut actions, placed) = initial_placement(snapshot, &mut ledger);

    let event = snapshot
        .triggers
        .iter()
        .any(|t| matches!(t, Trigger::JobArrived(_) | Trigger::JobFinished(_)));
    // Running jobs (by snapshot position) by the node their first task is on, the
    // names as the jobs spell them: a worker is a name, whether or not it is a node.
    // Grouped by hash, then the groups put in name order.
    let mut group_of: FxHashMap<&str, usize> = FxHashMap::default();
    let mut by_worker: Vec<(&str, Vec<(usize, &Job)>)> = Vec::new();
    let mut join = |name, at: usize, job| {
        let group = *group_of.entry(name).or_insert_with(|| {
            by_worker.push((name, Vec::new()));
            by_worker.len() - 1
        });
        by_worker[group].1.push((at, job));
    };
    for (at, job) in snapshot.jobs.iter().enumerate() {
        if job.phase != JobPhase::Running {
            continue;
        }
        if let Some(home) = job.tasks.iter().find_map(|t| t.node.as_deref()) {
            join(home, at, job);
        }
    }
    // Algorithm 2, lines 5-9: a container started on the worker joins NL and Algorithm 1
    // runs with it. A job placed in this round is that container: it counts now, not
    // one interval later.
    for (action, &at) in actions.iter().zip(&placed) {
        if let Operation::Place(placement) = &action.op
            && let Some(first) = placement.assignments.first()
            && let Some(node) = snapshot.nodes.iter().find(|n| n.name == first.node)
        {
            join(node.name.as_str(), at, &snapshot.jobs[at]);
        }
    }
    by_worker.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let cores_of_node: FxHashMap<&str, f64> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.allocatable.cpu_millis as f64 / 1000.0))
        .collect();
    // The workers' states follow the groups, both in name order: a worker without
    // running jobs is forgotten, a new one starts afresh.
    let mut kept = std::mem::take(&mut memory.workers).into_iter().peekable();
    for (worker, jobs) in &by_worker {
        while kept.next_if(|(name, _)| name.as_str() < *worker).is_some() {}
        let (name, mut ws) = kept.next_if(|(name, _)| name == worker).unwrap_or_else(|| {
            let fresh = WorkerState {
                itval: p.itval,
                due: now,
                members: vec![],
            };
            (worker.to_string(), fresh)
        });
        let mut members: Vec<&str> = jobs.iter().map(|(_, j)| j.id.as_str()).collect();
        members.sort_unstable();
        // Algorithm 2: a change in the worker's jobs resets itval and runs at once.
        let same_members = ws.members.len() == members.len()
            && ws.members.iter().zip(&members).all(|(a, b)| a == b);
        if event || !same_members {
            ws.itval = p.itval;
            ws.due = now;
        }
        if !same_members {
            ws.members = members.iter().map(|m| m.to_string()).collect();
        }
        if now + 1e-6 >= ws.due {
            let worker_cores = cores_of_node.get(worker).copied().unwrap_or(0.0);
            let (weights, all_cl) = run_worker(jobs, worker_cores, &mut memory, &p, now);
            if all_cl {
                ws.itval *= 2.0;
            }
            ws.due = now + ws.itval;
            actions.extend(weights);
        }
        memory.workers.push((name, ws));
    }
    let next = memory
        .workers
        .iter()
        .map(|(_, w)| w)
        .map(|w| (w.due - now).max(1e-3))
        .fold(None, |a: Option<f64>, d| Some(a.map_or(d, |a| a.min(d))));
    let labels = memory
        .changed_labels()
        .into_iter()
        .map(|(at, list)| JobLabel {
            job: snapshot.jobs[at].id.clone(),
            key: "list".into(),
            value: list.name().into(),
        })
        .collect();
    Ok(Decision {
        actions,
        labels,
        next_call_after: next,
        state: memory.write_and_keep(snapshot),
    })
}

thread_local! {
    /// The held version ([`incremental::held_version`]) of this instance's last
    /// placement pass that placed nothing.
    static PLACED_NOTHING_AT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The baseline placement (deviation 1), a function of the nodes and jobs alone: on
/// the nodes and jobs of a pass that placed nothing (a tick of Algorithm 1's
/// interval: most rounds of a long trace), it places nothing again, and the queue is
/// not walked.
fn initial_placement(snapshot: &Snapshot, ledger: &mut Ledger) -> (Vec<Action>, Vec<usize>) {
    let version = incremental::held_version();
    if version.is_some() && PLACED_NOTHING_AT.with(Cell::get) == version {
        return (Vec::new(), Vec::new());
    }
    let (actions, placed) = pod_by_pod_placing(snapshot, ledger, Scoring::LeastAllocated);
    let nothing = version.filter(|_| actions.is_empty());
    PLACED_NOTHING_AT.with(|at| at.set(nothing));
    (actions, placed)
}

/// Smallest weight sent: the contract wants weights in (0, 1].
const MIN_WEIGHT: f64 = 1e-3;

/// The share of the worker Docker gives each of containers limited to `caps` (fractions
/// of the worker, `docker update --cpus`), each able to use the whole worker: an equal
/// split, where a container keeps at most its cap and the rest is split among the others
/// (the thesis's example: caps 0.25 and 1 give 25 % and 75 %). Returned as CPU weights,
/// scaled so the largest is 1; weighted sharing with these weights gives those shares.
/// A container that uses less than its share leaves the rest to the others (soft limits).
pub fn docker_shares(caps: &[f64]) -> Vec<f64> {
    let mut shares = vec![0.0; caps.len()];
    let mut open: Vec<usize> = (0..caps.len()).collect();
    let mut left = 1.0_f64;
    while !open.is_empty() && left > 1e-12 {
        let level = left / open.len() as f64;
        let (capped, rest): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&i| caps[i] <= level);
        if capped.is_empty() {
            for &i in &rest {
                shares[i] = level;
            }
            break;
        }
        for &i in &capped {
            shares[i] = caps[i];
            left -= caps[i];
        }
        open = rest;
    }
    let largest = shares.iter().copied().fold(0.0, f64::max);
    if largest > 0.0 {
        shares.iter().map(|s| s / largest).collect()
    } else {
        vec![1.0; caps.len()]
    }
}

/// A job's CPU in cores: its placed tasks' measured usage, else their requests; and
/// whether every placed task reported a measurement.
fn cores_of(job: &Job) -> (f64, bool) {
    let placed = job.tasks.iter().filter(|t| t.node.is_some());
    let measured = placed.clone().all(|t| t.usage.is_some());
    let cores = placed
        .map(|t| t.usage.map_or(t.requests.cpu_millis, |u| u.cpu_millis) as f64 / 1000.0)
        .sum();
    (cores, measured)
}

/// Records that `job` is capped by its own parallelism when, unlimited at the previous
/// round (so what it uses now is what it can use), it uses less than an equal split of
/// the `running` jobs measured on the worker: weighted sharing gives an unlimited job at
/// least that split when it can use it. Kept once seen: the cap is the job's, not the
/// worker's.
fn observe_cap(js: &mut JobState, cores: f64, worker_cores: f64, running: usize) {
    let unlimited = js.limit.is_none_or(|l| l >= 1.0 - 1e-9);
    if !unlimited || js.last.is_none() || worker_cores <= 0.0 || running == 0 || cores <= 0.0 {
        return;
    }
    let share = cores / worker_cores;
    // 2 % below the split: usage rounding and sharing noise are not a cap.
    if share < 0.98 / running as f64 {
        js.capped = Some(js.capped.map_or(share, |c| c.max(share)));
    }
}

/// A CL job's limit (lines 18-21): its share of the worker's growth efficiency, at least
/// the floor 1/(beta n). A job whose own parallelism caps it at `capped` of the worker,
/// below an equal split of the `n` jobs, is not held below that cap: it uses less than
/// the split, so what the limit takes from it is progress it can never make up (when the
/// worker empties it still runs no faster than its cap), and where it ends the schedule
/// every core-second taken adds to the makespan. Above an equal split it is limited like
/// any other job. Returns the limit and why.
pub fn cl_limit(share: f64, floor: f64, capped: Option<f64>, n: usize) -> (f64, String) {
    let paper = share.max(floor).min(1.0);
    let why = format!("CL: G share {share:.3}, floor 1/(beta*n) = {floor:.3}");
    match capped.filter(|&c| c > paper && c * (n as f64) < 1.0) {
        Some(cap) => (
            cap,
            format!(
                "{why}, but the job uses at most {cap:.3} of the worker, under an equal split: not held below it"
            ),
        ),
        None => (paper, why),
    }
}

/// Algorithm 1 on one worker: lists and weights. Returns the weight actions and whether
/// every job was in CL (back-off).
fn run_worker(
    positioned: &[(usize, &Job)],
    worker_cores: f64,
    memory: &mut Memory,
    p: &Params,
    now: f64,
) -> (Vec<Action>, bool) {
    let jobs: Vec<&Job> = positioned.iter().map(|(_, j)| *j).collect();
    // Each job's state, taken from its slot (the same job listed twice shares one),
    // and what it was before this run.
    let mut slot_of = Vec::with_capacity(positioned.len());
    let mut owners: Vec<usize> = Vec::new();
    for &(at, _) in positioned {
        match owners.iter().position(|&o| o == at) {
            Some(k) => slot_of.push(k),
            None => {
                slot_of.push(owners.len());
                owners.push(at);
            }
        }
    }
    let before: Vec<Option<JobState>> = owners.iter().map(|&at| memory.take_state(at)).collect();
    let mut states: Vec<JobState> = before
        .iter()
        .map(|b| b.clone().unwrap_or_default())
        .collect();
    let (actions, all_cl) = run_worker_jobs(&jobs, &slot_of, worker_cores, &mut states, p, now);
    for ((at, state), before) in owners.into_iter().zip(states).zip(before) {
        let changed = before.as_ref() != Some(&state);
        memory.put_state(at, state, changed);
    }
    (actions, all_cl)
}

/// [`run_worker`] on the worker's `jobs`, the state of `jobs[k]` being
/// `states[slot_of[k]]`.
fn run_worker_jobs(
    jobs: &[&Job],
    slot_of: &[usize],
    worker_cores: f64,
    states: &mut [JobState],
    p: &Params,
    now: f64,
) -> (Vec<Action>, bool) {
    let measured: Vec<(f64, bool)> = jobs.iter().map(|j| cores_of(j)).collect();
    let running = measured.iter().filter(|(c, m)| *m && *c > 0.0).count();
    let mut gains: Vec<Option<f64>> = Vec::with_capacity(jobs.len());
    for (k, (job, &(cores, is_measured))) in jobs.iter().zip(&measured).enumerate() {
        let js = &mut states[slot_of[k]];
        if is_measured {
            observe_cap(js, cores, worker_cores, running);
        }
        js.scale.observe(p.normalisation, &job.loss);
        let e = value_at(&job.loss, now).and_then(|v| js.scale.normalise(v));
        let g = match (e, js.last) {
            (Some(e), Some((t0, e0))) if now > t0 => {
                let progress = (e - e0).abs() / (now - t0);
                Some(if cores > 0.0 {
                    progress / cores
                } else {
                    progress
                })
            }
            _ => None,
        };
        if let Some(e) = e {
            js.last = Some((now, e));
        }
        if let Some(g) = g {
            js.list = next_list(js.list, g, p.alpha);
        }
        gains.push(g);
    }
    let lists: Vec<List> = slot_of.iter().map(|&u| states[u].list).collect();
    let all_cl = lists.iter().all(|l| *l == List::CL);
    let n = jobs.len() as f64;
    let sum: f64 = gains.iter().flatten().sum();
    let floor = 1.0 / (p.beta * n);
    // Lines 14-26: each job's limit L, a fraction of the worker.
    // The reasons are written only for weights that are sent: most are not.
    let mut limits: Vec<(f64, Cow<'static, str>)> = Vec::with_capacity(jobs.len());
    for (k, (list, g)) in lists.iter().zip(&gains).enumerate() {
        let limit = if all_cl {
            (
                1.0,
                Cow::Borrowed("all jobs on the worker in CL: free competition, itval doubles"),
            )
        } else {
            match list {
                List::NL => (1.0, Cow::Borrowed("NL: growing fast")),
                List::WL => (
                    states[slot_of[k]].limit.unwrap_or(1.0),
                    Cow::Borrowed("WL: limit unchanged"),
                ),
                List::CL => {
                    let g = g.unwrap_or(0.0);
                    let share = if sum > 0.0 { g / sum } else { 0.0 };
                    let capped = states[slot_of[k]].capped.filter(|_| p.spare_capped);
                    let (limit, why) = cl_limit(share, floor, capped, jobs.len());
                    (limit, Cow::Owned(why))
                }
            }
        };
        states[slot_of[k]].limit = Some(limit.0);
        limits.push(limit);
    }
    let caps: Vec<f64> = limits.iter().map(|(l, _)| *l).collect();
    let weights = match p.limits {
        Limits::Share => docker_shares(&caps),
        Limits::Weight => caps,
    };
    let mut actions = Vec::new();
    for ((job, (limit, why)), weight) in jobs.iter().zip(&limits).zip(weights) {
        let weight = weight.clamp(MIN_WEIGHT, 1.0);
        for task in job.tasks.iter().filter(|t| t.node.is_some()) {
            if (task.cpu_weight - weight).abs() > 1e-9 {
                actions.push(Action {
                    op: Operation::SetCpuWeight(CpuWeight {
                        job: job.id.clone(),
                        task: task.name.clone(),
                        weight,
                    }),
                    reason: format!("{why} -> limit {limit:.3} of the worker, weight {weight:.3}"),
                });
            }
        }
    }
    (actions, all_cl)
}

#[cfg(test)]
mod tests;
