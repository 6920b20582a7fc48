//! Each policy keeps its own state blob across swaps and controller restarts.

use crate::support;

use support::policy_slot as slot;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use switchyard_control::{ControlLoop, DirStateStore, StateError, StateStore};
use switchyard_runtime::Runtime;
use switchyard_sim::{Simulator, Workload};

/// A store that remembers every save, shared with the test.
#[derive(Clone, Default)]
struct Spy(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

impl StateStore for Spy {
    fn load(&self, policy: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.0.lock().unwrap().get(policy).cloned())
    }
    fn save(&self, policy: &str, blob: &[u8]) -> Result<(), StateError> {
        self.0
            .lock()
            .unwrap()
            .insert(policy.to_string(), blob.to_vec());
        Ok(())
    }
}

const WORKLOAD: &str = "
seed: 3
cluster:
  nodes:
    - {name: cpu, count: 2, cpus: 8, memory_gib: 32}
templates:
  vae: {work: 600, speed: 1.0, cpus: 1, max_cores: 4, memory_gib: 2, curve: vae}
jobs:
  - {template: vae, count: 12, every: 40}
";

fn simulator() -> Simulator {
    support::simulator_of(WORKLOAD, 3)
}

/// Runs `rounds` rounds (or until the cluster is idle).
fn run_rounds(control: &mut ControlLoop, sim: &mut Simulator, rounds: usize) {
    for _ in 0..rounds {
        match control.wait_for_round(sim) {
            switchyard_control::Step::Round { triggers, .. } => {
                control.round(sim, triggers);
            }
            switchyard_control::Step::End(_) => return,
        }
    }
}

#[test]
fn swapping_back_resumes_each_policys_own_state_blob() {
    // What is checked is state, not time: a slow round on a loaded machine must not
    // become a fallback round.
    let runtime = support::generous_runtime();
    let spy = Spy::default();
    // `default` hands back whatever state it is given, so its blob shows what it got.
    spy.save("default", b"default's own memory").unwrap();
    let mut sim = simulator();
    let mut control = ControlLoop::new(slot(&runtime, "flowcon"), slot(&runtime, "default"), 1)
        .with_state_store(Box::new(spy.clone()));
    run_rounds(&mut control, &mut sim, 8);
    let flowcon_blob = spy
        .0
        .lock()
        .unwrap()
        .get("flowcon")
        .cloned()
        .expect("flowcon saved its state");
    assert!(!flowcon_blob.is_empty());

    control.swap_policy(slot(&runtime, "default"));
    run_rounds(&mut control, &mut sim, 8);
    assert_eq!(
        spy.0.lock().unwrap()["default"],
        b"default's own memory",
        "default decided with its own blob, not flowcon's"
    );
    assert_eq!(
        spy.0.lock().unwrap()["flowcon"],
        flowcon_blob,
        "flowcon's blob is kept while it is inactive"
    );

    control.swap_policy(slot(&runtime, "flowcon"));
    run_rounds(&mut control, &mut sim, 8);
    assert_eq!(
        control.failures(),
        0,
        "flowcon read its own blob back (a foreign one makes it refuse)"
    );
    let records = control.records();
    assert!(records.iter().any(|r| r.arm_a.policy == "default"));
    assert!(records.last().is_some_and(|r| r.arm_a.policy == "flowcon"));
}

#[test]
fn a_restarted_loop_reads_each_policys_blob_back_from_the_state_directory() {
    // What is checked is state, not time: a slow round on a loaded machine must not
    // become a fallback round.
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    let store = DirStateStore::new(dir.path()).unwrap();
    let mut sim = simulator();
    let mut control = ControlLoop::new(slot(&runtime, "flowcon"), slot(&runtime, "default"), 1)
        .with_state_store(Box::new(store.clone()));
    run_rounds(&mut control, &mut sim, 10);
    drop(control);
    let saved = std::fs::read(store.path_of("flowcon")).unwrap();
    assert!(!saved.is_empty());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| !n.to_string_lossy().ends_with(".state"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no temporary files left behind: {leftovers:?}"
    );
    assert_eq!(store.load("flowcon").unwrap(), Some(saved));
    assert_eq!(store.load("never-ran").unwrap(), None);
}

