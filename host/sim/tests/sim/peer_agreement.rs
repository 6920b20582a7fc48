//! switchyard's simulator against a peer: the Pollux artifact's own simulator (issue
//! 19). Both run the eight Pollux workloads under strict first-come-first-served,
//! all-or-nothing placement (the peer's `fifo`, switchyard's `gang` with
//! `starve-after=0`); the peer's per-job outputs are checked in under `tests/peer/pollux/`
//! (README there: where they come from, the command that regenerates them).
//!
//! - With the peer's time step out of the way (`--interval 1 --restart-delay 0`, and no
//!   start delay here): the average job completion time within 5 % and at least 95 % of
//!   the jobs within 10 % of the peer's, on every workload.
//! - With the artifact's settings (its scheduler every 60 s, 30 s of restart on every
//!   allocation; here a 30 s start delay, and decisions when events happen): the average
//!   within 10 %.
//!
//! - Tiresias (contract 0.2's preemptive scheduler): the peer's `tiresias` against
//!   switchyard's `tiresias` with the artifact's settings (two queues split at 16
//!   GPU-hours, a round every 60 s, 30 s of restart on every allocation including a
//!   resumed one, a free checkpoint): the average within 10 %.
//!
//! `cargo test -p switchyard-sim --test sim peer_agreement:: -- --nocapture` prints the
//! tables that `docs/reproduction.md` shows.

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::Deserialize;
use switchyard_runtime::Runtime;
use switchyard_sim::{Records, Workload, load_slot, run_offline};

/// One job as the peer's `run_pollux.py` writes it.
#[derive(Deserialize)]
struct PeerJob {
    name: String,
    jct: f64,
}

#[derive(Deserialize)]
struct PeerRun {
    avg_jct: f64,
    jobs: Vec<PeerJob>,
}

/// The peer's settings, as its output files are named.
#[derive(Clone, Copy)]
struct Setting {
    /// `--interval`: seconds between the peer's scheduling rounds.
    interval: u32,
    /// `--restart-delay`: seconds of no progress after each allocation; ours is the
    /// workload's `simulator.start_delay`.
    delay: u32,
}

const STEP_FREE: Setting = Setting {
    interval: 1,
    delay: 0,
};
const UPSTREAM: Setting = Setting {
    interval: 60,
    delay: 30,
};

/// A policy as both simulators name it, with switchyard's settings for it.
#[derive(Clone, Copy)]
struct Pair {
    /// The peer's `--policy`, as its output files are named.
    peer: &'static str,
    /// switchyard's policy.
    ours: &'static str,
    /// switchyard's settings, `name=value`.
    settings: &'static [(&'static str, &'static str)],
}

/// Strict first-come-first-served, all-or-nothing.
const FIFO: Pair = Pair {
    peer: "fifo",
    ours: "gang",
    settings: &[("starve-after", "0")],
};

/// Tiresias with the artifact's queue threshold and round.
const TIRESIAS: Pair = Pair {
    peer: "tiresias",
    ours: "tiresias",
    settings: &[("queue_thresholds", "57600"), ("interval", "60")],
};

/// How the two simulators compare on one workload.
struct Agreement {
    jobs: usize,
    ours_avg: f64,
    peer_avg: f64,
    /// Share of the jobs whose completion time is within 10 % of the peer's.
    within_10: f64,
    /// Smallest and largest per-job ratio ours / peer.
    ratios: (f64, f64),
}

