//! A policy bound as the shipped ones are (`policy_binding!`: the SDK applies each
//! change to the snapshot it holds and notes which jobs it named) that decides nothing
//! and hands its state back as it came. A kept call of it costs what every kept call of
//! a shipped policy costs before the policy's own work: the host's diff, moving the
//! change and the state blob across, the SDK applying the change, the decision's
//! checks. `benches/decision.rs` sets it beside SpeCon and DRAGON.
//!
//! It says it reads loss series; the bench flips the byte after `READS_LOSS`'s marker
//! in the built component (`host/test-support/src/guests.rs`) for the cost of a policy that
//! does not (as DRAGON), with no second component to build.

/// The marker the bench looks for, then `1` (reads loss series) or `0`.
#[used]
static READS_LOSS: [u8; 23] = *b"SWITCHYARD-READS-LOSS:1";

pub mod policy {
    //! Decides nothing.

    use switchyard_policy_sdk::{Decision, Description, Setting, Snapshot};

    /// Whether the component says it reads loss series (its marker's last byte).
    fn reads_loss() -> bool {
        // Read through a volatile pointer: the byte changes after compilation.
        let flag: [u8; 23] = unsafe { std::ptr::read_volatile(&super::READS_LOSS) };
        flag[22] == b'1'
    }

    /// Its name and whether it reads loss series.
    pub fn describe() -> Description {
        Description {
            name: "idle".into(),
            version: "0.0.0".into(),
            summary: "applies each change, decides nothing".into(),
            parameters: vec![],
            reads_loss: reads_loss(),
        }
    }

    /// Takes any settings.
    pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
        Ok(settings.to_vec())
    }

    /// No action, no label, the state as it came.
    pub fn decide(_: &[Setting], snapshot: &Snapshot, state: &[u8]) -> Result<Decision, String> {
        std::hint::black_box(snapshot);
        Ok(Decision {
            actions: vec![],
            labels: vec![],
            next_call_after: None,
            state: state.to_vec(),
        })
    }
}

switchyard_policy_sdk::policy_binding!(Idle, policy);
