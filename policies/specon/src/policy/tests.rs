//! SpeCon's unit tests: the monitor's categories and its interval, Algorithm 2's scores,
//! reallocation (at most once per job, and only while it helps), new jobs spread by
//! arrival, rebalancing after a departure, and the settings it refuses.

use super::*;
use crate::state::State;
use switchyard_policy_sdk::testing::*;
use switchyard_policy_sdk::{Job, JobLabel, Node};

/// A job whose normalised gains are 0.005, 0.003, 0.001: PC -> WC -> CC -> request.
const CONVERGING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.995), (60.0, 0.992), (90.0, 0.991)];
/// A job still gaining 20 % per interval.
const PROGRESSING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.8), (60.0, 0.6), (90.0, 0.4)];

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

fn migrations(d: &Decision) -> Vec<(String, String, String, String)> {
    d.actions
        .iter()
        .filter_map(|a| match &a.op {
            Operation::Migrate(m) => Some((
                m.job.clone(),
                m.node.clone(),
                m.purpose.clone(),
                a.reason.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// The `category` label of `job` in `d`, empty when `d` does not name it.
fn label(d: &Decision, job: &str) -> String {
    d.labels
        .iter()
        .find(|l: &&JobLabel| l.job == job && l.key == "category")
        .map(|l| l.value.clone())
        .unwrap_or_default()
}

/// What the host shows for `job` after each of `ds`: a job keeps its last label.
fn shown(ds: &[Decision], job: &str) -> Vec<String> {
    let mut now = String::new();
    ds.iter()
        .map(|d| {
            let l = label(d, job);
            if !l.is_empty() {
                now = l;
            }
            now.clone()
        })
        .collect()
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
    assert_eq!(shown(&ds, "c"), ["PC", "WC", "CC"]);
    assert!(ds.iter().all(|d| migrations(d).is_empty()));
    assert_eq!(shown(&ds, "p1"), ["PC", "PC", "PC"]);
}

#[test]
fn a_cc_job_on_a_busy_worker_moves_to_the_lowest_scored_worker_with_a_reason() {
    let ds = rounds(&[], &three_workers(), &busy_w1(), &[0.0, 30.0, 60.0, 90.0]);
    let m = migrations(&ds[3]);
    assert_eq!(m.len(), 1, "{m:?}");
    let (job, node, kind, reason) = &m[0];
    assert_eq!(
        (job.as_str(), node.as_str(), kind.as_str()),
        ("c", "w3", REALLOCATE)
    );
    assert_eq!(
        reason,
        "CC since t=60s; w1 score 4 without it -> w3 score 0"
    );
}

#[test]
fn algorithm_2_scores_the_categories_of_this_round_s_monitor() {
    // p2 slows down at t=90 (gain 0.005 < alpha), in the round c asks to move: w1
    // without c scores p1's PC and p2's WC, 2 + 1.5.
    const FLATTENING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.8), (60.0, 0.6), (90.0, 0.595)];
    let mut jobs = busy_w1();
    jobs[2] = job("p2").running_on("w1").loss(FLATTENING);
    let ds = rounds(&[], &three_workers(), &jobs, &[0.0, 30.0, 60.0, 90.0]);
    let m = migrations(&ds[3]);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        m[0].3,
        "CC since t=60s; w1 score 3.5 without it -> w3 score 0"
    );
}

/// `c` converges on w1 beside one progressing job; another progresses on w2.
fn one_learner_per_worker() -> Vec<Job> {
    vec![
        job("c").running_on("w1").loss(CONVERGING),
        job("p1").running_on("w1").loss(PROGRESSING),
        job("p3").running_on("w2").loss(PROGRESSING),
    ]
}

fn reallocations_in(ds: &[Decision]) -> Vec<(String, String, String, String)> {
    ds.iter()
        .flat_map(migrations)
        .filter(|m| m.2 == REALLOCATE)
        .collect()
}

#[test]
fn a_cc_job_moves_while_the_cluster_hosts_more_than_one_pc_or_wc_job() {
    let times = [0.0, 30.0, 60.0, 90.0, 120.0];
    let ds = rounds(&[], &three_workers(), &one_learner_per_worker(), &times);
    let moved = reallocations_in(&ds);
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!((moved[0].0.as_str(), moved[0].1.as_str()), ("c", "w3"));
    // One learner left in the whole cluster: nothing to make room for.
    let alone = &one_learner_per_worker()[..2];
    let ds = rounds(&[], &three_workers(), alone, &times);
    assert!(reallocations_in(&ds).is_empty());
    assert_eq!(shown(&ds, "c")[4], "CC");
}

#[test]
fn per_worker_a_cc_job_asks_for_nothing_when_its_worker_has_one_pc_or_wc_job() {
    let ds = rounds(
        &[setting("busy_scope", "worker")],
        &three_workers(),
        &one_learner_per_worker(),
        &[0.0, 30.0, 60.0, 90.0, 120.0],
    );
    assert!(reallocations_in(&ds).is_empty());
    assert_eq!(shown(&ds, "c")[4], "CC");
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
    assert_eq!((m[0].1.as_str(), m[0].2.as_str()), ("w1", REALLOCATE));
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
        .map(|d| migrations(d).iter().filter(|m| m.2 == REALLOCATE).count())
        .sum();
    assert_eq!(count, 1);
    // The host's flag alone is enough too.
    let mut jobs = busy_w1();
    jobs[0] = jobs[0].clone().moved(0.0, MoveKind::Migrated, REALLOCATE);
    let ds = rounds(&[], &three_workers(), &jobs, &[0.0, 30.0, 60.0, 90.0]);
    assert!(
        ds.iter()
            .all(|d| { migrations(d).iter().all(|m| m.2 != REALLOCATE) })
    );
}

#[test]
fn alpha_compares_the_normalised_gain() {
    // Loss 1000 -> 995 -> 992 -> 991: raw gains of 5, 3, 1 would never be < 0.01.
    let scaled: Vec<(f64, f64)> = CONVERGING.iter().map(|&(t, v)| (t, v * 1000.0)).collect();
    let mut jobs = busy_w1();
    jobs[0] = job("c").running_on("w1").loss(&scaled);
    let ds = rounds(&[], &three_workers(), &jobs, &[0.0, 30.0, 60.0]);
    assert_eq!(shown(&ds, "c")[2], "CC");
    // With `max` a rising accuracy curve is measured against its best value.
    let acc = [(0.0, 0.5), (30.0, 0.9), (60.0, 0.902)];
    jobs[0] = job("c").running_on("w1").loss(&acc);
    let ds = rounds(
        &[setting("normalisation", "max")],
        &three_workers(),
        &jobs,
        &[0.0, 30.0, 60.0],
    );
    assert_eq!(shown(&ds, "c")[1..], ["PC", "WC"]);
}

#[test]
fn the_monitor_runs_only_once_per_interval_and_asks_to_be_called_then() {
    let ds = rounds(&[], &three_workers(), &busy_w1(), &[0.0, 10.0, 30.0]);
    assert_eq!(ds[0].next_call_after, Some(30.0));
    assert_eq!(ds[1].next_call_after, Some(20.0));
    assert_eq!(shown(&ds, "c"), ["PC", "PC", "WC"]);
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
        job("m")
            .running_on("w1")
            .moved(0.0, MoveKind::Migrated, REALLOCATE),
    ];
    // `m` converged at t=0, the monitor ran at t=0, and the last job on w2 finished.
    let st = State::converged("m", 0.0);
    let snap = snapshot(10.0, nodes.clone(), jobs.clone())
        .triggered_by(vec![Trigger::JobFinished("gone".into())]);
    let d = decide(&[], &snap, &st.encode()).unwrap();
    let m = migrations(&d);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(
        (m[0].0.as_str(), m[0].1.as_str(), m[0].2.as_str()),
        ("m", "w2", REBALANCE)
    );
    // With rebalancing off, nothing moves.
    let d = decide(&[setting("rebalance", "off")], &snap, &st.encode()).unwrap();
    assert!(migrations(&d).is_empty());
    // Without a departure and before the interval, nothing moves either.
    let tick = snapshot(10.0, nodes, jobs);
    assert!(migrations(&decide(&[], &tick, &st.encode()).unwrap()).is_empty());
}

#[test]
fn bad_settings_name_the_parameter() {
    assert!(
        configure(&[setting("alpha", "2")])
            .unwrap_err()
            .contains("alpha")
    );
    assert!(
        configure(&[setting("normalisation", "median")])
            .unwrap_err()
            .contains("normalisation")
    );
    assert!(
        decide(
            &[setting("interval", "0")],
            &snapshot(0.0, vec![], vec![]),
            &[]
        )
        .is_err()
    );
    assert_eq!(configure(&[]).unwrap().len(), SPEC.len());
}
