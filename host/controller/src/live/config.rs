//! How the live controller runs ([`LiveConfig`]) and what it refuses or cannot do
//! ([`LiveError`]): the settings and the one error of the `live` module, kept apart so
//! that the driver and the catalog can name them without reaching into the controller.

use std::path::PathBuf;
use std::time::Duration;

use switchyard_control::{AckRefused, ExperimentError, RecordOptions, RecordingError, StateError};
use switchyard_core::DisruptionBudget;

use super::catalog::CatalogError;
use super::registry_access::RegistryAccess;

/// How the live controller runs.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// Virtual seconds per wall second (simulator only).
    pub speed: f64,
    /// The policy active at start (a catalog name), unless the state directory says
    /// which one was active when the controller stopped.
    pub policy: String,
    /// The policy that decides a round when another fails.
    pub fallback: String,
    /// Where state blobs, the active policy and uploaded components are persisted by
    /// [`Controller::start_simulated`](super::Controller::start_simulated); none keeps them in memory only (an upload is then
    /// gone after a restart, and its answer says so). A cluster backend hands
    /// [`Controller::start`](super::Controller::start) stores of its own instead.
    pub state_dir: Option<PathBuf>,
    /// Decision records kept for the API, most recent.
    pub keep_decisions: usize,
    /// The most the kept decision records may hold together, in bytes
    /// ([`DecisionRecord::footprint`](switchyard_control::DecisionRecord::footprint)); the oldest go first. [`LiveConfig::keep_decisions`]
    /// is what binds for rounds of a few actions; this binds when rounds place thousands
    /// of jobs at once (a controller catching up), whose records would otherwise keep a
    /// copy of every placement.
    pub keep_decisions_bytes: usize,
    /// Seeds the policies' randomness.
    pub seed: u64,
    /// Utilisation samples kept for the API and the console, most recent.
    pub keep_utilisation: usize,
    /// Wall time between two utilisation samples.
    pub utilisation_every: Duration,
    /// The decision thread counts as stalled, and `/healthz` fails (so the kubelet
    /// restarts the container), when it has not looked at the cluster for this long.
    /// Every API call is bounded, so only a fault holds it longer.
    pub stalled_after: Duration,
    /// Record every round to this directory ([`switchyard_control::Recorder`]); the
    /// options' seed is set to [`LiveConfig::seed`] at start.
    pub record: Option<RecordOptions>,
    /// How often the policies may disrupt running jobs.
    pub disruption: DisruptionBudget,
    /// How policies named by a registry reference are pulled (logins, insecure
    /// registries, cache, size limit); none: anonymously over TLS, up to the API's
    /// upload limit.
    pub registry: Option<RegistryAccess>,
}

/// What the kept decision records may hold by default, in bytes: a thousand rounds of a
/// few actions each fit many times over; the last tens of thousands of actions of a burst
/// of placements do too.
pub(crate) const DEFAULT_KEEP_DECISIONS_BYTES: usize = 8 << 20;

/// Utilisation samples kept by default: an hour at one sample a second.
pub(crate) const DEFAULT_KEEP_UTILISATION: usize = 3600;

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            speed: 1.0,
            policy: "default".into(),
            fallback: "default".into(),
            state_dir: None,
            keep_decisions: 1000,
            keep_decisions_bytes: DEFAULT_KEEP_DECISIONS_BYTES,
            seed: 0,
            keep_utilisation: DEFAULT_KEEP_UTILISATION,
            utilisation_every: Duration::from_secs(1),
            stalled_after: Duration::from_secs(120),
            record: None,
            disruption: DisruptionBudget::default(),
            registry: None,
        }
    }
}

/// Something the live controller refused or could not do.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A catalog operation failed (unknown policy, refused component or parameters).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The experiment description is wrong.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    /// The state directory cannot be used.
    #[error(transparent)]
    State(#[from] StateError),
    /// The recording directory cannot be used.
    #[error("recording: {0}")]
    Recording(#[from] RecordingError),
    /// No experiment is running.
    #[error("no experiment is running; start one with POST /v1/experiment")]
    NoExperiment,
    /// An experiment is running and the request did not say to replace it.
    #[error(
        "an experiment is running ({running}); stop it first (DELETE /v1/experiment, `switchyard \
         ctl experiment stop`) or replace it (`\"replace\": true`, `--replace`)"
    )]
    ExperimentRunning {
        /// The running experiment, in a few words.
        running: String,
    },
    /// A loss sample or a checkpoint acknowledgement for a job the cluster does not have.
    #[error(
        "no active job `{0}`: loss samples and checkpoints are taken for waiting, running or \
         restarting jobs only"
    )]
    UnknownJob(String),
    /// A checkpoint acknowledgement the cluster refused.
    #[error(transparent)]
    Checkpoint(#[from] AckRefused),
    /// A loss sample that is not a number, or absurdly large.
    #[error(
        "loss value {0} is not a finite number of magnitude at most {max:e}",
        max = switchyard_control::LOSS_MAGNITUDE_MAX
    )]
    BadLossValue(f64),
    /// A change sent to a replica that does not lead.
    #[error(
        "this replica ({identity}) is not the leader{}; it answers reads only. Send changes to the leader (in a cluster: `kubectl port-forward pod/<leader> 8080`, the leader being the Lease's holderIdentity)",
        leader.as_ref().map(|l| format!(" ({l} is)")).unwrap_or_default()
    )]
    NotLeader {
        /// This replica.
        identity: String,
        /// The leader, when known.
        leader: Option<String>,
    },
    /// A policy reference that does not parse, or a registry that refused or failed
    /// the pull; the message names the reference.
    #[error(transparent)]
    Registry(#[from] switchyard_registry::Error),
    /// The decision thread has stopped.
    #[error("the controller is shutting down")]
    Stopped,
    /// The change could not be persisted, so it was not made.
    #[error(
        "the change cannot be persisted ({source}), so it was not made; `{active}` stays \
         active. Fix the state store (a full or read-only state directory?) and try again"
    )]
    NotDurable {
        /// The policy that stays active.
        active: String,
        /// The store's error.
        #[source]
        source: StateError,
    },
    /// The policies directory's settings file decides this; the API does not override it.
    #[error(
        "{what} is set by {file}; change it there (the controller follows that file, and an \
         API change would be undone at its next change)"
    )]
    OwnedBySettings {
        /// The settings file.
        file: String,
        /// What it decides (`the active policy`, `the parameters of specon`, ...).
        what: String,
    },
}
