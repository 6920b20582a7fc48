//! The control loop on the simulator when its policy fails or goes: the default policy
//! standing in for a failing one, the previous policy after a hot swap to a broken one,
//! a shadow policy that never returns, and a controller restart that loses every
//! policy's state while the jobs' move histories stay with the cluster.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::simulator::{cpu_job, node, sim};
use switchyard_control::{Cluster, ControlLoop, PolicySlot};
use switchyard_core::{MoveKind, Operation};
use switchyard_runtime::{PolicyRef, Runtime};
use switchyard_sim::{Simulator, Workload};

fn two_jobs_ten_seconds_apart() -> Simulator {
    let mut jobs = vec![cpu_job("a", 50.0, 1.0, 1.0), cpu_job("b", 80.0, 1.0, 1.0)];
    jobs[1].submit_time = 10.0;
    sim(vec![node("n1", 4.0)], jobs)
}

/// The test guest that never returns from `decide`.
/// The runtimes of these scenarios: a generous deadline for the policies that answer,
/// so a loaded machine does not fail their calls too, and a short one for the guest
/// that never returns, so its calls fail quickly.
fn runtimes() -> (Runtime, Runtime) {
    (
        support::generous_runtime(),
        support::runtime_with_deadline(Duration::from_millis(30)),
    )
}

fn looping_guest(runtime: &Runtime) -> std::sync::Arc<switchyard_runtime::PolicyModule> {
    runtime
        .load(
            &std::fs::read(support::guest("looping")).unwrap(),
            "looping",
        )
        .unwrap()
}

#[test]
fn when_the_policy_fails_the_default_policy_decides_and_every_job_still_finishes() {
    let (runtime, looping_runtime) = runtimes();
    let looping = looping_guest(&looping_runtime);
    let default = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let active = PolicySlot::new(looping, Default::default());
    let fallback = PolicySlot::configure(default, &Default::default()).unwrap();
    let mut s = two_jobs_ten_seconds_apart();
    let mut control = ControlLoop::new(active, fallback, 1);
    control.run(&mut s, |_, _| {});
    assert_eq!(s.finished_jobs(), 2, "no job is lost");
    assert!(control.failures() >= 2);
    assert!(
        control
            .records()
            .iter()
            .all(|r| r.arm_a.policy == "default" && r.arm_a.failure.is_some())
    );
    assert_eq!(s.finish_time("a"), Some(50.0));
}

#[test]
fn after_a_hot_swap_to_a_broken_policy_the_previous_policy_decides_not_the_default() {
    let (runtime, looping_runtime) = runtimes();
    let looping = looping_guest(&looping_runtime);
    let load = |name: &str| {
        PolicySlot::configure(
            PolicyRef::parse(name).unwrap().load(&runtime).unwrap(),
            &Default::default(),
        )
        .unwrap()
    };
    let mut s = two_jobs_ten_seconds_apart();
    let mut control = ControlLoop::new(load("even"), load("default"), 1);
    let switchyard_control::Step::Round { triggers, .. } = control.wait_for_round(&mut s) else {
        panic!("the first arrival is a round");
    };
    control.round(&mut s, triggers);
    control.swap_policy(PolicySlot::new(looping, Default::default()));
    control.run(&mut s, |_, _| {});
    assert_eq!(s.finished_jobs(), 2, "no job is lost");
    let records = control.records();
    assert_eq!(records[0].arm_a.policy, "even");
    assert!(records[0].arm_a.failure.is_none());
    assert!(records.len() > 1);
    for r in &records[1..] {
        assert!(r.arm_a.failure.is_some(), "round {} did not fail", r.round);
        assert_eq!(
            r.arm_a.policy, "even",
            "round {} decided by {}",
            r.round, r.arm_a.policy
        );
    }
}

