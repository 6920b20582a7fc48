//! An offline run: one scenario under one policy on the simulator, start to finish: load
//! the policy, configure it, drive the control loop until nothing more happens, collect
//! the [`RunResult`]. `switchyard simulate` and the reproduction tests share it, so a
//! test measures exactly what the command prints. It decides nothing and prints nothing.
//! (An A/B *experiment* is something else: two policies in one run, in
//! [`switchyard_control::Experiment`].)

use std::sync::Arc;

use crate::report::RunResult;
use crate::simulator::{Scenario, Simulator};
use switchyard_control::{ControlLoop, DecisionRecord, PolicySlot};
use switchyard_core::{DisruptionBudget, Settings};
use switchyard_runtime::{PolicyError, PolicyRef, RegistryError, Runtime};

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The policy (or the fallback) could not be found or loaded.
    #[error(transparent)]
    Load(#[from] RegistryError),
    /// The policy refused its settings.
    #[error("configuring {policy}: {source}")]
    Configure {
        /// The policy as named.
        policy: String,
        /// Its refusal.
        #[source]
        source: PolicyError,
    },
}

impl OfflineError {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            OfflineError::Load(_) => "load",
            OfflineError::Configure { .. } => "configure",
        }
    }
}

/// A finished run: the measured result and the loop (its decision records).
pub struct OfflineRun {
    /// What was measured.
    pub result: RunResult,
    /// The control loop after the run, with every decision it kept ([`Records`]).
    pub control: ControlLoop,
}

/// Loads `policy` (a built-in name or a `.wasm` path) and configures it with `settings`.
pub fn load_slot(
    runtime: &Runtime,
    policy: &str,
    settings: &Settings,
) -> Result<PolicySlot, OfflineError> {
    let module = PolicyRef::parse(policy)?.load(runtime)?;
    PolicySlot::configure(Arc::clone(&module), settings).map_err(|source| OfflineError::Configure {
        policy: policy.to_string(),
        source,
    })
}

/// What an offline run does with its decision records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Records {
    /// Keeps every one in the returned loop (tests, short runs): memory grows with the
    /// rounds.
    Keep,
    /// Keeps none: the run's `on_round` sees each record once (to stream it to a file),
    /// so a long trace runs in bounded memory.
    Stream,
}

/// How an offline run treats its records and its policy's disruptions. A [`Records`]
/// alone is that, under the default disruption budget.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OfflineOptions {
    /// What the run does with its decision records.
    pub records: Records,
    /// How often the policy may disrupt running jobs.
    pub disruption: DisruptionBudget,
}

impl From<Records> for OfflineOptions {
    fn from(records: Records) -> Self {
        Self {
            records,
            disruption: DisruptionBudget::default(),
        }
    }
}

/// Runs `scenario` under `policy` with `settings` (the fallback decides rounds it fails)
/// until the cluster is idle or out of time. `on_round` sees the simulator and the
/// round's record after every round (progress bars, records written as they come).
#[allow(clippy::too_many_arguments)]
pub fn run_offline(
    runtime: &Runtime,
    policy: &str,
    settings: &Settings,
    fallback: &PolicySlot,
    scenario: Scenario,
    seed: u64,
    options: impl Into<OfflineOptions>,
    on_round: impl FnMut(&Simulator, &DecisionRecord),
) -> Result<OfflineRun, OfflineError> {
    let options = options.into();
    let slot = load_slot(runtime, policy, settings)?;
    let effective = slot.settings.clone();
    let mut sim = Simulator::new(scenario);
    let mut control = ControlLoop::new(slot, fallback.clone(), seed)
        .keep_records(options.records == Records::Keep)
        .with_disruption_budget(options.disruption);
    let ended = control.run(&mut sim, on_round);
    let result = RunResult::collect(policy.to_string(), &control, &sim, ended, effective);
    Ok(OfflineRun { result, control })
}
