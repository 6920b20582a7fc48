//! SpeCon as a plain function of (settings, snapshot, state): placement, the monitor
//! round, reallocations, rebalancing, labels and the state blob. No WIT glue.
//!
//! A round costs what the cluster's size makes it cost and no more: each job's
//! remembered state is found once and then followed by the job's position in the
//! snapshot, ids and node names are borrowed rather than copied, the state blob is
//! compact ([`crate::state`]), and a label goes out only when the operator would see a
//! new value.

use switchyard_policy_sdk::{
    Action, Decision, Description, Job, JobLabel, JobPhase, Migration, MoveKind, Operation,
    Setting, Snapshot, Trigger,
    cluster::{Ledger, total_requests},
    log,
    progress::{Normalisation, value_at},
    settings::{ParamSpec, Settings, parameters},
    spread::Walk,
};

use crate::manager::{
    BusyScope, Choice, HostScore, Hosted, View, Weights, rebalance, speculative_host,
};
use crate::monitor::{Category, step};
use crate::state::{self, JobState};

/// The purpose SpeCon gives Algorithm 2's migrations (and its in-place marks).
pub const REALLOCATE: &str = "reallocate";
/// The purpose SpeCon gives Algorithm 3's migrations.
pub const REBALANCE: &str = "rebalance";

/// True when `job`'s move history has a migration SpeCon made for `purpose`: the
/// paper's "at most once" rules, kept by the host across restarts. The state's own
/// flags back this up for a job whose history was cut short.
fn moved_for(job: &Job, purpose: &str) -> bool {
    job.moves
        .iter()
        .any(|m| m.kind == MoveKind::Migrated && m.purpose == purpose)
}

/// SpeCon's parameters with the paper's values as defaults.
pub const SPEC: &[ParamSpec] = &[
    ParamSpec {
        name: "interval",
        default: "30",
        doc: "categorisation interval t_m - t_{m-1} in seconds (Algorithm 1 runs this often)",
    },
    ParamSpec {
        name: "alpha",
        default: "0.01",
        doc: "categorisation threshold on the normalised gain |E(t_m) - E(t_{m-1})|, a fraction",
    },
    ParamSpec {
        name: "w_pc",
        default: "2",
        doc: "Algorithm 2 weight of a progressing job",
    },
    ParamSpec {
        name: "w_wc",
        default: "1.5",
        doc: "Algorithm 2 weight of a watching job",
    },
    ParamSpec {
        name: "w_cc",
        default: "1",
        doc: "Algorithm 2 weight of a converged job",
    },
    ParamSpec {
        name: "normalisation",
        default: "initial",
        doc: "what E is divided by before the gain is taken: initial (first value seen) or max (running maximum |value|)",
    },
    ParamSpec {
        name: "host_score",
        default: "without-job",
        doc: "how Algorithm 2 scores the requesting job's host: without-job (as every other worker is scored, before the job lands on it) or with-job (line 3 of the pseudo-code literally: the host carries the job, so a job may move to a worker that ends heavier than its host was)",
    },
    ParamSpec {
        name: "busy_scope",
        default: "cluster",
        doc: "where Algorithm 1's line 15 counts |PC| + |WC| > 1 before a CC job asks to move: cluster (every worker, as printed; the reading the paper's fixed-schedule result needs) or worker (the job's own worker, with the subscript of lines 7-13)",
    },
    ParamSpec {
        name: "rebalance",
        default: "both",
        doc: "when Algorithm 3 runs: both (job departures and every interval), departure, interval or off",
    },
];

/// When Algorithm 3 runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RebalanceOn {
    /// On job departures and every interval.
    Both,
    /// Only when a job finished.
    Departure,
    /// Only on the interval.
    Interval,
    /// Never.
    Off,
}

/// Typed, checked settings.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Seconds between monitor rounds.
    pub interval: f64,
    /// Threshold on the normalised gain.
    pub alpha: f64,
    /// Category weights.
    pub weights: Weights,
    /// Divisor of E.
    pub normalisation: Normalisation,
    /// When to rebalance.
    pub rebalance: RebalanceOn,
    /// How Algorithm 2 scores the job's host.
    pub host_score: HostScore,
    /// Where line 15 counts the progressing and watching jobs.
    pub busy_scope: BusyScope,
}

