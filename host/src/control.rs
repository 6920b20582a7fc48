//! The control loop: snapshot -> policy -> [`validate::check_decision`] -> apply.
//!
//! It owns the round: when to call the policy (every job arrival or departure, and when
//! the policy's `next_call_after` falls due), the policy's state blob between calls, and
//! what happens when a policy fails (the round is decided by a fallback policy, by default
//! the built-in `default`, and the failure is recorded). It talks to a cluster only
//! through [`Cluster`], so it does not know whether it drives the simulator or a real
//! cluster; it must not reach into either.

mod record;

use std::sync::Arc;

pub use record::{DecisionRecord, RejectedRecord};

use crate::model::{Action, JobLabel, Operation, Settings, Snapshot, Trigger};
use crate::runtime::PolicyModule;
use crate::validate;

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

/// A cluster the loop can drive: the simulator, or (later) a real one.
pub trait Cluster {
    /// The cluster's clock, seconds.
    fn now(&self) -> f64;
    /// Lets time pass until something the policy must hear about happens, or until
    /// `until` (when given).
    fn advance(&mut self, until: Option<f64>) -> Advance;
    /// The state the policy sees now, with the reasons for the call.
    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot;
    /// Carries out actions the validator accepted, and the policy's labels.
    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]);
    /// Jobs that have finished so far (for progress reporting).
    fn finished_jobs(&self) -> usize;
}

/// A policy ready to decide: the module and its effective settings.
#[derive(Clone, Debug)]
pub struct PolicySlot {
    /// The loaded component.
    pub module: Arc<PolicyModule>,
    /// Effective settings (as returned by `configure`).
    pub settings: Settings,
}

impl PolicySlot {
    /// Configures `module` with `settings` (defaults filled in by the policy).
    pub fn configure(
        module: Arc<PolicyModule>,
        settings: &Settings,
    ) -> Result<Self, crate::runtime::PolicyError> {
        let settings = module.configure(settings)?;
        Ok(Self { module, settings })
    }
}

/// How a run of the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunEnd {
    /// Nothing more was going to happen (all jobs finished, or the rest are stuck).
    Idle,
    /// The cluster's time limit was reached.
    TimeLimit,
}

/// The control loop. The active policy can be swapped between rounds
/// ([`ControlLoop::swap_policy`]); its state blob is kept across the swap.
pub struct ControlLoop {
    active: PolicySlot,
    fallback: PolicySlot,
    state: Vec<u8>,
    fallback_state: Vec<u8>,
    seed: u64,
    next_tick: Option<f64>,
    rounds: u64,
    failures: u64,
    keep_records: bool,
    records: Vec<DecisionRecord>,
}

impl ControlLoop {
    /// A loop deciding with `active`, falling back to `fallback` when it fails. `seed`
    /// seeds the policies' randomness (combined with the round number).
    pub fn new(active: PolicySlot, fallback: PolicySlot, seed: u64) -> Self {
        Self {
            active,
            fallback,
            state: Vec::new(),
            fallback_state: Vec::new(),
            seed,
            next_tick: None,
            rounds: 0,
            failures: 0,
            keep_records: true,
            records: Vec::new(),
        }
    }

    /// Whether every decision is kept for [`ControlLoop::records`] (on by default).
    pub fn keep_records(mut self, keep: bool) -> Self {
        self.keep_records = keep;
        self
    }

    /// Makes `slot` the active policy from the next round on, keeping the state blob.
    pub fn swap_policy(&mut self, slot: PolicySlot) {
        self.active = slot;
    }

    /// The decisions made so far, oldest first.
    pub fn records(&self) -> &[DecisionRecord] {
        &self.records
    }

    /// Rounds run so far.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Rounds in which the active policy failed and the fallback decided.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Runs rounds until nothing more will happen or the cluster's time runs out;
    /// `on_round` is called after every round (progress reporting).
    pub fn run<C: Cluster>(&mut self, cluster: &mut C, mut on_round: impl FnMut(&C)) -> RunEnd {
        loop {
            let triggers = match cluster.advance(self.next_tick) {
                Advance::Events(mut triggers) => {
                    if self.next_tick.is_some_and(|t| cluster.now() >= t) {
                        triggers.push(Trigger::Tick);
                    }
                    triggers
                }
                Advance::Reached { quiescent } => {
                    let changed = self.round(cluster, vec![Trigger::Tick]);
                    on_round(cluster);
                    if quiescent && !changed {
                        return RunEnd::Idle;
                    }
                    continue;
                }
                Advance::Idle => return RunEnd::Idle,
                Advance::Stopped => return RunEnd::TimeLimit,
            };
            self.round(cluster, triggers);
            on_round(cluster);
        }
    }

    /// One round: snapshot, decide (falling back on failure), validate, apply, record.
    /// Returns whether any accepted action changes the cluster (anything but `wait`).
    pub fn round<C: Cluster>(&mut self, cluster: &mut C, triggers: Vec<Trigger>) -> bool {
        let snapshot = cluster.snapshot(triggers);
        let seed = self.seed ^ self.rounds.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.rounds += 1;
        let mut policy = self.active.module.name().to_string();
        let mut failure = None;
        let decision = match self.active.module.decide(
            &self.active.settings,
            &snapshot,
            &self.state,
            seed,
        ) {
            Ok(decision) => {
                self.state = decision.state.clone();
                Some(decision)
            }
            Err(error) => {
                self.failures += 1;
                tracing::warn!(%error, "policy failed; the fallback decides this round");
                failure = Some(error.to_string());
                policy = self.fallback.module.name().to_string();
                match self.fallback.module.decide(
                    &self.fallback.settings,
                    &snapshot,
                    &self.fallback_state,
                    seed,
                ) {
                    Ok(decision) => {
                        self.fallback_state = decision.state.clone();
                        Some(decision)
                    }
                    Err(error) => {
                        tracing::error!(%error, "the fallback policy failed too; nothing changes");
                        None
                    }
                }
            }
        };
        let decision = decision.unwrap_or_default();
        // The next tick is the active policy's to ask for; a fallback round keeps the
        // previous request so a failing policy is retried when it wanted to be.
        if failure.is_none() {
            self.next_tick = decision
                .next_call_after
                .map(|after| snapshot.time + after.max(1e-3));
        } else if self.next_tick.is_some_and(|t| t <= snapshot.time) {
            self.next_tick = None;
        }
        let checked = validate::check_decision(&snapshot, &decision);
        cluster.apply(&checked.accepted, &decision.labels);
        let changed = checked
            .accepted
            .iter()
            .any(|a| !matches!(a.op, Operation::Wait { .. }));
        if self.keep_records {
            self.records.push(DecisionRecord::new(
                &snapshot, policy, failure, &decision, checked,
            ));
        }
        changed
    }
}