#[test]
fn a_shadow_policy_that_never_returns_changes_nothing_the_active_policy_decides() {
    use switchyard_control::Experiment;
    use switchyard_control::ExperimentMode;
    let (runtime, looping_runtime) = runtimes();
    let load = |name: &str| {
        PolicySlot::configure(
            PolicyRef::parse(name).unwrap().load(&runtime).unwrap(),
            &Default::default(),
        )
        .unwrap()
    };
    let run = |shadow: Option<PolicySlot>| {
        let mut s = two_jobs_ten_seconds_apart();
        let mut control = ControlLoop::new(load("even"), load("default"), 1);
        if let Some(b) = shadow {
            control.start_experiment(Experiment::new(b, ExperimentMode::Shadow));
        }
        control.run(&mut s, |_, _| {});
        let decided: Vec<_> = control
            .records()
            .iter()
            .map(|r| {
                (
                    r.round,
                    r.time,
                    r.arm_a.policy.clone(),
                    r.arm_a.failure.clone(),
                    r.arm_a.accepted.clone(),
                )
            })
            .collect();
        (decided, s.outcomes(), control.experiment_report())
    };
    let (alone, alone_jobs, _) = run(None);
    let looping = PolicySlot::new(looping_guest(&looping_runtime), Default::default());
    let (shadowed, shadowed_jobs, report) = run(Some(looping));
    assert_eq!(
        shadowed, alone,
        "the failing shadow changed arm A's decisions"
    );
    assert_eq!(shadowed_jobs, alone_jobs);
    let report = report.unwrap();
    assert_eq!(report.b_failures, report.rounds, "every shadow call failed");
    assert!(report.rounds >= 2);
}

/// The controller restarts mid-run (a fresh loop: a new policy instance and no state
/// blob at all) while the cluster keeps running, as a Kubernetes cluster does: the jobs'
/// move histories come from the cluster, and SpeCon, which counts its at-most-once
/// reallocations from them, reallocates no job a second time although the state that
/// also remembered them is gone.
#[test]
fn move_histories_outlive_a_controller_restart_and_specon_counts_on_them() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/specon-random-20.yaml");
    let workload = Workload::load(&path).unwrap();
    let mut sim = Simulator::new(workload.scenario(workload.seed()).unwrap());
    let runtime = support::runtime_with_deadline(Duration::from_secs(5));
    let slot = |name: &str| {
        switchyard_sim::load_slot(&runtime, name, &BTreeMap::new()).expect("a built-in")
    };
    let fresh_loop = || ControlLoop::new(slot("specon"), slot("default"), 1);
    let mut control = fresh_loop();
    let mut reallocations: BTreeMap<String, usize> = BTreeMap::new();
    let mut restarted_at = None;
    loop {
        let (triggers, quiescent) = match control.wait_for_round(&mut sim) {
            switchyard_control::Step::End(_) => break,
            switchyard_control::Step::Round {
                triggers,
                quiescent,
            } => (triggers, quiescent),
        };
        let outcome = control.decide_round(&mut sim, triggers);
        for action in &outcome.record.arm_a.accepted {
            if let Operation::Migrate { job, purpose, .. } = &action.op
                && purpose == "reallocate"
            {
                *reallocations.entry(job.clone()).or_default() += 1;
            }
        }
        if quiescent && !outcome.changed {
            break;
        }
        if restarted_at.is_none() && reallocations.len() >= 3 {
            let remembered = sim
                .snapshot(vec![])
                .jobs
                .iter()
                .filter(|j| {
                    j.moves
                        .iter()
                        .any(|m| m.kind == MoveKind::Migrated && m.purpose == "reallocate")
                })
                .count();
            assert!(remembered >= 1, "the cluster shows the reallocations");
            control = fresh_loop();
            restarted_at = Some(sim.now());
        }
    }
    assert!(
        restarted_at.is_some(),
        "SpeCon reallocated: {reallocations:?}"
    );
    assert!(
        reallocations.values().all(|&n| n == 1),
        "a job reallocated twice across the restart at {restarted_at:?}: {reallocations:?}"
    );
}
