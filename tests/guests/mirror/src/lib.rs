//! An incremental policy that decides nothing and hands back, as its state, whether the
//! host sent a reset, how many whole jobs and loss updates the change carried, and the
//! `Debug` form of the snapshot it holds after applying the change.
//! `host/runtime/tests/runtime/incremental.rs` compares that with the whole snapshot lowered natively: any
//! delta the SDK applies wrongly shows up as a difference.
//!
//! It says it reads loss series; a test flips the byte after `READS_LOSS`'s marker in
//! the built component (`host/test-support/src/guests.rs`) to have the same guest say it does
//! not, with no second component to build.

use switchyard_policy_sdk::{
    Decision, Description, IncrementalGuest, Setting, SnapshotDelta, incremental,
};

/// The marker tests look for, then `1` (reads loss series) or `0`.
#[used]
static READS_LOSS: [u8; 23] = *b"SWITCHYARD-READS-LOSS:1";

fn reads_loss() -> bool {
    // Read through a volatile pointer: the byte changes after compilation.
    let flag: [u8; 23] = unsafe { std::ptr::read_volatile(&READS_LOSS) };
    flag[22] == b'1'
}

pub struct Mirror;

impl IncrementalGuest for Mirror {
    fn describe() -> Description {
        Description {
            name: "mirror".into(),
            version: "0.0.0".into(),
            summary: "answers with the snapshot it holds".into(),
            parameters: vec![],
            reads_loss: reads_loss(),
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }

    fn decide(_: Vec<Setting>, change: SnapshotDelta, _: Vec<u8>) -> Result<Decision, String> {
        let head = format!(
            "reset={} jobs={} loss-updates={}",
            change.reset,
            change.jobs.len(),
            change.loss_updates.jobs.len()
        );
        let held = incremental::with_applied(change, |snapshot| format!("{snapshot:?}"))?;
        Ok(Decision {
            actions: vec![],
            labels: vec![],
            next_call_after: None,
            state: format!("{head}\n{held}").into_bytes(),
        })
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export_incremental!(Mirror with_types_in switchyard_policy_sdk::incremental::bindings);
