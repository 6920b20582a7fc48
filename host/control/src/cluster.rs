//! The cluster as the loop sees it ([`Cluster`]): a clock, time that passes until
//! something happens ([`Advance`]), a snapshot, and actions carried out. The simulator
//! and the Kubernetes backend implement it; nothing here knows which one it is.

use crate::outcome::ActionOutcome;
use switchyard_core::{Action, JobLabel, Snapshot, Trigger};

/// What [`Cluster::advance`] stopped for.
#[derive(Clone, Debug, PartialEq)]
pub enum Advance {
    /// Things happened that the policy must hear about.
    Events(Vec<Trigger>),
    /// The requested time was reached with nothing to report. `quiescent` is true when
    /// nothing will ever happen again on its own (no arrival, completion or restart due).
    Reached {
        /// Nothing more will happen without a policy action.
        quiescent: bool,
    },
    /// Nothing more will happen without a policy action, and no time was requested.
    Idle,
    /// The cluster's time limit was reached.
    Stopped,
}

/// A cluster the loop can drive: the simulator, or a real one.
pub trait Cluster {
    /// The cluster's clock, seconds.
    fn now(&self) -> f64;
    /// Lets time pass until something the policy must hear about happens, or until
    /// `until` (when given).
    fn advance(&mut self, until: Option<f64>) -> Advance;
    /// The state the policy sees now, with the reasons for the call.
    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot;
    /// Carries out actions the validator accepted, and the policy's labels. Returns one
    /// outcome per accepted action, in order: an action whose calls failed is reported
    /// as such, never dropped (a half-done gang bind is undone and reported failed).
    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) -> Vec<ActionOutcome>;
    /// Jobs that have finished so far (for progress reporting).
    fn finished_jobs(&self) -> usize;
}
