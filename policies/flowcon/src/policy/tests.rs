//! FlowCon's unit tests: a kept instance deciding as a fresh one would, Algorithm 1's
//! lists and the interval's back-off, the listener, a CL job's limit and its floor, the
//! limits as Docker shares or as weights, placement, and jobs capped by their own
//! parallelism.

use super::*;
use crate::memory::State;
use switchyard_policy_sdk::state;
use switchyard_policy_sdk::testing::*;

fn weights(d: &Decision) -> Vec<(String, f64)> {
    d.actions
        .iter()
        .filter_map(|a| match &a.op {
            Operation::SetCpuWeight(w) => Some((w.job.clone(), w.weight)),
            _ => None,
        })
        .collect()
}

/// The job's list after `d`, as its state remembers it (its label goes out only
/// when the list changes).
fn list(d: &Decision, job: &str) -> String {
    let st: State = state::decode(&d.state).unwrap();
    st.jobs
        .get(job)
        .map(|s| format!("{:?}", s.list))
        .unwrap_or_default()
}

/// Flat after t=0: G = 0 every round.
const FLAT: &[(f64, f64)] = &[(0.0, 1.0)];
/// Falls fast at first: G = 0.0167 then 0.0133 per second per core (> alpha 0.01).
const FAST: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.5), (60.0, 0.1), (90.0, 0.05)];

/// Rounds at `times` on one 8-core worker `w1`, default settings.
fn run(jobs: &[Job], times: &[f64]) -> Vec<Decision> {
    run_on(&[], 8000, jobs, times)
}

/// Rounds at `times` on one worker `w1` of `cpu_millis`, each given the last state.
fn run_on(settings: &[Setting], cpu_millis: u64, jobs: &[Job], times: &[f64]) -> Vec<Decision> {
    let mut blob = Vec::new();
    let mut out = Vec::new();
    for &t in times {
        let d = decide(
            settings,
            &snapshot(t, vec![node("w1", cpu_millis)], jobs.to_vec()),
            &blob,
        )
        .unwrap();
        blob = d.state.clone();
        out.push(d);
    }
    out
}

/// A kept instance, given only what changed each round (the host's placements
/// applied, then each of `changes`), against a fresh instance given the same
/// snapshot and blob: the same decisions and the same blob.
fn kept_decides_as_fresh(round: Snapshot, changes: &[Change]) {
    kept_against_fresh(
        round,
        Vec::new(),
        changes,
        |s, blob| decide(&[], s, blob).unwrap(),
        // A fresh instance: nothing kept (the kept instance's memory is put back).
        |s, blob, kept| {
            let memory = crate::memory::kept();
            let held = memory.with(|m| m.borrow().as_ref().map_or(0, |m| m.states()));
            assert_eq!(held, fresh_states(s, kept), "no state of a job that left");
            as_fresh_instance(memory, || {
                let placed_nothing_at = PLACED_NOTHING_AT.with(|at| at.replace(None));
                let fresh = decide(&[], s, blob).unwrap();
                PLACED_NOTHING_AT.with(|at| at.set(placed_nothing_at));
                fresh
            })
        },
        applied,
        |s, kept| {
            let read: State = state::decode(&kept.state).unwrap();
            assert_eq!(read.jobs.len(), fresh_states(s, kept), "t={}", s.time);
        },
    );
}

/// How many jobs of `s` ran on a worker in `d`'s round or before (and so have a
/// state): the running ones and the ones `d` placed.
fn fresh_states(s: &Snapshot, d: &Decision) -> usize {
    let placed = d.actions.iter().filter_map(|a| match &a.op {
        Operation::Place(p) => Some(p.job.as_str()),
        _ => None,
    });
    let mut ids: Vec<&str> = s
        .jobs
        .iter()
        .filter(|j| j.phase == JobPhase::Running)
        .map(|j| j.id.as_str())
        .chain(placed)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len()
}

#[test]
fn a_kept_instance_decides_and_writes_as_a_fresh_instance_would() {
    let first = snapshot(
        0.0,
        vec![node("w1", 8000), node("w2", 8000)],
        vec![
            job("a").running_on("w1").loss(FAST).requests(4000, 0),
            job("b").running_on("w1").loss(FLAT).requests(3000, 0),
            job("big").requests(9000, 0),
        ],
    );
    let changes: [Change; 6] = [
        &|s| s.time = 30.0,
        &|s| {
            s.time = 40.0;
            s.jobs.push(job("c").loss(FAST).requests(2000, 0));
            s.triggers = vec![Trigger::JobArrived("c".into())];
        },
        &|s| s.time = 60.0,
        &|s| s.time = 90.0,
        &|s| {
            s.time = 100.0;
            finish(s, "a");
        },
        &|s| s.time = 160.0,
    ];
    kept_decides_as_fresh(first, &changes);
}

