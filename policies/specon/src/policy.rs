//! SpeCon as a plain function of (settings, snapshot, state): placement, the monitor
//! round, reallocations, rebalancing, labels and the state blob. No WIT glue.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use switchyard_policy_sdk::{
    Action, Decision, Description, Job, JobLabel, JobPhase, Migration, MigrationKind, Operation,
    Setting, Snapshot, Trigger,
    cluster::{Ledger, nodes_of, total_requests},
    log,
    placement::EvenSpread,
    progress::{Normalisation, Scale, value_at},
    settings::{ParamSpec, Settings, parameters},
    state,
};

use crate::manager::{Hosted, View, Weights, rebalance, speculative_host};
use crate::monitor::{Category, step};

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
            rebalance: match s.choice("rebalance", &["both", "departure", "interval", "off"])? {
                "departure" => RebalanceOn::Departure,
                "interval" => RebalanceOn::Interval,
                "off" => RebalanceOn::Off,
                _ => RebalanceOn::Both,
            },
        })
    }
}

/// What SpeCon remembers about one job.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct JobState {
    /// Current category.
    pub category: Category,
    /// Divisor of its evaluation values.
    pub scale: Scale,
    /// Normalised E at the previous monitor round.
    pub last_value: Option<f64>,
    /// G at the previous monitor round.
    pub last_gain: Option<f64>,
    /// When it last entered CC.
    pub cc_since: Option<f64>,
    /// t_cj: when it was marked migrated (moved or stayed by Algorithm 2).
    pub converged_at: Option<f64>,
    /// Reallocated (or marked so) by this policy: at most once, even if the host's flag
    /// were lost.
    pub reallocated: bool,
    /// Rebalanced by this policy.
    pub rebalanced: bool,
}

/// The state blob.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    /// Initial even placement's arrival counter.
    pub spread: EvenSpread,
    /// Time of the last monitor round.
    pub last_round: Option<f64>,
    /// Per active job.
    pub jobs: BTreeMap<String, JobState>,
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
    let mut st: State = state::decode(blob)?;
    let active: HashSet<&str> = snapshot.jobs.iter().map(|j| j.id.as_str()).collect();
    st.jobs.retain(|id, _| active.contains(id.as_str()));
    let now = snapshot.time;

    let mut ledger = Ledger::new(snapshot);
    let mut actions = st.spread.place(snapshot, &mut ledger);
    let mut hosted = hosted_jobs(snapshot, &actions, &mut st);

    let round_due = st
        .last_round
        .is_none_or(|t| now - t >= params.interval - 1e-6);
    let mut requests = Vec::new();
    if round_due {
        st.last_round = Some(now);
        requests = monitor_round(snapshot, &mut st, &params);
        for h in &mut hosted {
            h.category = st.jobs.get(&h.job).map(|j| j.category).unwrap_or_default();
        }
    }
    let mut view = View::new(snapshot, ledger, hosted);
    for job in requests {
        // Lines 15-16: only when the worker still hosts more than one PC/WC job.
        let Some(me) = view.get(&job.id).cloned() else {
            continue;
        };
        let busy = view.count_of(&me.node, Category::PC) + view.count_of(&me.node, Category::WC);
        if busy > 1 {
            actions.extend(reallocate(&mut view, job, &mut st, &params, now));
        }
    }

    let departed = snapshot
        .triggers
        .iter()
        .any(|t| matches!(t, Trigger::JobFinished(_)));
    let rebalance_now = match params.rebalance {
        RebalanceOn::Both => round_due || departed,
        RebalanceOn::Departure => departed,
        RebalanceOn::Interval => round_due,
        RebalanceOn::Off => false,
    };
    if rebalance_now {
        actions.extend(rebalance_round(&mut view, snapshot, &mut st, now));
    }

    let labels = view
        .hosted()
        .iter()
        .map(|h| JobLabel {
            job: h.job.clone(),
            key: "category".into(),
            value: st
                .jobs
                .get(&h.job)
                .map(|j| j.category)
                .unwrap_or_default()
                .as_str()
                .into(),
        })
        .collect();
    let next = st
        .last_round
        .map_or(params.interval, |t| (t + params.interval - now).max(1e-3));
    Ok(Decision {
        actions,
        labels,
        next_call_after: Some(next),
        state: state::encode(&st),
    })
}

