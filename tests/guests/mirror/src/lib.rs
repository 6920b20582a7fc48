//! An incremental policy that decides nothing and hands back, as its state, whether the
//! host sent a reset and the `Debug` form of the snapshot it holds after applying the
//! change. `tests/incremental.rs` compares that with the whole snapshot lowered natively:
//! any delta the SDK applies wrongly shows up as a difference.

use switchyard_policy_sdk::{
    Decision, Description, IncrementalGuest, Setting, SnapshotDelta, incremental,
};

pub struct Mirror;

impl IncrementalGuest for Mirror {
    fn describe() -> Description {
        Description {
            name: "mirror".into(),
            version: "0.0.0".into(),
            summary: "answers with the snapshot it holds".into(),
            parameters: vec![],
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }

    fn decide(_: Vec<Setting>, change: SnapshotDelta, _: Vec<u8>) -> Result<Decision, String> {
        let reset = change.reset;
        let held = incremental::with_applied(change, |snapshot| format!("{snapshot:?}"))?;
        Ok(Decision {
            actions: vec![],
            labels: vec![],
            next_call_after: None,
            state: format!("reset={reset}\n{held}").into_bytes(),
        })
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export_incremental!(Mirror with_types_in switchyard_policy_sdk::incremental::bindings);