#[test]
fn g_below_alpha_walks_nl_wl_cl_and_back_to_nl_above() {
    assert_eq!(next_list(List::NL, 0.001, 0.01), List::WL);
    assert_eq!(next_list(List::WL, 0.001, 0.01), List::CL);
    assert_eq!(next_list(List::CL, 0.001, 0.01), List::CL);
    assert_eq!(next_list(List::CL, 0.02, 0.01), List::NL);
    assert_eq!(next_list(List::WL, 0.01, 0.01), List::NL);
}

#[test]
fn all_jobs_in_cl_get_weight_one_and_the_interval_doubles() {
    let jobs = vec![
        job("a").running_on("w1").loss(FLAT).cpu_weight(0.5),
        job("b").running_on("w1").loss(FLAT),
    ];
    let ds = run(&jobs, &[0.0, 30.0, 60.0]);
    assert_eq!(ds[1].next_call_after, Some(30.0));
    assert_eq!(list(&ds[2], "a"), "CL");
    assert_eq!(ds[2].next_call_after, Some(60.0));
    assert_eq!(weights(&ds[2]), [("a".to_string(), 1.0)]);
    // Still all CL at 120: doubles again.
    let mut blob = ds[2].state.clone();
    let d = decide(
        &[],
        &snapshot(120.0, vec![node("w1", 8000)], jobs.clone()),
        &blob,
    )
    .unwrap();
    assert_eq!(d.next_call_after, Some(120.0));
    blob = d.state;
    // Nothing runs before the backed-off interval elapses.
    let d = decide(&[], &snapshot(150.0, vec![node("w1", 8000)], jobs), &blob).unwrap();
    assert!((d.next_call_after.unwrap() - 90.0).abs() < 1e-9);
}

fn jobs_with_c() -> Vec<Job> {
    vec![
        job("a").running_on("w1").loss(FLAT),
        job("b").running_on("w1").loss(FLAT),
        job("c").running_on("w1").loss(FAST),
    ]
}

#[test]
fn an_arrival_resets_the_interval_and_reruns_at_once() {
    let jobs = vec![
        job("a").running_on("w1").loss(FLAT),
        job("b").running_on("w1").loss(FLAT),
    ];
    let ds = run(&jobs, &[0.0, 30.0, 60.0]);
    assert_eq!(ds[2].next_call_after, Some(60.0));
    let snap = snapshot(70.0, vec![node("w1", 8000)], jobs)
        .triggered_by(vec![Trigger::JobArrived("c".into())]);
    let d = decide(&[], &snap, &ds[2].state).unwrap();
    // Ran at once (due was t=120) from the initial 30 s, and backed off again to 60 s
    // (without the reset it would have been 120 s).
    assert_eq!(d.next_call_after, Some(60.0));
    assert_eq!(weights(&d).len(), 0);
    // A new job showing up on the worker (listener) resets too; it is NL, so no back-off.
    let mut more = jobs_with_c();
    more.truncate(3);
    let d = decide(
        &[],
        &snapshot(70.0, vec![node("w1", 8000)], more),
        &ds[2].state,
    )
    .unwrap();
    assert_eq!(d.next_call_after, Some(30.0));
    assert_eq!(list(&d, "c"), "NL");
}

#[test]
fn a_job_s_list_label_goes_out_when_the_list_changes_only() {
    let jobs = vec![
        job("old").running_on("w1").loss(FLAT),
        job("new").running_on("w1").loss(FAST),
    ];
    let ds = run(&jobs, &[0.0, 30.0, 60.0]);
    let sent = |d: &Decision| -> Vec<String> {
        d.labels
            .iter()
            .map(|l| format!("{}={}", l.job, l.value))
            .collect()
    };
    assert_eq!(sent(&ds[0]), ["old=NL", "new=NL"]);
    assert_eq!(sent(&ds[1]), ["old=WL"], "new is still NL");
    assert_eq!(sent(&ds[2]), ["old=CL"]);
}

#[test]
fn a_cl_job_is_held_at_its_share_but_never_below_one_over_beta_n() {
    let jobs = vec![
        job("old").running_on("w1").loss(FLAT),
        job("new").running_on("w1").loss(FAST),
    ];
    let ds = run(&jobs, &[0.0, 30.0, 60.0]);
    // old: NL -> WL -> CL with G = 0; new stays NL (G = 0.0167 > alpha at 30, 0.0133 at 60).
    assert_eq!(list(&ds[2], "old"), "CL");
    assert_eq!(list(&ds[2], "new"), "NL");
    // 2 jobs, beta 2: floor 0.25 of the worker; the share G_old / sum G = 0. Docker
    // gives limits 0.25 and 1 a 25 % / 75 % split: weights 1/3 and 1.
    let w = weights(&ds[2]);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, "old");
    assert!((w[0].1 - 1.0 / 3.0).abs() < 1e-9, "{w:?}");
    assert!(
        ds[2]
            .actions
            .iter()
            .any(|a| a.reason.contains("floor 1/(beta*n) = 0.250 -> limit 0.250"))
    );
}

