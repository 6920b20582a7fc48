//! What the [`Controller`](super::Controller) handle and the decision thread (`driver`)
//! share: the catalog, the published status, the metrics, the leader grant, the flags
//! of the thread's life, and the [`Command`]s the handle sends the thread. The driver
//! holds this, not the handle, so it reaches nothing of the handle's own API; this
//! module decides nothing and applies no command (the driver does).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, mpsc};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::catalog::{Catalog, CatalogEntry};
use super::config::LiveError;
use super::kept;
use super::registry_access::RegistryAccess;
use super::views::{JobList, LiveStatus};
use crate::metrics::Metrics;
use switchyard_control::{
    Acknowledged, CheckpointAck, CheckpointRequest, ComponentStore, Experiment, ExperimentReport,
    Leader, LossAck, RefusalHook,
};
use switchyard_core::Settings;

/// What a policies directory's settings file decides. The file is the one source of
/// truth for what it names: the API refuses to change those (409, naming the file) and
/// keeps its say over everything else, so no answer of 200 is ever undone by the file.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct OwnedBySettings {
    /// The settings file.
    pub file: String,
    /// It names the active policy.
    pub active: bool,
    /// It gives parameters for these policies.
    pub parameters: BTreeSet<String>,
    /// It has an `experiment` section.
    pub experiment: bool,
}

/// A change the API asks for, as the settings file may own it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ApiChange<'a> {
    /// Activating a policy.
    Activate,
    /// Setting a policy's parameters.
    Parameters(&'a str),
    /// Starting or stopping an experiment.
    Experiment,
}

/// Who asks for a change: an operator through the API is held to what the settings file
/// owns; the settings file itself is not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChangeBy {
    /// An operator, through the API.
    Api,
    /// The policies directory's settings file.
    SettingsFile,
}

impl ChangeBy {
    /// Refuses `change` when the API asks for it and `owned` (the settings file in
    /// force) decides it.
    pub(super) fn check(
        self,
        owned: Option<&OwnedBySettings>,
        change: ApiChange<'_>,
    ) -> Result<(), LiveError> {
        let Some(owned) = owned.filter(|_| self == ChangeBy::Api) else {
            return Ok(());
        };
        let what = match change {
            ApiChange::Activate if owned.active => "the active policy".to_string(),
            ApiChange::Parameters(name) if owned.parameters.contains(name) => {
                format!("the parameters of `{name}`")
            }
            ApiChange::Experiment if owned.experiment => "the experiment".to_string(),
            _ => return Ok(()),
        };
        Err(LiveError::OwnedBySettings {
            file: owned.file.clone(),
            what,
        })
    }
}

/// The first round a change applies to.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Applied {
    /// The active policy from `from_round` on.
    pub active: String,
    /// Number of the first round decided after the change.
    pub from_round: u64,
}

pub(super) type Reply<T> = tokio::sync::oneshot::Sender<Result<T, LiveError>>;

/// What the API and the directory watcher ask the driver to do between rounds. Every
/// change of the active policy, of any policy's parameters, of the experiment and of
/// what the settings file owns is one of these, applied by the driver alone in the
/// order they came, so the answer to each is what holds until the next.
pub(super) enum Command {
    /// Make the named policy active, as the catalog holds it when the driver gets here.
    Activate(String, ChangeBy, Reply<Applied>),
    /// Set the named policy's parameters, keep them, and apply them if it is active.
    SetParameters(
        String,
        Settings,
        ChangeBy,
        Reply<(CatalogEntry, Option<Applied>)>,
    ),
    /// The catalog's entry for the named policy changed (an upload or a file): the
    /// parameters kept for it apply (unless the settings file gives its own), and if it
    /// is active, the new entry decides from the next round.
    Reload(String, Reply<Option<Applied>>),
    /// The settings file in force now owns this (none: no settings file).
    Own(Option<OwnedBySettings>, Reply<()>),
    StartExperiment(Box<Experiment>, bool, ChangeBy, Reply<ExperimentReport>),
    StopExperiment(ChangeBy, Reply<ExperimentReport>),
    PushLoss(String, u64, f64, Reply<LossAck>),
    /// The checkpoint asked of the named job now.
    CheckpointRequest(String, Reply<CheckpointRequest>),
    /// A task's acknowledgement that its checkpoint of the named job is complete.
    AcknowledgeCheckpoint(String, CheckpointAck, Reply<Acknowledged>),
    ListJobs(Reply<Arc<JobList>>),
}

/// The state the handle and the decision thread share.
pub(super) struct Shared {
    pub(super) catalog: Catalog,
    pub(super) status: RwLock<LiveStatus>,
    pub(super) metrics: Metrics,
    pub(super) commands: Mutex<mpsc::Sender<Command>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) ready: AtomicBool,
    /// When the decision thread last looked at the cluster (or finished a round).
    pub(super) looked: Mutex<Instant>,
    pub(super) stalled_after: Duration,
    pub(super) leader: Arc<Leader>,
    pub(super) on_refusal: OnceLock<RefusalHook>,
    pub(super) components: Arc<dyn ComponentStore>,
    /// How policies named by a registry reference are pulled.
    pub(super) registry: RegistryAccess,
    /// What the followed settings file decides, for readers: written by the decision
    /// thread alone, when it applies the command that says so.
    pub(super) owned_by_settings: RwLock<Option<OwnedBySettings>>,
    /// Held from loading an upload to keeping it, so the copy kept for a name is the
    /// one loaded last.
    pub(super) uploading: tokio::sync::Mutex<()>,
}

impl Shared {
    /// This replica's part in the leader election.
    pub(super) fn leader(&self) -> &Leader {
        &self.leader
    }

    /// The loaded policies.
    pub(super) fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The metrics.
    pub(super) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Updates what the controller publishes (the decision thread's job).
    pub(super) fn publish(&self, update: impl FnOnce(&mut LiveStatus)) {
        update(&mut self.status.write().unwrap());
    }

    /// The flag that stops the decision thread.
    pub(super) fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether the decision thread has found the cluster's caches complete.
    pub(super) fn marked_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// The cluster's caches are complete: the controller may answer `/readyz`.
    pub(super) fn mark_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// The decision thread looked at the cluster.
    pub(super) fn looked(&self) {
        *self.looked.lock().unwrap() = Instant::now();
    }

    /// Reports a refused component or settings file to the hook, if any.
    pub(super) fn report_refusal(&self, source: &str, error: &str) {
        if let Some(hook) = self.on_refusal.get() {
            hook(source, error);
        }
    }

    /// Loads the uploads the component store kept that are not loaded here yet (a
    /// replica that becomes leader takes over what the previous leader accepted);
    /// refusals are reported like any other.
    pub(super) fn restore_kept(&self) {
        let refused = kept::restore(
            &self.catalog,
            self.components.as_ref(),
            &self.registry,
            &self.metrics,
        );
        for (source, error) in refused {
            self.report_refusal(&source, &error);
        }
    }
}
