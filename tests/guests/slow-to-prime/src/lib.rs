//! An incremental policy whose cost is in its first call, as a policy that indexes the
//! whole cluster when an instance starts: a reset works a fixed amount per node, a
//! change costs next to nothing. The first change its first instance is sent stalls until
//! the deadline stops it, as a round that overran on a busy machine would. Its state counts the resets
//! it was sent, and every placement's reason names the count, so a test sees whether the
//! instance was kept afterwards. It places waiting jobs with the SDK's ledger.

use switchyard_policy_sdk::cluster::{Ledger, pending_tasks};
use switchyard_policy_sdk::{
    Action, Decision, Description, IncrementalGuest, JobPhase, Operation, Placement, Setting,
    Snapshot, SnapshotDelta, incremental,
};

pub struct SlowToPrime;

/// Work per node on a reset, in multiply-adds: enough that a reset of the resilience
/// test's hundred nodes takes several times its round's deadline.
const WORK_PER_NODE: u64 = 2_000_000;

impl IncrementalGuest for SlowToPrime {
    fn describe() -> Description {
        Description {
            name: "slow-to-prime".into(),
            version: "0.0.0".into(),
            summary: "slow on an instance's first call, stalls once, then packs waiting jobs"
                .into(),
            parameters: vec![],
            reads_loss: true,
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
        let actions =
            incremental::with_applied(change, |snapshot| place_waiting(snapshot, resets))?;
        Ok(Decision {
            actions,
            labels: vec![],
            next_call_after: None,
            state: vec![resets],
        })
    }
}

/// Places each waiting job's gang where the SDK's ledger packs it, oldest job first.
fn place_waiting(snapshot: &Snapshot, resets: u8) -> Vec<Action> {
    let mut ledger = Ledger::new(snapshot);
    snapshot
        .jobs
        .iter()
        .filter(|j| j.phase == JobPhase::Waiting)
        .filter_map(|job| {
            let assignments = ledger.pack_gang_of(job, &pending_tasks(job))?;
            Some(Action {
                op: Operation::Place(Placement {
                    job: job.id.clone(),
                    assignments,
                }),
                reason: format!("packed after {resets} resets"),
            })
        })
        .collect()
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export_incremental!(SlowToPrime with_types_in switchyard_policy_sdk::incremental::bindings);
