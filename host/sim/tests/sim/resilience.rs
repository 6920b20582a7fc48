//! The control loop when things go wrong, on the simulator: actions that fail (the
//! workload's `simulator.faults`), a burst of arrivals too large for a policy to
//! decide on within its deadline (the queue window), and a kept instance lost to an
//! overrun (the priming deadline).

use crate::support;
use support::{policy_slot as slot, simulator_of as simulator};

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use switchyard_control::{
    CallRole, Cluster, ControlLoop, DecisionRecord, FailureReason, PolicySlot, RoundOutcome,
    RunEnd, Step,
};
use switchyard_core::Operation;
use switchyard_runtime::{Runtime, RuntimeOptions, SandboxLimits};
use switchyard_sim::{Simulator, Workload};

fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions::default()).expect("a runtime")
}

/// `jobs` one-core jobs arriving over ten minutes on four 8-core nodes, with `faults`
/// as the `simulator.faults` mapping.
fn faulty(jobs: u32, faults: &str) -> String {
    format!(
        "
cluster:
  nodes:
    - {{name: cpu, count: 4, cpus: 8, memory_gib: 64}}
simulator:
  faults: {faults}
templates:
  small: {{work: 300, speed: 1.0, cpus: 1, memory_gib: 1}}
jobs:
  - {{template: small, count: {jobs}, uniform: 600}}
"
    )
}

/// Runs `workload` under `policy` (a name or a path) to the end, `default` falling back;
/// the loop and the simulator after it.
fn run(runtime: &Runtime, policy: &str, workload: &str, seed: u64) -> (ControlLoop, Simulator) {
    let mut sim = simulator(workload, seed);
    let mut control = ControlLoop::new(slot(runtime, policy), slot(runtime, "default"), seed);
    let end = control.run(&mut sim, |_, _| {});
    assert_eq!(end, RunEnd::Idle, "the run ends with nothing left to do");
    (control, sim)
}

/// Per job, the placements applied and the placements that failed, over `records`.
fn placements(records: &[DecisionRecord]) -> BTreeMap<String, (usize, usize)> {
    let mut per_job: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for record in records {
        for action in &record.arm_a.accepted {
            if let Operation::Place { job, .. } = &action.op {
                per_job.entry(job.clone()).or_default().0 += 1;
            }
        }
        for failed in &record.arm_a.failed {
            if let Operation::Place { job, .. } = &failed.action.op {
                per_job.entry(job.clone()).or_default().1 += 1;
            }
        }
    }
    per_job
}

#[test]
fn with_a_fifth_of_binds_failing_no_job_is_lost_or_bound_twice_and_every_failure_is_recorded() {
    let runtime = runtime();
    let (mut all_failed, mut all_attempts) = (0, 0);
    for seed in 1..=8 {
        let (control, sim) = run(&runtime, "default", &faulty(120, "{place: 0.2}"), seed);
        assert_eq!(sim.finished_jobs(), 120, "seed {seed}: every job finished");
        let per_job = placements(control.records());
        assert_eq!(per_job.len(), 120, "seed {seed}: every job was placed");
        for (job, (applied, _)) in &per_job {
            assert_eq!(*applied, 1, "seed {seed}: {job} was bound {applied} times");
        }
        let failed: Vec<_> = control
            .records()
            .iter()
            .flat_map(|r| &r.arm_a.failed)
            .collect();
        assert!(
            failed.iter().all(|f| f.failure == FailureReason::Injected
                && f.failed_because.contains("simulator.faults.place = 0.2")),
            "{failed:#?}"
        );
        let attempts: usize = per_job.values().map(|(a, f)| a + f).sum();
        assert_eq!(
            failed.len() as u64,
            sim.faults_injected(),
            "seed {seed}: every injected failure is in the records"
        );
        all_failed += failed.len();
        all_attempts += attempts;
    }
    // About one attempt in five fails, over all the runs (one run of ~150 attempts can
    // be far off: seed 1 fails 11 of 131).
    let share = all_failed as f64 / all_attempts as f64;
    assert!(
        (0.15..0.25).contains(&share),
        "{all_failed} of {all_attempts} attempts failed"
    );
}

#[test]
fn injected_failures_are_the_same_on_every_run_with_the_same_seed() {
    let runtime = runtime();
    let workload = faulty(60, "{place: 0.3, migrate: 0.5}");
    let (a, _) = run(&runtime, "default", &workload, 7);
    let (b, _) = run(&runtime, "default", &workload, 7);
    assert_eq!(a.records(), b.records());
    let (c, _) = run(&runtime, "default", &workload, 8);
    assert_ne!(a.records(), c.records(), "another seed, other failures");
}

#[test]
fn a_fault_rate_outside_zero_to_one_or_an_unknown_operation_is_refused_by_name() {
    let error = Workload::parse(&faulty(1, "{place: 1.5}"), Path::new("faults.yaml"))
        .and_then(|w| w.scenario(1))
        .map(|_| ())
        .expect_err("a rate above 1 is refused")
        .to_string();
    assert!(
        error.contains("simulator.faults.place") && error.contains("between 0 and 1"),
        "{error}"
    );
    let error = Workload::parse(&faulty(1, "{bind: 0.2}"), Path::new("faults.yaml"))
        .map(|_| ())
        .expect_err("an unknown operation is refused")
        .to_string();
    assert!(
        error.contains("bind") && error.contains("place") && error.contains("set_cpu_weight"),
        "{error}"
    );
}

