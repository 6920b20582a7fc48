//! A policy built against the previous contract, `switchyard:policy@0.2.0` (its WIT is
//! kept in `wit/` as it was released): the host must refuse it with a message that
//! names both versions and says how to rebuild.

wit_bindgen::generate!({ path: "wit", world: "switchyard:policy/policy@0.2.0" });

use exports::switchyard::policy::scheduler::{Decision, Description, Guest, Setting, Snapshot};

/// Places nothing; only its contract version matters.
pub struct Idle;

impl Guest for Idle {
    fn describe() -> Description {
        Description {
            name: "contract-0-2".into(),
            version: "0.2.0".into(),
            summary: "built against the previous contract".into(),
            parameters: vec![],
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
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
export!(Idle);