/// A long, steady workload: CPU jobs with loss curves (SpeCon, FlowCon and even act on
/// them) and distributed GPU jobs with a scalable role (gang, DRAGON and tiresias act on
/// them), arriving one at a time and finishing within minutes, so a few are alive at
/// any time and hundreds have left by the end.
const LONG_WORKLOAD: &str = "
seed: 5
cluster:
  nodes:
    - {name: cpu, count: 2, cpus: 8, memory_gib: 32}
    - {name: gpu, count: 2, cpus: 16, memory_gib: 64, gpus: 4}
templates:
  vae: {work: 120, speed: 1.0, cpus: 1, max_cores: 2, memory_gib: 2, curve: vae}
  ps:
    work: 20000
    model: resnet50
    curve: none
    roles:
      - {name: ps, cpus: 1, memory_gib: 4}
      - {name: worker, count: 2, cpus: 2, memory_gib: 8, gpus: 1}
    scale: {role: worker, min: 1, max: 4}
jobs:
  - {template: vae, count: 200, every: 45}
  - {template: ps, count: 200, every: 45, start: 20}
";

/// Jobs that must have left before the blob is measured.
const LEFT: usize = 300;

/// Runs `policy` over [`LONG_WORKLOAD`] until [`LEFT`] jobs have finished while others
/// are alive; returns the blob it handed back last, the snapshot it decided on then, and
/// how many jobs had finished.
fn long_run(runtime: &Runtime, policy: &str) -> (Vec<u8>, switchyard_core::Snapshot, usize) {
    use switchyard_control::Cluster as _;
    let scenario = Workload::parse(LONG_WORKLOAD, Path::new("long.yaml"))
        .unwrap()
        .scenario(5)
        .unwrap();
    let mut sim = Simulator::new(scenario);
    let spy = Spy::default();
    let mut control = ControlLoop::new(slot(runtime, policy), slot(runtime, "default"), 1)
        .with_state_store(Box::new(spy.clone()))
        .keep_records(false);
    let mut last = None;
    while let switchyard_control::Step::Round {
        triggers,
        quiescent,
    } = control.wait_for_round(&mut sim)
    {
        let snapshot = sim.snapshot(triggers.clone());
        let alive = !snapshot.jobs.is_empty();
        last = Some(snapshot);
        let changed = control.round(&mut sim, triggers);
        if (sim.finished_jobs() >= LEFT && alive) || (quiescent && !changed) {
            break;
        }
    }
    assert_eq!(control.failures(), 0, "{policy} never failed a round");
    let blob = spy
        .0
        .lock()
        .unwrap()
        .get(policy)
        .cloned()
        .unwrap_or_default();
    (blob, last.expect("rounds ran"), sim.finished_jobs())
}

#[test]
fn no_policy_s_state_grows_with_the_jobs_that_have_left() {
    // What is checked is state, not time: a slow round on a loaded machine must not
    // become a fallback round.
    let runtime = support::generous_runtime();
    for policy in [
        "default", "dragon", "even", "flowcon", "gang", "specon", "tiresias",
    ] {
        let (blob, last, finished) = long_run(&runtime, policy);
        assert!(finished >= LEFT, "{policy}: only {finished} jobs finished");
        // What the policy keeps for the jobs alive now: the blob a fresh instance hands
        // back after deciding on the last snapshot with no memory at all.
        let fresh = slot(&runtime, policy)
            .module
            .decide(&Default::default(), &last, &[], 1)
            .unwrap()
            .state;
        // Counters (the next arrival number) may have more digits after hundreds of
        // jobs, and a remembered job carries more than a just-seen one: a few dozen
        // bytes per live job, never one entry per finished job.
        let slack = 64 + 64 * last.jobs.len();
        assert!(
            blob.len() <= fresh.len() + slack,
            "{policy}: state of {} bytes after {finished} finished jobs, {} with the {} live \
             jobs only: it keeps jobs that left\n{}",
            blob.len(),
            fresh.len(),
            last.jobs.len(),
            String::from_utf8_lossy(&blob[..blob.len().min(400)])
        );
    }
}