impl Agreement {
    fn avg_diff(&self) -> f64 {
        self.ours_avg / self.peer_avg - 1.0
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn peer(pair: Pair, workload: u32, setting: Setting) -> PeerRun {
    let path = repo().join(format!(
        "tests/peer/pollux/{}-interval{}-delay{}-workload{workload}.json",
        pair.peer, setting.interval, setting.delay
    ));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn compare(runtime: &Runtime, pair: Pair, workload: u32, setting: Setting) -> Agreement {
    let path = repo().join(format!("examples/pollux-workload-{workload}.yaml"));
    let file = Workload::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut scenario = file.scenario(file.seed()).unwrap_or_else(|e| panic!("{e}"));
    scenario.config.start_delay = f64::from(setting.delay);
    // The peer restarts a resumed job like any other allocation and saves no checkpoint.
    scenario.config.checkpoint_cost = 0.0;
    scenario.config.restore_cost = 0.0;
    let settings: BTreeMap<String, String> = pair
        .settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let fallback = load_slot(runtime, "default", &BTreeMap::new()).expect("default policy");
    let run = run_offline(
        runtime,
        pair.ours,
        &settings,
        &fallback,
        scenario,
        1,
        Records::Stream,
        |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.result.summary.policy_failures, 0);
    let ours: HashMap<&str, f64> = run
        .result
        .jobs
        .iter()
        .map(|j| {
            let finish = j
                .finish_time
                .unwrap_or_else(|| panic!("workload {workload}: {} never finished", j.id));
            (j.id.as_str(), finish - j.submit_time)
        })
        .collect();
    let peer = peer(pair, workload, setting);
    assert_eq!(
        ours.len(),
        peer.jobs.len(),
        "workload {workload}: both simulators run the same jobs"
    );
    let ratios: Vec<f64> = peer
        .jobs
        .iter()
        .map(|p| {
            let mine = ours
                .get(p.name.as_str())
                .unwrap_or_else(|| panic!("workload {workload}: no job {}", p.name));
            mine / p.jct
        })
        .collect();
    let n = ratios.len();
    Agreement {
        jobs: n,
        ours_avg: ours.values().sum::<f64>() / n as f64,
        peer_avg: peer.avg_jct,
        within_10: ratios.iter().filter(|r| (*r - 1.0).abs() <= 0.10).count() as f64 / n as f64,
        ratios: ratios
            .iter()
            .fold((f64::INFINITY, 0.0), |(lo, hi), &r| (lo.min(r), hi.max(r))),
    }
}

fn runtime() -> Runtime {
    support::generous_runtime()
}

fn table(pair: Pair, setting: Setting, runs: &[(u32, Agreement)]) {
    println!(
        "\npeer {} --interval {} --restart-delay {}; switchyard {} start_delay {}",
        pair.peer, setting.interval, setting.delay, pair.ours, setting.delay
    );
    println!(
        "| workload | jobs | switchyard avg JCT | peer avg JCT | difference | jobs within 10 % | per-job ratio |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (w, a) in runs {
        println!(
            "| {w} | {} | {:.0} s | {:.0} s | {:+.1} % | {:.1} % | {:.2} to {:.2} |",
            a.jobs,
            a.ours_avg,
            a.peer_avg,
            100.0 * a.avg_diff(),
            100.0 * a.within_10,
            a.ratios.0,
            a.ratios.1
        );
    }
}

#[test]
fn without_time_steps_every_workload_agrees_with_the_peer_job_by_job() {
    let runtime = runtime();
    let runs: Vec<(u32, Agreement)> = (1..=8)
        .map(|w| (w, compare(&runtime, FIFO, w, STEP_FREE)))
        .collect();
    table(FIFO, STEP_FREE, &runs);
    for (w, a) in &runs {
        assert!(
            a.avg_diff().abs() <= 0.05,
            "workload {w}: average JCT {:.0} s against the peer's {:.0} s",
            a.ours_avg,
            a.peer_avg
        );
        assert!(
            a.within_10 >= 0.95,
            "workload {w}: only {:.1} % of jobs within 10 % (ratios {:.2} to {:.2})",
            100.0 * a.within_10,
            a.ratios.0,
            a.ratios.1
        );
    }
}

#[test]
fn with_the_artifacts_settings_every_workload_agrees_with_the_peer_on_average() {
    let runtime = runtime();
    let runs: Vec<(u32, Agreement)> = (1..=8)
        .map(|w| (w, compare(&runtime, FIFO, w, UPSTREAM)))
        .collect();
    table(FIFO, UPSTREAM, &runs);
    for (w, a) in &runs {
        assert!(
            a.avg_diff().abs() <= 0.10,
            "workload {w}: average JCT {:.0} s against the peer's {:.0} s",
            a.ours_avg,
            a.peer_avg
        );
    }
}

#[test]
fn tiresias_agrees_with_the_peers_tiresias_on_average() {
    let runtime = runtime();
    let runs: Vec<(u32, Agreement)> = (1..=8)
        .map(|w| (w, compare(&runtime, TIRESIAS, w, UPSTREAM)))
        .collect();
    table(TIRESIAS, UPSTREAM, &runs);
    for (w, a) in &runs {
        assert!(
            a.avg_diff().abs() <= 0.10,
            "workload {w}: tiresias average JCT {:.0} s against the peer's {:.0} s",
            a.ours_avg,
            a.peer_avg
        );
    }
}
