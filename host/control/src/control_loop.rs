//! The loop ([`ControlLoop`]): the active policy and the fallback, the state blobs, the
//! running experiment, the records kept; when the next round is due ([`Step`]), and a
//! run from start to end ([`ControlLoop::run`]). What one round does (the calls, the
//! fallback, validation and apply) is `round.rs`'s. It talks to a cluster only through
//! [`Cluster`].

use crate::cluster::{Advance, Cluster};
use crate::decision_record::DecisionRecord;
use crate::experiment::{Experiment, ExperimentReport};
use crate::round_observer::RoundObserver;
use crate::slot::PolicySlot;
use crate::state::{MemoryStateStore, PolicyStates, StateStore};
use crate::window::QueueWindow;
use switchyard_core::{DisruptionBudget, Trigger};

/// How a run of the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunEnd {
    /// Nothing more was going to happen (all jobs finished, or the rest are stuck).
    Idle,
    /// The cluster's time limit was reached.
    TimeLimit,
}

/// What [`ControlLoop::wait_for_round`] found.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A round is due with these triggers. `quiescent`: nothing will happen on its own
    /// afterwards, so a round that changes nothing ends the run.
    Round {
        /// Why the policy is called.
        triggers: Vec<Trigger>,
        /// Nothing is due after this round unless it changes something.
        quiescent: bool,
    },
    /// The run is over.
    End(RunEnd),
}

/// The control loop. The active policy can be swapped between rounds
/// ([`ControlLoop::swap_policy`]); every policy keeps its own state blob, so swapping
/// back resumes where it was.
pub struct ControlLoop {
    pub(crate) active: PolicySlot,
    pub(crate) fallback: PolicySlot,
    /// The last policy whose round as the active policy succeeded.
    pub(crate) last_good: Option<PolicySlot>,
    pub(crate) states: PolicyStates,
    pub(crate) experiment: Option<Experiment>,
    pub(crate) seed: u64,
    pub(crate) next_tick: Option<f64>,
    pub(crate) rounds: u64,
    pub(crate) failures: u64,
    /// How many waiting jobs the active policy is shown (see [`window`]).
    pub(crate) window: QueueWindow,
    /// Consecutive rounds in which an applied action failed (sets the retry delay).
    pub(crate) failing_rounds: u32,
    pub(crate) keep_records: bool,
    pub(crate) records: Vec<DecisionRecord>,
    /// Told about every round (the recorder); none costs nothing.
    pub(crate) observer: Option<Box<dyn RoundObserver>>,
    /// How often the policies may disrupt running jobs.
    pub(crate) disruption: DisruptionBudget,
}

impl ControlLoop {
    /// A loop deciding with `active`, falling back to the last good decision maker when
    /// it fails, and to `fallback` when there is none yet. `seed`
    /// seeds the policies' randomness (combined with the round number). State blobs are
    /// kept in memory only; see [`ControlLoop::with_state_store`].
    pub fn new(active: PolicySlot, fallback: PolicySlot, seed: u64) -> Self {
        Self {
            active,
            fallback,
            last_good: None,
            states: PolicyStates::new(Box::new(MemoryStateStore)),
            experiment: None,
            seed,
            next_tick: None,
            rounds: 0,
            failures: 0,
            window: QueueWindow::default(),
            failing_rounds: 0,
            keep_records: true,
            records: Vec::new(),
            observer: None,
            disruption: DisruptionBudget::default(),
        }
    }

    /// Holds every decision to `budget` (the default budget unless told otherwise;
    /// [`DisruptionBudget::OFF`] lets every valid disruption through).
    pub fn with_disruption_budget(mut self, budget: DisruptionBudget) -> Self {
        self.disruption = budget;
        self
    }

    /// The disruption budget decisions are held to.
    pub fn disruption_budget(&self) -> DisruptionBudget {
        self.disruption
    }

