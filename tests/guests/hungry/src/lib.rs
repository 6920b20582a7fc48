//! A policy that allocates without bound: the host's memory cap must stop it.

use switchyard_policy_sdk::{Decision, Description, Guest, Setting, Snapshot};

pub struct Hungry;

impl Guest for Hungry {
    fn describe() -> Description {
        Description {
            name: "hungry".into(),
            version: "0.0.0".into(),
            summary: "decide allocates until it is stopped".into(),
            parameters: vec![],
            reads_loss: true,
        }
    }
    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }
    fn decide(_: Vec<Setting>, _: Snapshot, _: Vec<u8>) -> Result<Decision, String> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(std::hint::black_box(vec![7u8; 1 << 20]));
        }
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(Hungry with_types_in switchyard_policy_sdk::bindings);