#[test]
fn limits_are_shares_of_the_worker_as_docker_gives_them() {
    // Section 6.1.3: limits 0.25 and 1 -> 25 % and 75 % of the worker.
    let w = docker_shares(&[0.25, 1.0]);
    assert!((w[0] / (w[0] + w[1]) - 0.25).abs() < 1e-12);
    // One job held at 1/6 beside two unlimited ones keeps 1/6; they split the rest.
    let w = docker_shares(&[1.0 / 6.0, 1.0, 1.0]);
    let total: f64 = w.iter().sum();
    assert!((w[0] / total - 1.0 / 6.0).abs() < 1e-12, "{w:?}");
    assert_eq!(w[1], 1.0);
    assert_eq!(w[2], 1.0);
    // A limit above the equal split does not bind: equal weights.
    assert_eq!(docker_shares(&[0.6, 1.0]), vec![1.0, 1.0]);
}

#[test]
fn the_limit_itself_is_the_weight_when_limits_is_weight() {
    let jobs = vec![
        job("old").running_on("w1").loss(FLAT),
        job("new").running_on("w1").loss(FAST),
    ];
    let given = [setting("limits", "weight")];
    let mut blob = Vec::new();
    let mut last = None;
    for t in [0.0, 30.0, 60.0] {
        let d = decide(
            &given,
            &snapshot(t, vec![node("w1", 8000)], jobs.clone()),
            &blob,
        )
        .unwrap();
        blob = d.state.clone();
        last = Some(d);
    }
    assert_eq!(weights(&last.unwrap()), [("old".to_string(), 0.25)]);
}

#[test]
fn a_wl_job_keeps_the_limit_it_had_and_the_others_keep_theirs() {
    let jobs = vec![
        job("a").running_on("w1").loss(FLAT),
        job("b").running_on("w1").loss(FLAT),
        job("c").running_on("w1").loss(FAST),
    ];
    let ds = run(&jobs, &[0.0, 30.0, 60.0]);
    // At 60: a and b in CL at the floor 1/(2*3) = 1/6, c in NL at 1.
    assert_eq!(list(&ds[2], "a"), "CL");
    let st: State = state::decode(&ds[2].state).unwrap();
    assert!((st.jobs["a"].limit.unwrap() - 1.0 / 6.0).abs() < 1e-12);
    // Docker shares 1/6, 1/6, 2/3: weights 1/4, 1/4, 1.
    let w = weights(&ds[2]);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w.iter().all(|(_, w)| (w - 0.25).abs() < 1e-9), "{w:?}");
    // At 90 c's G (0.0133 -> 0.0017 per second per core) falls below alpha: NL -> WL,
    // its limit stays the 1 it had in NL; a and b stay at the floor, so nobody's
    // weight changes.
    let later: Vec<Job> = jobs
        .iter()
        .cloned()
        .map(|j| {
            let w = if j.id == "c" { 1.0 } else { 0.25 };
            j.cpu_weight(w)
        })
        .collect();
    let d = decide(
        &[],
        &snapshot(90.0, vec![node("w1", 8000)], later),
        &ds[2].state,
    )
    .unwrap();
    assert_eq!(list(&d, "c"), "WL");
    let st: State = state::decode(&d.state).unwrap();
    assert_eq!(st.jobs["c"].limit, Some(1.0));
    assert!(weights(&d).is_empty(), "{:?}", d.actions);
}

#[test]
fn a_job_placed_in_the_round_counts_on_its_worker_at_once() {
    // Two old jobs in CL on w1; c arrives and is placed there in this round.
    let old = vec![
        job("a").running_on("w1").loss(FLAT),
        job("b").running_on("w1").loss(FLAT),
    ];
    let ds = run(&old, &[0.0, 30.0, 60.0]);
    let mut jobs = old.clone();
    jobs.push(job("c"));
    let snap = snapshot(70.0, vec![node("w1", 8000)], jobs)
        .triggered_by(vec![Trigger::JobArrived("c".into())]);
    let d = decide(&[], &snap, &ds[2].state).unwrap();
    assert!(
        matches!(&d.actions[0].op, Operation::Place(p) if p.job == "c"),
        "{:?}",
        d.actions
    );
    // Algorithm 2: c joins NL and Algorithm 1 runs with n = 3, so a and b drop to the
    // floor 1/(2*3) of the worker: Docker shares 1/6, 1/6, 2/3 -> weights 1/4, 1/4, 1.
    assert_eq!(list(&d, "c"), "NL");
    let w = weights(&d);
    assert_eq!(w.len(), 2, "{w:?}");
    for (_, weight) in w {
        assert!((weight - 0.25).abs() < 1e-9);
    }
    assert_eq!(d.next_call_after, Some(30.0), "not all in CL: no back-off");
}