    /// Tells `observer` about every round from now on (see [`RoundObserver`]).
    pub fn with_observer(mut self, observer: Box<dyn RoundObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Reads and persists state blobs through `store` (a restart resumes each policy).
    pub fn with_state_store(mut self, store: Box<dyn StateStore>) -> Self {
        self.states = PolicyStates::new(store);
        self
    }

    /// Whether every decision is kept for [`ControlLoop::records`] (on by default).
    pub fn keep_records(mut self, keep: bool) -> Self {
        self.keep_records = keep;
        self
    }

    /// Makes `slot` the active policy from the next round on. Its state blob is the one
    /// it left when it was last active (or persisted), not the previous policy's.
    pub fn swap_policy(&mut self, slot: PolicySlot) {
        self.active = slot;
    }

    /// The active policy.
    pub fn active(&self) -> &PolicySlot {
        &self.active
    }

    /// Starts `experiment` from the next round on, replacing any running one.
    pub fn start_experiment(&mut self, experiment: Experiment) {
        self.experiment = Some(experiment);
    }

    /// Stops the running experiment and returns its final report.
    pub fn stop_experiment(&mut self) -> Option<ExperimentReport> {
        let report = self.experiment_report();
        self.experiment = None;
        report
    }

    /// The running experiment's figures so far.
    pub fn experiment_report(&self) -> Option<ExperimentReport> {
        self.experiment
            .as_ref()
            .map(|e| e.report(self.active.module.name()))
    }

    /// The running experiment.
    pub fn experiment(&self) -> Option<&Experiment> {
        self.experiment.as_ref()
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

    /// State blobs that could not be persisted.
    pub fn state_save_failures(&self) -> u64 {
        self.states.save_failures()
    }

    /// Why state blobs cannot be persisted, while that lasts.
    pub fn state_save_error(&self) -> Option<&str> {
        self.states.save_error()
    }

    /// The store state blobs are persisted in.
    pub fn state_store(&self) -> &dyn StateStore {
        self.states.store()
    }

    /// Reads every policy's blob from the store again before its next call (a replica
    /// that becomes leader takes over what the previous leader persisted).
    pub fn reload_states(&mut self) {
        self.states.forget();
    }

    /// Runs rounds until nothing more will happen or the cluster's time runs out;
    /// `on_round` sees the cluster and the record after every round (progress
    /// reporting, records streamed to a file).
    pub fn run<C: Cluster>(
        &mut self,
        cluster: &mut C,
        mut on_round: impl FnMut(&C, &DecisionRecord),
    ) -> RunEnd {
        loop {
            match self.wait_for_round(cluster) {
                Step::End(end) => return end,
                Step::Round {
                    triggers,
                    quiescent,
                } => {
                    let outcome = self.decide_round(cluster, triggers);
                    let changed = outcome.changed;
                    on_round(cluster, &outcome.record);
                    if quiescent && !changed {
                        return RunEnd::Idle;
                    }
                }
            }
        }
    }

    /// Lets the cluster's time pass until the next round is due (an event, or the tick
    /// the policy asked for), without deciding it: a driver can change policies between
    /// this and [`ControlLoop::decide_round`].
    pub fn wait_for_round<C: Cluster>(&mut self, cluster: &mut C) -> Step {
        let advance = cluster.advance(self.next_tick);
        self.step_from(advance, cluster.now())
    }

    /// When the policy asked for its next tick, cluster seconds.
    pub fn next_tick(&self) -> Option<f64> {
        self.next_tick
    }

    /// What an [`Advance`] to [`ControlLoop::next_tick`] means for the loop, the cluster
    /// standing at `now` (for drivers that advance the cluster themselves).
    pub fn step_from(&self, advance: Advance, now: f64) -> Step {
        match advance {
            Advance::Events(mut triggers) => {
                if self.next_tick.is_some_and(|t| now >= t) {
                    triggers.push(Trigger::Tick);
                }
                Step::Round {
                    triggers,
                    quiescent: false,
                }
            }
            Advance::Reached { quiescent } => Step::Round {
                triggers: vec![Trigger::Tick],
                quiescent,
            },
            Advance::Idle => Step::End(RunEnd::Idle),
            Advance::Stopped => Step::End(RunEnd::TimeLimit),
        }
    }
}
