//! What the simulator keeps per job, counted: a cluster of long-running jobs whose loss
//! series are full, every job placed, and the snapshot a kept policy instance holds.
//! The unit tests of this crate run under an allocator that counts the bytes each thread
//! has live, so the figure is what the simulator holds, not a resident-set size that
//! depends on the allocator's habits or on the tests running beside it.

use std::path::Path;

use super::{LOSS_HISTORY, Simulator};
use crate::workload::Workload;
use switchyard_control::{Advance, Cluster};
use switchyard_core::{Action, Assignment, Operation, Trigger};
use switchyard_test_support::{CountingAllocator, live_bytes};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// `examples/scale-10000-nodes.yaml` at a twenty-fifth of its size: the same nodes, jobs
/// and evaluations, so the same bytes per job.
const SCALE: &str = "
seed: 7
cluster:
  nodes:
    - {name: node, count: 400, cpus: 64, memory_gib: 256, gpus: 8}
templates:
  trainer:
    work: 1000000
    speed: 1.0
    curve: vae
    eval_every: 600
    roles:
      - {name: ps, cpus: 2, memory_gib: 4}
      - {name: worker, cpus: 2, memory_gib: 4, gpus: 1}
jobs:
  - {template: trainer, count: 2000, uniform: 60}
";

/// Every task of every arriving job bound, one job per node in turn, as a spreading
/// scheduler would; each task is its own action, as `default` places pods.
fn place_arrivals(sim: &mut Simulator, triggers: &[Trigger], next_node: &mut usize) {
    let nodes: Vec<String> = sim.nodes.iter().map(|n| n.spec.name.clone()).collect();
    let mut actions = Vec::new();
    for trigger in triggers {
        let Trigger::JobArrived(id) = trigger else {
            continue;
        };
        let job = &sim.jobs[sim.job_index[id]];
        let node = &nodes[*next_node % nodes.len()];
        *next_node += 1;
        for task in &job.tasks {
            actions.push(Action {
                op: Operation::Place {
                    job: id.clone(),
                    assignments: vec![Assignment {
                        task: task.name.clone(),
                        node: node.clone(),
                    }],
                },
                reason: String::new(),
            });
        }
    }
    let outcomes = sim.apply(&actions, &[]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
}

/// The most bytes the simulator and the held snapshot may keep per running job, nodes
/// included (a node per five jobs, as in the workload above), once its loss series is
/// full. Of it, the series is `LOSS_HISTORY` samples of 24 bytes, kept once for the
/// simulator and every view; the rest is the job's spec, tasks, move history and view.
/// A series copied into each view (another `LOSS_HISTORY` × 24 bytes) goes over it.
const KEPT_PER_JOB: isize = 3_000;

#[test]
fn a_running_job_with_a_full_loss_series_costs_the_simulator_and_its_held_snapshot_a_bounded_number_of_bytes()
 {
    let before = live_bytes();
    let scenario = Workload::parse(SCALE, Path::new("scale.yaml"))
        .unwrap()
        .scenario(7)
        .unwrap();
    let jobs = scenario.jobs.len();
    let mut sim = Simulator::new(scenario);
    let mut next_node = 0;
    // Arrivals, each placed at once.
    while sim.next_arrival < jobs {
        let until = sim.now() + 1.0;
        if let Advance::Events(triggers) = sim.advance(Some(until)) {
            place_arrivals(&mut sim, &triggers, &mut next_node);
        }
    }
    // Then long enough for every job to report more evaluations than its series keeps.
    let full = sim.now() + 2.0 * LOSS_HISTORY as f64 * 600.0;
    while sim.now() < full {
        sim.advance(Some(full));
    }
    let held = sim.snapshot(Vec::new());
    assert_eq!(held.jobs.len(), jobs, "every job is still running");
    assert!(
        held.jobs
            .iter()
            .all(|j| j.loss.len() == LOSS_HISTORY && j.tasks.iter().all(|t| t.node.is_some())),
        "every job placed, its series full"
    );
    let per_job = (live_bytes() - before) / jobs as isize;
    eprintln!("kept per running job: {per_job} bytes");
    assert!(
        per_job <= KEPT_PER_JOB,
        "the simulator and the held snapshot keep {per_job} bytes per job, more than {KEPT_PER_JOB}"
    );
    drop(held);
}