impl Params {
    /// Resolves and checks `given` against [`SPEC`].
    pub fn parse(given: &[Setting]) -> Result<Self, String> {
        let s = Settings::resolve(SPEC, given)?;
        let weight = |name: &str| s.f64_in(name, 0.0, 1e6);
        Ok(Self {
            interval: s.f64_in("interval", 1.0, 86_400.0)?,
            alpha: s.f64_in("alpha", 0.0, 1.0)?,
            weights: Weights {
                pc: weight("w_pc")?,
                wc: weight("w_wc")?,
                cc: weight("w_cc")?,
            },
            normalisation: Normalisation::parse(s.choice("normalisation", Normalisation::CHOICES)?)
                .expect("choice checked"),
            host_score: HostScore::parse(s.choice("host_score", HostScore::CHOICES)?)
                .expect("choice checked"),
            busy_scope: BusyScope::parse(s.choice("busy_scope", BusyScope::CHOICES)?)
                .expect("choice checked"),
            rebalance: match s.choice("rebalance", &["both", "departure", "interval", "off"])? {
                "departure" => RebalanceOn::Departure,
                "interval" => RebalanceOn::Interval,
                "off" => RebalanceOn::Off,
                _ => RebalanceOn::Both,
            },
        })
    }
}

/// Name, version, summary and parameters.
pub fn describe() -> Description {
    Description {
        name: "specon".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        summary: "SpeCon: categorise jobs PC/WC/CC by normalised progress, migrate converged ones \
                  to the lowest-scored worker, rebalance when workers empty"
            .into(),
        parameters: parameters(SPEC),
        reads_loss: true, // its categories come from each job's normalised progress
    }
}

/// Checks the settings and returns them with defaults filled in.
pub fn configure(given: &[Setting]) -> Result<Vec<Setting>, String> {
    Params::parse(given)?;
    Ok(Settings::resolve(SPEC, given)?.to_settings())
}

/// One decision round.
pub fn decide(given: &[Setting], snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    let params = Params::parse(given)?;
    let mut memory = state::read(blob)?;
    // Jobs that left are forgotten here: `jobs[i]` belongs to `snapshot.jobs[i]`.
    memory.follow(snapshot);
    let now = snapshot.time;

    let mut ledger = Ledger::new(snapshot);
    let walk = memory.spread.walk(snapshot, &mut ledger);
    // Each job whose entry in the blob changes this round, by position.
    let mut changed: Vec<usize> = walk.numbered.iter().map(|&(at, _)| at).collect();
    // Where each hosted job is; its category is read once the monitor has run.
    let mut hosted = hosted_jobs(snapshot, &walk, memory.bound(), memory.jobs.values());
    let mut actions = walk.actions;

    let round_due = memory
        .last_round
        .is_none_or(|t| now - t >= params.interval - 1e-6);
    let jobs = memory.jobs.values_mut();
    let mut requests = Vec::new();
    if round_due {
        memory.last_round = Some(now);
        requests = monitor_round(snapshot, jobs, &params, &mut changed);
    }
    for h in &mut hosted {
        h.category = jobs[h.job].category;
    }
    let mut view = View::new(snapshot, ledger, hosted);
    actions.extend(reallocations(
        &mut view,
        snapshot,
        &requests,
        jobs,
        &params,
        &mut changed,
    ));
    if rebalance_due(snapshot, &params, round_due) {
        actions.extend(rebalance_round(&mut view, snapshot, jobs, &mut changed));
    }

    let labels = changed_labels(&view, snapshot, jobs, &mut changed);
    let next = memory
        .last_round
        .map_or(params.interval, |t| (t + params.interval - now).max(1e-3));
    for at in changed {
        memory.changed(at);
    }
    Ok(Decision {
        actions,
        labels,
        next_call_after: Some(next),
        state: memory.write_and_keep(snapshot),
    })
}

/// Algorithm 2 for each job (by snapshot position) in `requests`, in submission order,
/// each move seen by the next; lines 15-16: only while more than one PC/WC job is
/// hosted, on the whole cluster or on the job's worker (`busy_scope`).
fn reallocations(
    view: &mut View,
    snapshot: &Snapshot,
    requests: &[usize],
    jobs: &mut [JobState],
    params: &Params,
    changed: &mut Vec<usize>,
) -> Vec<Action> {
    let mut actions = Vec::new();
    for &job in requests {
        let Some(me) = view.get(job) else {
            continue;
        };
        let busy = match params.busy_scope {
            BusyScope::Cluster => view.total_of(Category::PC) + view.total_of(Category::WC),
            BusyScope::Worker => {
                view.count_of(me.node, Category::PC) + view.count_of(me.node, Category::WC)
            }
        };
        if busy > 1 {
            let action = reallocate(view, snapshot, job, &mut jobs[job], params);
            if action.is_some() {
                changed.push(job);
            }
            actions.extend(action);
        }
    }
    actions
}

/// Whether Algorithm 3 runs in this call: on the interval, on a departure, or both.
fn rebalance_due(snapshot: &Snapshot, params: &Params, round_due: bool) -> bool {
    let departed = snapshot
        .triggers
        .iter()
        .any(|t| matches!(t, Trigger::JobFinished(_)));
    match params.rebalance {
        RebalanceOn::Both => round_due || departed,
        RebalanceOn::Departure => departed,
        RebalanceOn::Interval => round_due,
        RebalanceOn::Off => false,
    }
}

