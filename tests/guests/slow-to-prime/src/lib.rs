//! An incremental policy whose cost is in its first call, as a policy that indexes the
//! whole cluster when an instance starts: a reset works a fixed amount per node, a
//! change costs next to nothing. Its second instance-call stalls until the deadline stops
//! it, once, as a round that overran on a busy machine would. Its state counts the resets
//! it was sent, and every placement's reason names the count, so a test sees whether the
//! instance was kept afterwards. It places waiting single-task jobs first fit.

use switchyard_policy_sdk::{
    Action, Assignment, Decision, Description, IncrementalGuest, JobPhase, Operation, Placement,
    Setting, Snapshot, SnapshotDelta, incremental,
};

pub struct SlowToPrime;

/// Work per node on a reset, in multiply-adds: two to three milliseconds.
const WORK_PER_NODE: u64 = 2_000_000;

impl IncrementalGuest for SlowToPrime {
    fn describe() -> Description {
        Description {
            name: "slow-to-prime".into(),
            version: "0.0.0".into(),
            summary: "slow on an instance's first call, stalls once, then places first fit".into(),
            parameters: vec![],
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }

    fn decide(_: Vec<Setting>, change: SnapshotDelta, state: Vec<u8>) -> Result<Decision, String> {
        let mut resets = state.first().copied().unwrap_or(0);
        let reset = change.reset;
        let nodes = change.nodes.len() as u64;
        if reset {
            resets = resets.saturating_add(1);
            let mut x = change.time as u64;
            for _ in 0..WORK_PER_NODE * nodes {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        } else if resets == 1 {
            // The first instance's first change: stall until stopped. The state is not
            // handed back, so the next instance sees one reset and does not stall.
            loop {
                std::hint::black_box(&resets);
            }
        }
        let actions = incremental::with_applied(change, |snapshot| first_fit(snapshot, resets))?;
        Ok(Decision {
            actions,
            labels: vec![],
            next_call_after: None,
            state: vec![resets],
        })
    }
}

/// Places each waiting job's tasks on the first nodes with room, oldest job first.
fn first_fit(snapshot: &Snapshot, resets: u8) -> Vec<Action> {
    let mut free: Vec<(u64, u64, u32)> = snapshot
        .nodes
        .iter()
        .map(|n| {
            let (a, r) = (&n.allocatable, &n.requested);
            (
                a.cpu_millis.saturating_sub(r.cpu_millis),
                a.memory_bytes.saturating_sub(r.memory_bytes),
                a.gpus.saturating_sub(r.gpus),
            )
        })
        .collect();
    let mut actions = Vec::new();
    for job in snapshot
        .jobs
        .iter()
        .filter(|j| j.phase == JobPhase::Waiting)
    {
        let mut taken = free.clone();
        let mut assignments = Vec::new();
        for task in &job.tasks {
            let r = &task.requests;
            let Some(i) = taken
                .iter()
                .position(|f| f.0 >= r.cpu_millis && f.1 >= r.memory_bytes && f.2 >= r.gpus)
            else {
                break;
            };
            taken[i].0 -= r.cpu_millis;
            taken[i].1 -= r.memory_bytes;
            taken[i].2 -= r.gpus;
            assignments.push(Assignment {
                task: task.name.clone(),
                node: snapshot.nodes[i].name.clone(),
            });
        }
        if assignments.len() == job.tasks.len() {
            free = taken;
            actions.push(Action {
                op: Operation::Place(Placement {
                    job: job.id.clone(),
                    assignments,
                }),
                reason: format!("first fit after {resets} resets"),
            });
        }
    }
    actions
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export_incremental!(SlowToPrime with_types_in switchyard_policy_sdk::incremental::bindings);