/// A policy that never answers when shown more than a thousand waiting jobs and answers
/// at once on fewer: on a burst it overruns any deadline unless the loop shows it less.
fn queue_bound(runtime: &Runtime) -> PolicySlot {
    slot(runtime, &support::guest("queue-bound"))
}

#[test]
fn a_burst_of_ten_thousand_arrivals_is_placed_from_the_first_round_and_every_round_decides() {
    // Which calls overrun is the guest's count of waiting jobs, whatever the machine's
    // speed; the deadline only has to stop the calls that never answer and be far above
    // one that answers at once, even on a machine busy with other work.
    let runtime = support::runtime_with_deadline(Duration::from_secs(1));
    let workload = "
cluster:
  nodes:
    - {name: cpu, count: 25, cpus: 16, memory_gib: 128}
templates:
  small: {work: 600, speed: 1.0, cpus: 1, memory_gib: 1}
jobs:
  - {template: small, count: 10000, at: 0}
";
    let mut sim = simulator(workload, 1);
    // The fallback is as slow as the policy: a window for the policy alone would not do.
    let mut control = ControlLoop::new(queue_bound(&runtime), queue_bound(&runtime), 1);
    // The rounds before the first job finishes (at 600 s): the burst's own.
    let mut rounds: Vec<RoundOutcome> = Vec::new();
    loop {
        let Step::Round { triggers, .. } = control.wait_for_round(&mut sim) else {
            panic!("the burst keeps the loop busy");
        };
        if sim.now() >= 600.0 || rounds.len() == 100 {
            break;
        }
        rounds.push(control.decide_round(&mut sim, triggers));
    }
    for (i, round) in rounds.iter().enumerate() {
        let decided = round.calls.iter().any(|c| {
            matches!(c.role, CallRole::Active | CallRole::Fallback) && c.failure.is_none()
        });
        assert!(decided, "round {i} has a decision: {:?}", round.calls);
    }
    let first = &rounds[0];
    assert_eq!(
        first.calls[0].failure,
        Some("deadline"),
        "shown the whole burst, the policy overruns"
    );
    let window = first
        .record
        .queue_window
        .expect("the fallback saw a window");
    assert_eq!(window.waiting, 10_000);
    assert!(window.shown < 10_000, "{window:?}");
    assert!(
        !first.record.arm_a.accepted.is_empty(),
        "the first round places jobs"
    );
    let placed: usize = rounds.iter().map(|r| r.record.arm_a.accepted.len()).sum();
    assert_eq!(placed, 400, "the 400 cores are taken, one job each");
    assert!(
        rounds.len() <= 10,
        "it takes a few rounds of a few dozen jobs each, not hundreds: {}",
        rounds.len()
    );
    assert!(
        rounds.iter().all(|r| r.record.time < 1.0),
        "the rounds follow each other at once while jobs wait outside the window"
    );
}

/// A policy slow on an instance's first call (work per node) and fast on changes, which
/// stalls once on its first change: the overrun costs its kept instance. The round's
/// deadline is far below the first call's cost and the priming deadline far above it,
/// while a change costs next to nothing, so neither the machine's load nor its speed
/// decides the outcome.
#[test]
fn a_policy_that_overran_decides_again_next_round_its_fresh_instance_primed_under_the_priming_deadline()
 {
    let runtime = Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline: Duration::from_millis(50),
            priming_deadline: Duration::from_secs(30),
            ..SandboxLimits::default()
        },
        ..RuntimeOptions::default()
    })
    .expect("a runtime");
    // 100 nodes: a reset works several times the round's deadline, far inside the
    // priming deadline; a change is a few jobs.
    let workload = "
cluster:
  nodes:
    - {name: cpu, count: 100, cpus: 8, memory_gib: 64}
templates:
  small: {work: 300, speed: 1.0, cpus: 1, memory_gib: 1}
jobs:
  - {template: small, count: 40, uniform: 600}
";
    let (control, sim) = run(&runtime, &support::guest("slow-to-prime"), workload, 1);
    assert_eq!(sim.finished_jobs(), 40, "every job finished");
    let records = control.records();
    let failures: Vec<(u64, &str)> = records
        .iter()
        .filter_map(|r| Some((r.round, r.arm_a.failure.as_deref()?)))
        .collect();
    assert_eq!(
        failures.len(),
        1,
        "only the stall fails; a first call under the round's deadline would fail every round: {failures:?}"
    );
    let (round, failure) = failures[0];
    assert_eq!(round, 1, "the first instance's first change stalls");
    assert!(
        failure.contains("ran past its 50ms deadline") && !failure.contains("first call"),
        "the stall overran the round's deadline: {failure}"
    );
    for record in records.iter().filter(|r| r.round != 1) {
        assert_eq!(
            record.arm_a.policy, "slow-to-prime",
            "round {}",
            record.round
        );
    }
    // Every placement after the overrun came from the second instance, kept to the end:
    // a third reset would show in the reasons.
    let reasons: Vec<&str> = records
        .iter()
        .filter(|r| r.round > 1)
        .flat_map(|r| &r.arm_a.accepted)
        .map(|a| a.reason.as_str())
        .collect();
    assert!(!reasons.is_empty());
    assert!(
        reasons.iter().all(|r| *r == "packed after 2 resets"),
        "{reasons:?}"
    );
}