/// Jobs with a worker (bound, or placed by this round's `walk`), with their category.
/// `bound` says which jobs have a task on a node, so the queue's tasks are not read.
fn hosted_jobs<'a>(
    snapshot: &'a Snapshot,
    walk: &Walk,
    bound: &[bool],
    jobs: &[JobState],
) -> Vec<Hosted<'a>> {
    let mut placed = walk
        .placed
        .iter()
        .zip(&walk.actions)
        .filter_map(|(&at, action)| match &action.op {
            Operation::Place(p) => Some((at, p.assignments.first()?.node.as_str())),
            _ => None,
        })
        .peekable();
    let mut hosted = Vec::new();
    for (i, (job, js)) in snapshot.jobs.iter().zip(jobs).enumerate() {
        let placed_here = placed.next_if(|(at, _)| *at == i).map(|(_, node)| node);
        let node = if bound[i] {
            job.tasks.iter().find_map(|t| t.node.as_deref())
        } else {
            // Spelled as the snapshot spells it, so the view can borrow it.
            placed_here
                .and_then(|node| snapshot.nodes.iter().find(|n| n.name == node))
                .map(|n| n.name.as_str())
        };
        let Some(node) = node else {
            continue;
        };
        hosted.push(Hosted {
            job: i,
            node,
            // Initial settings (line 2): a job joining a worker starts in PC.
            category: js.category,
            request: total_requests(&job.tasks),
            tasks: &job.tasks,
        });
    }
    hosted
}

/// Algorithm 1 over every running, never-reallocated job; returns the positions of the
/// jobs that ask for reallocation (lines 13-16, before the |PC| + |WC| test).
fn monitor_round(
    snapshot: &Snapshot,
    jobs: &mut [JobState],
    params: &Params,
    changed: &mut Vec<usize>,
) -> Vec<usize> {
    let now = snapshot.time;
    let mut requests = Vec::new();
    let mut changes = ChangeLog::default();
    for (i, (job, js)) in snapshot.jobs.iter().zip(jobs.iter_mut()).enumerate() {
        if job.phase != JobPhase::Running || js.reallocated || moved_for(job, REALLOCATE) {
            continue;
        }
        let before = js.clone();
        requests.extend(monitor_step(job, js, now, params, &mut changes).then_some(i));
        if *js != before {
            changed.push(i);
        }
    }
    changes.close(now);
    requests
}

/// Algorithm 1 for one running job at `now`: its gain and its step; true when it asks
/// for reallocation.
fn monitor_step(
    job: &Job,
    js: &mut JobState,
    now: f64,
    params: &Params,
    changes: &mut ChangeLog,
) -> bool {
    js.scale.observe(params.normalisation, &job.loss);
    let Some(value) = value_at(&job.loss, now).and_then(|v| js.scale.normalise(v)) else {
        return false;
    };
    let Some(last) = js.last_value.replace(value) else {
        return false;
    };
    let gain = (value - last).abs();
    let before = js.category;
    let s = step(before, gain, js.last_gain, params.alpha);
    js.last_gain = Some(gain);
    js.category = s.category;
    if s.category == Category::CC && before != Category::CC {
        js.cc_since = Some(now);
    }
    if before != s.category {
        changes.note(&job.id, before, s.category, gain, params.alpha);
    }
    s.wants_reallocation
}

/// Category changes written one debug line each per monitor round, before the rest are
/// only counted.
const CHANGES_LOGGED: usize = 8;

/// The monitor round's debug lines: the first [`CHANGES_LOGGED`] category changes in
/// detail, then one line counting the others.
///
/// A line per change would be thousands of lines a round on a large cluster, each formatted
/// in the guest only for the host to drop it (debug is off by default, and natively the
/// SDK drops every line unless asked); the SDK's log has no way to ask first.
#[derive(Default)]
struct ChangeLog {
    changes: usize,
}

impl ChangeLog {
    /// One job's change from `before` to `after` on `gain`.
    fn note(&mut self, job: &str, before: Category, after: Category, gain: f64, alpha: f64) {
        self.changes += 1;
        if self.changes <= CHANGES_LOGGED {
            log::debug(&format!(
                "{job}: {} -> {} (gain {gain:.4}, alpha {alpha})",
                before.as_str(),
                after.as_str(),
            ));
        }
    }

    /// The count of the changes not written, if any.
    fn close(self, now: f64) {
        if self.changes > CHANGES_LOGGED {
            log::debug(&format!(
                "and {} more category changes in the round at t={now:.0}",
                self.changes - CHANGES_LOGGED
            ));
        }
    }
}

