//! A policy that describes itself and decides, but whose `configure` never returns:
//! it loads, and every run that configures it fails, so `policy validate` must call
//! `configure` (under the deadline) to refuse it.

use switchyard_policy_sdk::{Decision, Description, Guest, Setting, Snapshot};

pub struct StuckConfigure;

impl Guest for StuckConfigure {
    fn describe() -> Description {
        Description {
            name: "stuck-configure".into(),
            version: "0.0.0".into(),
            summary: "configure spins forever".into(),
            parameters: vec![],
            reads_loss: false,
        }
    }
    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        let mut x = settings.len() as u64;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    fn decide(_: Vec<Setting>, _: Snapshot, state: Vec<u8>) -> Result<Decision, String> {
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
switchyard_policy_sdk::export!(StuckConfigure with_types_in switchyard_policy_sdk::bindings);
