//! A policy whose `decide` never returns: the host must cut it at its deadline.

use switchyard_policy_sdk::{Decision, Description, Guest, Setting, Snapshot};

pub struct Looping;

impl Guest for Looping {
    fn describe() -> Description {
        Description {
            name: "looping".into(),
            version: "0.0.0".into(),
            summary: "decide spins forever".into(),
            parameters: vec![],
            reads_loss: true,
        }
    }
    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }
    fn decide(_: Vec<Setting>, snapshot: Snapshot, _: Vec<u8>) -> Result<Decision, String> {
        let mut x = snapshot.time as u64;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(Looping with_types_in switchyard_policy_sdk::bindings);
