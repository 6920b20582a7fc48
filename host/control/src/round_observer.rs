//! What the loop tells an observer about each round: the snapshot the policy is shown
//! and who decides, before the call; the round's record after it. The recorder
//! ([`crate::recording::Recorder`]) is one; because the loop calls it, the simulated and
//! the Kubernetes controllers are observed the same way. An observer sees; it must not
//! change what the round decides, and a loop without one pays nothing.

use crate::decision_record::DecisionRecord;
use crate::slot::PolicySlot;
use switchyard_core::Snapshot;

/// A round about to be decided.
#[derive(Clone, Copy, Debug)]
pub struct RoundStart<'a> {
    /// The round's number, from 0.
    pub round: u64,
    /// The seed of the policies' randomness this round.
    pub seed: u64,
    /// The snapshot the policy is shown (before any queue window or experiment filter).
    pub snapshot: &'a Snapshot,
    /// The active policy.
    pub active: &'a PolicySlot,
    /// The policy that decides if the active one fails.
    pub fallback: &'a PolicySlot,
    /// The active policy's state blob, as the call will receive it.
    pub active_state: &'a [u8],
}

/// Sees every round the loop runs.
pub trait RoundObserver: Send {
    /// A round is about to be decided on `start.snapshot`.
    fn round_started(&mut self, start: RoundStart<'_>);
    /// The round that last started was decided as `record` says.
    fn round_decided(&mut self, record: &DecisionRecord);
}