/// Jobs with a worker (bound or placed by `placements` this round), with their category.
fn hosted_jobs(snapshot: &Snapshot, placements: &[Action], st: &mut State) -> Vec<Hosted> {
    let mut placed: HashMap<&str, &str> = HashMap::new();
    for action in placements {
        if let Operation::Place(p) = &action.op
            && let Some(first) = p.assignments.first()
        {
            placed.entry(p.job.as_str()).or_insert(first.node.as_str());
        }
    }
    snapshot
        .jobs
        .iter()
        .filter_map(|job| {
            let node = nodes_of(job)
                .first()
                .or_else(|| placed.get(job.id.as_str()))
                .map(|n| n.to_string())?;
            // Initial settings (line 2): a job joining a worker starts in PC.
            let category = st.jobs.entry(job.id.clone()).or_default().category;
            Some(Hosted {
                job: job.id.clone(),
                node,
                category,
                request: total_requests(&job.tasks),
            })
        })
        .collect()
}

fn already_reallocated(job: &Job, st: &State) -> bool {
    job.migrated || st.jobs.get(&job.id).is_some_and(|j| j.reallocated)
}

/// Algorithm 1 over every running, never-reallocated job; returns the jobs that ask for
/// reallocation (lines 13-16, before the |PC| + |WC| test).
fn monitor_round<'s>(snapshot: &'s Snapshot, st: &mut State, params: &Params) -> Vec<&'s Job> {
    let now = snapshot.time;
    let mut requests = Vec::new();
    for job in &snapshot.jobs {
        if job.phase != JobPhase::Running || already_reallocated(job, st) {
            continue;
        }
        let js = st.jobs.entry(job.id.clone()).or_default();
        js.scale.observe(params.normalisation, &job.loss);
        let Some(value) = value_at(&job.loss, now).and_then(|v| js.scale.normalise(v)) else {
            continue;
        };
        let Some(last) = js.last_value.replace(value) else {
            continue;
        };
        let gain = (value - last).abs();
        let before = js.category;
        let s = step(before, gain, js.last_gain, params.alpha);
        js.last_gain = Some(gain);
        js.category = s.category;
        if s.category == Category::CC && before != Category::CC {
            js.cc_since = Some(now);
        }
        if s.wants_reallocation {
            requests.push(job);
        }
        if before != s.category {
            log::debug(&format!(
                "{}: {} -> {} (gain {gain:.4}, alpha {})",
                job.id,
                before.as_str(),
                s.category.as_str(),
                params.alpha
            ));
        }
    }
    requests
}

/// Algorithm 2 for one requesting job: the action, and the job marked migrated.
fn reallocate(
    view: &mut View,
    job: &Job,
    st: &mut State,
    params: &Params,
    now: f64,
) -> Option<Action> {
    let choice = speculative_host(view, &job.id, params.weights)?;
    let from = view.get(&job.id)?.node.clone();
    if !choice.stay && !job.checkpointable {
        log::info(&format!(
            "{}: would move to {} but cannot checkpoint; left in place",
            job.id, choice.target
        ));
        return None;
    }
    if !view.relocate(&job.id, &choice.target) {
        return None;
    }
    let js = st.jobs.entry(job.id.clone()).or_default();
    js.reallocated = true;
    js.converged_at = Some(now);
    let since = js
        .cc_since
        .map_or_else(|| "?".to_string(), |t| format!("{t:.0}"));
    let reason = if choice.stay {
        format!(
            "CC since t={since}s; current host {from} (score {}) is among the min-score workers {:?}: stays, marked migrated",
            choice.from_score, choice.candidates
        )
    } else {
        format!(
            "CC since t={since}s; {from} score {} -> {} score {}{}",
            choice.from_score,
            choice.target,
            choice.to_score,
            if choice.candidates.len() > 1 {
                format!(" (least used of {:?})", choice.candidates)
            } else {
                String::new()
            }
        )
    };
    Some(Action {
        op: Operation::Migrate(Migration {
            job: job.id.clone(),
            task: None,
            node: choice.target,
            kind: MigrationKind::Reallocate,
        }),
        reason,
    })
}

