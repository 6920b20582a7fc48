//! The host's budgets over time against policies that abuse them, in whole offline runs:
//! under the default disruption budget the quickstart finishes every job, in bounded
//! time, under a policy that preempts every running job every round (the `preempt-all`
//! test guest), one that migrates every running job back and forth every round and one
//! that preempts each job near its end every round (the `churn` test guest); a policy
//! that logs all its per-call cap allows every second (the `log-flood` test guest) logs
//! no more over a long run than its log budget per minute allows. That the default
//! budget leaves the shipped policies alone is `disruptions.rs`.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use switchyard_control::{DecisionRecord, RunEnd};
use switchyard_core::Settings;
use switchyard_runtime::{LogRate, Runtime};
use switchyard_sim::{OfflineRun, Records, Workload, load_slot, run_offline};

fn example(name: &str) -> Workload {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    Workload::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `workload` on its own seed under `policy` (a built-in name or a `.wasm` path)
/// with its defaults, under the default disruption budget, keeping every record.
fn run(runtime: &Runtime, workload: &Workload, policy: &str) -> OfflineRun {
    run_with(runtime, workload, policy, &Settings::new())
}

/// [`run`] with `settings` for the policy.
fn run_with(
    runtime: &Runtime,
    workload: &Workload,
    policy: &str,
    settings: &Settings,
) -> OfflineRun {
    let fallback = load_slot(runtime, "default", &BTreeMap::new()).expect("default policy");
    let scenario = workload.scenario(workload.seed()).unwrap();
    run_offline(
        runtime,
        policy,
        settings,
        &fallback,
        scenario,
        workload.seed(),
        Records::Keep,
        |_, _| {},
    )
    .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

/// The reasons of every action the validator turned down in `records`.
fn rejections(records: &[DecisionRecord]) -> impl Iterator<Item = &str> {
    records
        .iter()
        .flat_map(|r| &r.arm_a.rejected)
        .map(|r| r.rejected_because.as_str())
}

/// A refusal of the bound per job, in the validator's words (its `Display`).
const PER_JOB: &str = "the disruption budget allows";

#[test]
fn the_quickstart_finishes_every_job_in_bounded_time_under_policies_that_disrupt_the_same_jobs_forever()
 {
    let runtime = support::generous_runtime();
    let workload = example("quickstart.yaml");
    let honest = run(&runtime, &workload, "default").result.summary.makespan;
    let churn = support::guest("churn");
    let mode = |m: &str| Settings::from([("mode".to_string(), m.to_string())]);
    for (attacker, policy, settings) in [
        (
            "preempt-all",
            support::guest("preempt-all"),
            Settings::new(),
        ),
        ("ping-pong", churn.clone(), mode("ping-pong")),
        ("before-finish", churn.clone(), mode("before-finish")),
    ] {
        let run = run_with(&runtime, &workload, &policy, &settings);
        let summary = &run.result.summary;
        assert_eq!(
            (summary.finished, summary.ended),
            (summary.jobs, RunEnd::Idle),
            "{attacker}: every job finishes: {summary:?}"
        );
        assert_eq!(summary.policy_failures, 0, "{attacker}: {summary:?}");
        let disrupted = summary.preemptions + summary.migrations;
        assert!(disrupted > 0, "{attacker}: the budget lets some through");
        let refused = rejections(run.control.records())
            .filter(|reason| reason.contains(PER_JOB))
            .count();
        assert!(
            refused as u64 > disrupted,
            "{attacker}: the budget refused more disruptions ({refused}) than it let through ({disrupted})"
        );
        // Each job loses at most the bound's restarts per interval: the attacked
        // cluster finishes within twice the time an honest policy takes.
        assert!(
            summary.makespan <= 2.0 * honest,
            "{attacker}: makespan {:.0}s, an honest policy's {honest:.0}s",
            summary.makespan
        );
    }
}

/// One job that runs for ten minutes of cluster time, while log-flood is called every
/// second.
const TEN_MINUTES: &str = "seed: 1
cluster:
  nodes:
    - {name: n, cpus: 4, memory_gib: 8}
templates:
  t: {work: 600, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}
jobs:
  - {template: t}
";

#[test]
fn a_long_run_under_a_policy_that_floods_its_log_logs_within_its_budget_per_minute() {
    let runtime = support::generous_runtime();
    let workload = Workload::parse(TEN_MINUTES, Path::new("ten-minutes.yaml")).unwrap();
    let (run, text) =
        support::captured_logs(|| run(&runtime, &workload, &support::guest("log-flood")));
    let summary = &run.result.summary;
    assert_eq!(summary.finished, 1, "{summary:?}");
    let last_round = run.control.records().last().expect("rounds").time;
    let minutes = last_round / 60.0;
    assert!(minutes >= 9.0, "a long run: {minutes:.1} minutes");
    assert!(
        summary.rounds as f64 >= minutes * 50.0,
        "called about every second: {} rounds",
        summary.rounds
    );

    // The guest's lines are `t=TIME xxx...`; the host's report of what it dropped is
    // one line of its own.
    let logged: Vec<&str> = text.lines().filter(|l| l.contains("xxxxxxxx")).collect();
    let reports = text
        .lines()
        .filter(|l| l.contains("per minute of cluster time"))
        .count();
    let rate = LogRate::default();
    let allowed = |per_minute: usize| (per_minute as f64 * (minutes + 1.0)) as usize;
    assert!(!logged.is_empty(), "the budget lets some through");
    assert!(
        logged.len() <= allowed(rate.lines_per_minute),
        "{} lines in {minutes:.1} minutes for a budget of {} a minute",
        logged.len(),
        rate.lines_per_minute
    );
    // A message runs from its `t=` to its last `x`; the rest is the log's own framing.
    let message_len = |line: &str| {
        let message = &line[line.find("t=").expect("the guest's prefix")..];
        message.rfind('x').expect("the guest's fill") + 1
    };
    let bytes: usize = logged.iter().map(|l| message_len(l)).sum();
    assert!(
        bytes <= allowed(rate.bytes_per_minute),
        "{bytes} bytes of log lines in {minutes:.1} minutes for a budget of {} bytes a minute",
        rate.bytes_per_minute
    );
    assert!(
        (1..=minutes as usize + 2).contains(&reports),
        "{reports} reports of dropped lines in {minutes:.1} minutes: one a minute at most"
    );
}
