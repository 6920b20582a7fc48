//! A policy that reads nothing and decides nothing. Its `decide` costs only what every
//! call costs (instantiation, moving the snapshot into the guest and the decision back),
//! so `benches/decision.rs` subtracts it to find the time a real policy spends on its
//! own work.

use switchyard_policy_sdk::{Decision, Description, Guest, Setting, Snapshot};

pub struct Null;

impl Guest for Null {
    fn describe() -> Description {
        Description {
            name: "null".into(),
            version: "0.0.0".into(),
            summary: "decides nothing, at once".into(),
            parameters: vec![],
            // It reads no loss either, but a call must move what a loss-reading policy's
            // does: the decision bench subtracts it from theirs.
            reads_loss: true,
        }
    }
    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }
    fn decide(_: Vec<Setting>, snapshot: Snapshot, state: Vec<u8>) -> Result<Decision, String> {
        std::hint::black_box(&snapshot);
        Ok(Decision {
            actions: vec![],
            labels: vec![],
            next_call_after: None,
            state,
        })
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(Null with_types_in switchyard_policy_sdk::bindings);