/// Algorithm 3 over the converged, never-rebalanced, checkpointable running jobs.
fn rebalance_round(view: &mut View, snapshot: &Snapshot, st: &mut State, now: f64) -> Vec<Action> {
    let durations: Vec<(String, f64)> = snapshot
        .jobs
        .iter()
        .filter(|j| j.phase == JobPhase::Running && j.checkpointable)
        .filter(|j| !j.rebalanced && !st.jobs.get(&j.id).is_some_and(|s| s.rebalanced))
        .filter_map(|j| {
            let js = st.jobs.get(&j.id);
            match js.and_then(|s| s.converged_at) {
                Some(t) => Some((j.id.clone(), now - t)),
                // Marked migrated by the host but the time was lost: the oldest possible.
                None if j.migrated => Some((j.id.clone(), f64::INFINITY)),
                None => None,
            }
        })
        .collect();
    rebalance(view, &durations)
        .into_iter()
        .map(|m| {
            st.jobs.entry(m.job.clone()).or_default().rebalanced = true;
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
                    job: m.job.clone(),
                    task: None,
                    node: m.to.clone(),
                    kind: MigrationKind::Rebalance,
                }),
                reason: format!(
                    "rebalance: {why}; most recently converged movable job (d = {:.0}s) {} -> {}",
                    m.duration, m.from, m.to
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::*;
    use switchyard_policy_sdk::{JobLabel, Node};

    /// A job whose normalised gains are 0.005, 0.003, 0.001: PC -> WC -> CC -> request.
    const CONVERGING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.995), (60.0, 0.992), (90.0, 0.991)];
    /// A job still gaining 20 % per interval.
    const PROGRESSING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.8), (60.0, 0.6), (90.0, 0.4)];

    fn set(name: &str, value: &str) -> Setting {
        Setting {
            name: name.into(),
            value: value.into(),
        }
    }

    /// Calls `decide` at each of `times` with the same nodes and jobs, threading the state.
    fn rounds(settings: &[Setting], nodes: &[Node], jobs: &[Job], times: &[f64]) -> Vec<Decision> {
        let mut blob = Vec::new();
        let mut out = Vec::new();
        for &t in times {
            let d = decide(settings, &snapshot(t, nodes.to_vec(), jobs.to_vec()), &blob).unwrap();
            blob = d.state.clone();
            out.push(d);
        }
        out
    }

    fn migrations(d: &Decision) -> Vec<(String, String, MigrationKind, String)> {
        d.actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Migrate(m) => {
                    Some((m.job.clone(), m.node.clone(), m.kind, a.reason.clone()))
                }
                _ => None,
            })
            .collect()
    }

    fn label(d: &Decision, job: &str) -> String {
        d.labels
            .iter()
            .find(|l: &&JobLabel| l.job == job && l.key == "category")
            .map(|l| l.value.clone())
            .unwrap_or_default()
    }

    fn three_workers() -> Vec<Node> {
        vec![node("w1", 8000), node("w2", 8000), node("w3", 8000)]
    }

    fn busy_w1() -> Vec<Job> {
        vec![
            job("c").running_on("w1").loss(CONVERGING),
            job("p1").running_on("w1").loss(PROGRESSING),
            job("p2").running_on("w1").loss(PROGRESSING),
            job("p3").running_on("w2").loss(PROGRESSING),
        ]
    }

    #[test]
    fn a_converging_job_walks_pc_wc_cc_one_round_at_a_time() {
        let ds = rounds(&[], &three_workers(), &busy_w1(), &[0.0, 30.0, 60.0]);
        let seen: Vec<String> = ds.iter().map(|d| label(d, "c")).collect();
        assert_eq!(seen, ["PC", "WC", "CC"]);
        assert!(ds.iter().all(|d| migrations(d).is_empty()));
        assert_eq!(label(&ds[2], "p1"), "PC");
    }

    #[test]
    fn a_cc_job_on_a_busy_worker_moves_to_the_lowest_scored_worker_with_a_reason() {
        let ds = rounds(&[], &three_workers(), &busy_w1(), &[0.0, 30.0, 60.0, 90.0]);
        let m = migrations(&ds[3]);
        assert_eq!(m.len(), 1, "{m:?}");
        let (job, node, kind, reason) = &m[0];
        assert_eq!(
            (job.as_str(), node.as_str(), *kind),
            ("c", "w3", MigrationKind::Reallocate)
        );
        assert_eq!(reason, "CC since t=60s; w1 score 5 -> w3 score 0");
    }

    #[test]
    fn a_cc_job_asks_for_nothing_when_its_worker_has_only_one_pc_or_wc_job() {
        let jobs = vec![
            job("c").running_on("w1").loss(CONVERGING),
            job("p1").running_on("w1").loss(PROGRESSING),
            job("p3").running_on("w2").loss(PROGRESSING),
        ];
        let ds = rounds(
            &[],
            &three_workers(),
            &jobs,
            &[0.0, 30.0, 60.0, 90.0, 120.0],
        );
        assert!(ds.iter().all(|d| {
            migrations(d)
                .iter()
                .all(|m| m.2 != MigrationKind::Reallocate)
        }));
        assert_eq!(label(&ds[4], "c"), "CC");
    }

    #[test]
    fn a_cc_job_whose_host_has_the_minimum_score_is_marked_migrated_in_place() {
        let nodes = vec![node("w1", 8000), node("w2", 8000)];
        let mut jobs = busy_w1();
        jobs.push(job("p4").running_on("w2").loss(PROGRESSING));
        jobs.push(job("p5").running_on("w2").loss(PROGRESSING));
        let ds = rounds(&[], &nodes, &jobs, &[0.0, 30.0, 60.0, 90.0]);
        let m = migrations(&ds[3]);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!((m[0].1.as_str(), m[0].2), ("w1", MigrationKind::Reallocate));
        assert!(m[0].3.contains("stays, marked migrated"), "{}", m[0].3);
    }

    #[test]
    fn a_job_is_reallocated_at_most_once() {
        let ds = rounds(
            &[],
            &three_workers(),
            &busy_w1(),
            &[0.0, 30.0, 60.0, 90.0, 120.0, 150.0],
        );
        let count: usize = ds
            .iter()
            .map(|d| {
                migrations(d)
                    .iter()
                    .filter(|m| m.2 == MigrationKind::Reallocate)
                    .count()
            })
            .sum();
        assert_eq!(count, 1);
        // The host's flag alone is enough too.
        let mut jobs = busy_w1();
        jobs[0] = jobs[0].clone().migrated();
        let ds = rounds(&[], &three_workers(), &jobs, &[0.0, 30.0, 60.0, 90.0]);
        assert!(ds.iter().all(|d| {
            migrations(d)
                .iter()
                .all(|m| m.2 != MigrationKind::Reallocate)
        }));
    }

    #[test]
    fn alpha_compares_the_normalised_gain() {
        // Loss 1000 -> 995 -> 992 -> 991: raw gains of 5, 3, 1 would never be < 0.01.
        let scaled: Vec<(f64, f64)> = CONVERGING.iter().map(|&(t, v)| (t, v * 1000.0)).collect();
        let mut jobs = busy_w1();
        jobs[0] = job("c").running_on("w1").loss(&scaled);
        let ds = rounds(&[], &three_workers(), &jobs, &[0.0, 30.0, 60.0]);
        assert_eq!(label(&ds[2], "c"), "CC");
        // With `max` a rising accuracy curve is measured against its best value.
        let acc = [(0.0, 0.5), (30.0, 0.9), (60.0, 0.902)];
        jobs[0] = job("c").running_on("w1").loss(&acc);
        let ds = rounds(
            &[set("normalisation", "max")],
            &three_workers(),
            &jobs,
            &[0.0, 30.0, 60.0],
        );
        assert_eq!(label(&ds[1], "c"), "PC");
        assert_eq!(label(&ds[2], "c"), "WC");
    }

    #[test]
    fn the_monitor_runs_only_once_per_interval_and_asks_to_be_called_then() {
        let ds = rounds(&[], &three_workers(), &busy_w1(), &[0.0, 10.0, 30.0]);
        assert_eq!(ds[0].next_call_after, Some(30.0));
        assert_eq!(ds[1].next_call_after, Some(20.0));
        assert_eq!(label(&ds[1], "c"), "PC");
        assert_eq!(label(&ds[2], "c"), "WC");
    }

    #[test]
    fn new_jobs_are_spread_evenly_by_arrival() {
        let jobs: Vec<Job> = (0..4).map(|i| job(&format!("j{i}"))).collect();
        let d = decide(&[], &snapshot(0.0, three_workers(), jobs), &[]).unwrap();
        let nodes: Vec<String> = d
            .actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Place(p) => Some(p.assignments[0].node.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(nodes, ["w1", "w2", "w3", "w1"]);
        assert_eq!(label(&d, "j3"), "PC");
    }

    #[test]
    fn a_departure_rebalances_a_converged_job_onto_the_emptied_worker() {
        let nodes = vec![node("w1", 8000), node("w2", 8000)];
        let jobs = vec![
            job("a").running_on("w1").loss(PROGRESSING),
            job("b").running_on("w1").loss(PROGRESSING),
            job("m").running_on("w1").migrated(),
        ];
        // `m` converged at t=0, the monitor ran at t=0, and the last job on w2 finished.
        let mut st = State {
            last_round: Some(0.0),
            ..State::default()
        };
        st.jobs.insert(
            "m".into(),
            JobState {
                converged_at: Some(0.0),
                ..JobState::default()
            },
        );
        let snap = snapshot(10.0, nodes.clone(), jobs.clone())
            .triggered_by(vec![Trigger::JobFinished("gone".into())]);
        let d = decide(&[], &snap, &state::encode(&st)).unwrap();
        let m = migrations(&d);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(
            (m[0].0.as_str(), m[0].1.as_str(), m[0].2),
            ("m", "w2", MigrationKind::Rebalance)
        );
        // With rebalancing off, nothing moves.
        let d = decide(&[set("rebalance", "off")], &snap, &state::encode(&st)).unwrap();
        assert!(migrations(&d).is_empty());
        // Without a departure and before the interval, nothing moves either.
        let tick = snapshot(10.0, nodes, jobs);
        assert!(migrations(&decide(&[], &tick, &state::encode(&st)).unwrap()).is_empty());
    }

    #[test]
    fn bad_settings_name_the_parameter() {
        assert!(
            configure(&[set("alpha", "2")])
                .unwrap_err()
                .contains("alpha")
        );
        assert!(
            configure(&[set("normalisation", "median")])
                .unwrap_err()
                .contains("normalisation")
        );
        assert!(decide(&[set("interval", "0")], &snapshot(0.0, vec![], vec![]), &[]).is_err());
        assert_eq!(configure(&[]).unwrap().len(), SPEC.len());
    }
}
