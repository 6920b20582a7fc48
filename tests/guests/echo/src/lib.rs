//! A policy of the `policy` world (a fresh instance and the whole snapshot on every
//! call) that decides nothing and hands back, as its state, the `Debug` form of the
//! snapshot it was given: the whole-snapshot twin of `tests/guests/mirror`.
//!
//! It says it reads loss series; a test flips the byte after `READS_LOSS`'s marker in
//! the built component (`host/test-support/src/guests.rs`) to have it say it does not.

use switchyard_policy_sdk::{Decision, Description, Guest, Setting, Snapshot};

/// The marker tests look for, then `1` (reads loss series) or `0`.
#[used]
static READS_LOSS: [u8; 23] = *b"SWITCHYARD-READS-LOSS:1";

fn reads_loss() -> bool {
    // Read through a volatile pointer: the byte changes after compilation.
    let flag: [u8; 23] = unsafe { std::ptr::read_volatile(&READS_LOSS) };
    flag[22] == b'1'
}

pub struct Echo;

impl Guest for Echo {
    fn describe() -> Description {
        Description {
            name: "echo".into(),
            version: "0.0.0".into(),
            summary: "answers with the snapshot it was given".into(),
            parameters: vec![],
            reads_loss: reads_loss(),
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }

    fn decide(_: Vec<Setting>, snapshot: Snapshot, _: Vec<u8>) -> Result<Decision, String> {
        Ok(Decision {
            actions: vec![],
            labels: vec![],
            next_call_after: None,
            state: format!("{snapshot:?}").into_bytes(),
        })
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(Echo with_types_in switchyard_policy_sdk::bindings);