/// Algorithm 2 for the requesting job at position `job`: the action, and the job
/// marked migrated.
fn reallocate(
    view: &mut View,
    snapshot: &Snapshot,
    job: usize,
    js: &mut JobState,
    params: &Params,
) -> Option<Action> {
    let id = &snapshot.jobs[job].id;
    let choice = speculative_host(view, job, params.weights, params.host_score)?;
    let from = view.get(job)?.node;
    if !choice.stay && !snapshot.jobs[job].checkpointable {
        log::info(&format!(
            "{id}: would move to {} but cannot checkpoint; left in place",
            choice.target
        ));
        return None;
    }
    if !view.relocate(job, choice.target) {
        return None;
    }
    js.reallocated = true;
    js.converged_at = Some(snapshot.time);
    Some(Action {
        op: Operation::Migrate(Migration {
            job: id.clone(),
            task: None,
            node: choice.target.to_string(),
            purpose: REALLOCATE.into(),
        }),
        reason: reallocation_reason(&choice, from, js.cc_since, params.host_score),
    })
}

/// Why Algorithm 2 moved a job (or marked it in place), for the operator.
fn reallocation_reason(
    choice: &Choice,
    from: &str,
    cc_since: Option<f64>,
    host_score: HostScore,
) -> String {
    let since = cc_since.map_or_else(|| "?".to_string(), |t| format!("{t:.0}"));
    let without = match host_score {
        HostScore::WithoutJob => " without it",
        HostScore::WithJob => "",
    };
    if choice.stay {
        format!(
            "CC since t={since}s; current host {from} (score {}{without}) is among the min-score workers {:?}: stays, marked migrated",
            choice.from_score, choice.candidates
        )
    } else {
        format!(
            "CC since t={since}s; {from} score {}{without} -> {} score {}{}",
            choice.from_score,
            choice.target,
            choice.to_score,
            if choice.candidates.len() > 1 {
                format!(" (least used of {:?})", choice.candidates)
            } else {
                String::new()
            }
        )
    }
}

/// Algorithm 3 over the converged, never-rebalanced, checkpointable running jobs.
fn rebalance_round(
    view: &mut View,
    snapshot: &Snapshot,
    jobs: &mut [JobState],
    changed: &mut Vec<usize>,
) -> Vec<Action> {
    let now = snapshot.time;
    let durations: Vec<(usize, f64)> = snapshot
        .jobs
        .iter()
        .zip(jobs.iter())
        .enumerate()
        .filter(|(_, (j, _))| j.phase == JobPhase::Running && j.checkpointable)
        .filter(|(_, (j, s))| !moved_for(j, REBALANCE) && !s.rebalanced)
        .filter_map(|(i, (j, s))| match s.converged_at {
            Some(t) => Some((i, now - t)),
            // Marked migrated by the host but the time was lost: the oldest possible.
            None if moved_for(j, REALLOCATE) => Some((i, f64::INFINITY)),
            None => None,
        })
        .collect();
    rebalance(view, &durations)
        .into_iter()
        .map(|m| {
            jobs[m.job].rebalanced = true;
            changed.push(m.job);
            let why = if m.idle_branch {
                format!("{} is idle and bf = {}", m.to, m.bf)
            } else {
                format!(
                    "{} hosts fewer than bf - 1 = {} jobs",
                    m.to,
                    m.bf.saturating_sub(1)
                )
            };
            Action {
                op: Operation::Migrate(Migration {
                    job: snapshot.jobs[m.job].id.clone(),
                    task: None,
                    node: m.to.to_string(),
                    purpose: REBALANCE.into(),
                }),
                reason: format!(
                    "rebalance: {why}; most recently converged movable job (d = {:.0}s) {} -> {}",
                    m.duration, m.from, m.to
                ),
            }
        })
        .collect()
}

/// `category` labels for the hosted jobs whose category the host does not show yet.
///
/// The host keeps a job's labels until the policy names the job again (the WIT's
/// `labels`: "replaces the policy's previous labels on the named jobs"), so repeating
/// an unchanged category every round only moved thousands of strings out of the guest.
fn changed_labels(
    view: &View,
    snapshot: &Snapshot,
    jobs: &mut [JobState],
    changed: &mut Vec<usize>,
) -> Vec<JobLabel> {
    view.hosted()
        .iter()
        .filter_map(|h| {
            let js = &mut jobs[h.job];
            if js.shown == Some(js.category) {
                return None;
            }
            js.shown = Some(js.category);
            changed.push(h.job);
            Some(JobLabel {
                job: snapshot.jobs[h.job].id.clone(),
                key: "category".into(),
                value: js.category.as_str().into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