#[test]
fn waiting_jobs_are_placed_least_allocated() {
    let nodes = vec![node("a", 4000).requested(res(3000, 0)), node("b", 4000)];
    let d = decide(&[], &snapshot(0.0, nodes, vec![job("j")]), &[]).unwrap();
    assert!(matches!(&d.actions[0].op, Operation::Place(p) if p.assignments[0].node == "b"));
}

/// Five jobs on a 16-core worker: `lstm` converged (flat) and using 3 cores, the
/// others growing fast on a core each (G above alpha: they stay in NL).
fn five_with_a_capped_one() -> Vec<Job> {
    let mut jobs = vec![job("lstm").running_on("w1").loss(FLAT).cpu_usage(3000)];
    for id in ["a", "b", "c", "d"] {
        jobs.push(job(id).running_on("w1").loss(FAST).cpu_usage(1000));
    }
    jobs
}

fn lstm_limit_reason(d: &Decision) -> String {
    d.actions
        .iter()
        .find(|a| matches!(&a.op, Operation::SetCpuWeight(w) if w.job == "lstm"))
        .map(|a| a.reason.clone())
        .unwrap_or_default()
}

#[test]
fn a_job_capped_below_an_equal_split_is_not_held_below_its_cap() {
    let ds = run_on(&[], 16_000, &five_with_a_capped_one(), &[0.0, 30.0, 60.0]);
    assert_eq!(list(&ds[2], "lstm"), "CL");
    // Unlimited at 30 s it used 3 of 16 cores, under the 3.2 of an equal split: its
    // limit is its cap 0.1875, not the floor 1/(2*5) = 0.1.
    let why = lstm_limit_reason(&ds[2]);
    assert!(why.contains("-> limit 0.188"), "{why}");
    assert!(why.contains("not held below it"), "{why}");
    // The thesis's floor alone when spare_capped is off.
    let off = [setting("spare_capped", "false")];
    let ds = run_on(&off, 16_000, &five_with_a_capped_one(), &[0.0, 30.0, 60.0]);
    let why = lstm_limit_reason(&ds[2]);
    assert!(
        why.contains("floor 1/(beta*n) = 0.100 -> limit 0.100"),
        "{why}"
    );
}

#[test]
fn a_cap_is_seen_only_while_unlimited_and_under_an_equal_split() {
    let mut js = JobState {
        last: Some((0.0, 1.0)),
        ..JobState::default()
    };
    // 4 of 16 cores among 4 running jobs is an equal split: no cap.
    observe_cap(&mut js, 4.0, 16.0, 4);
    assert_eq!(js.capped, None);
    // 3 of 16 among 5 is under the split of 3.2: capped at 3/16.
    observe_cap(&mut js, 3.0, 16.0, 5);
    assert_eq!(js.capped, Some(3.0 / 16.0));
    // Held by a limit, its usage says nothing about its cap.
    let mut held = JobState {
        last: Some((0.0, 1.0)),
        limit: Some(0.1),
        ..JobState::default()
    };
    observe_cap(&mut held, 1.6, 16.0, 5);
    assert_eq!(held.capped, None);
    // A job never measured before (just started) is not judged yet.
    let mut new = JobState::default();
    observe_cap(&mut new, 1.0, 16.0, 5);
    assert_eq!(new.capped, None);
}

#[test]
fn a_capped_job_above_an_equal_split_gets_the_thesis_limit() {
    // Capped at 3/16 among 6 jobs: the split 1/6 is below the cap, so the floor
    // 1/(2*6) applies as for any job.
    let (limit, why) = cl_limit(0.0, 1.0 / 12.0, Some(3.0 / 16.0), 6);
    assert!((limit - 1.0 / 12.0).abs() < 1e-12, "{why}");
    // A G share above the cap wins over it.
    let (limit, _) = cl_limit(0.3, 0.1, Some(3.0 / 16.0), 5);
    assert!((limit - 0.3).abs() < 1e-12);
    // Among 5 the cap holds.
    let (limit, _) = cl_limit(0.0, 0.1, Some(3.0 / 16.0), 5);
    assert!((limit - 3.0 / 16.0).abs() < 1e-12);
}
