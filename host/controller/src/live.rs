//! The live controller: the control loop running continuously on its own thread against
//! a [`LiveCluster`] (the simulator in scaled real time, [`switchyard_sim::Paced`], or a
//! real cluster, [`switchyard_kube`]), with policies that operators load, activate, configure and compare
//! while it runs.
//!
//! [`Controller`] is the handle the HTTP API and the policies-directory watcher share: it
//! owns the [`catalog`] of loaded policies, the status the driver publishes after every
//! round, the metrics, this replica's [`Leader`] grant, and the command channel to the
//! decision thread (`driver`). Commands are applied by the driver between rounds only, so a swap
//! is atomic: the round in progress finishes with the old policy and every round is
//! decided by exactly one policy (plus arm B of a split). The driver is the one writer of
//! the active policy, of every policy's parameters and of what the settings file owns:
//! activations, parameter changes (from the API or the settings file), reloads and each
//! new settings file's ownership are commands it applies in order, and it checks an API
//! change against the ownership in force when it gets there, so an answer of 200 is
//! what holds until the next change. What the handle and the driver share is in
//! [`shared`]. Uploads are handed to a
//! [`ComponentStore`] and loaded again at start and on a change of leader ([`kept`]);
//! policies named by a registry reference are kept as that reference, pinned, and pulled
//! again ([`references`]).
//! The driver is generic over the cluster, so the simulator and a real cluster get the
//! same controller. What it shows beyond counts (the jobs one by one, allocation over
//! time) is in [`views`]. This module does not speak HTTP, watch files or talk to the API
//! server.

mod catalog;
mod config;
mod driver;
mod kept;
mod references;
mod registry_access;
mod shared;
mod views;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
pub(crate) use catalog::policy_info;
pub(crate) use catalog::{Catalog, CatalogEntry, CatalogError, LoadFailure, PolicyInfo};
pub use config::{LiveConfig, LiveError};
pub(crate) use kept::Persistence;
pub use registry_access::RegistryAccess;
pub(crate) use shared::ChangeBy;
pub(crate) use shared::{Applied, OwnedBySettings};
use shared::{Command, Reply, Shared};
use switchyard_control::{
    Acknowledged, CheckpointAck, CheckpointRequest, ComponentStore, DirStateStore, Experiment,
    ExperimentMode, ExperimentReport, Leader, LiveCluster, LossAck, MemoryStateStore,
    RecordOptions, Recorder, RefusalHook, StateStore,
};
use switchyard_core::Settings;
use switchyard_runtime::Runtime;
use switchyard_sim::{Paced, Scenario, Simulator};
pub(crate) use views::LiveStatus;
pub(crate) use views::{ChartMark, JobList, UtilisationRing, UtilisationSample};

/// An experiment as an operator asks for it.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentRequest {
    /// Arm B's policy (a catalog name).
    pub policy_b: String,
    /// Shadow or split.
    pub mode: ExperimentMode,
    /// Replace a running experiment; without it, starting one while another runs is
    /// refused ([`LiveError::ExperimentRunning`]), so nobody loses an experiment's figures
    /// by accident.
    pub replace: bool,
}

/// An upload the controller accepted.
#[derive(Clone, Debug)]
pub struct Uploaded {
    /// The policy as loaded.
    pub entry: CatalogEntry,
    /// Set when it replaced the active policy: from which round the new one decides.
    pub applied: Option<Applied>,
    /// Whether a restart will have it.
    pub persistence: Persistence,
}

/// The handle on a running controller; cheap to clone.
#[derive(Clone)]
pub struct Controller {
    shared: Arc<Shared>,
}

/// The decision thread of a running controller.
pub struct DriverHandle {
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl DriverHandle {
    /// Stops the decision thread after the round in progress and waits for it.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for DriverHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

impl Controller {
    /// Starts the controller on `simulator`, paced to `config.speed`: loads the
    /// built-ins and the kept uploads, restores the active policy and state blobs from
    /// `config.state_dir`, and starts the decision thread. Pushed loss samples are
    /// ignored (with the reason); [`Controller::start_scenario`] takes them for jobs
    /// without a loss curve.
    pub fn start_simulated(
        runtime: Runtime,
        simulator: Simulator,
        config: LiveConfig,
    ) -> Result<(Controller, DriverHandle), LiveError> {
        let cluster = Paced::new(simulator, config.speed);
        Self::start_paced(runtime, cluster, config)
    }

    /// Like [`Controller::start_simulated`] on a simulator of `scenario`; loss samples
    /// pushed for jobs whose workload has no loss curve become those jobs' series.
    pub fn start_scenario(
        runtime: Runtime,
        scenario: Scenario,
        config: LiveConfig,
    ) -> Result<(Controller, DriverHandle), LiveError> {
        let cluster = Paced::for_scenario(scenario, config.speed);
        Self::start_paced(runtime, cluster, config)
    }

    fn start_paced(
        runtime: Runtime,
        cluster: Paced<Simulator>,
        config: LiveConfig,
    ) -> Result<(Controller, DriverHandle), LiveError> {
        let (store, components): (Box<dyn StateStore>, Arc<dyn ComponentStore>) =
            match &config.state_dir {
                Some(dir) => {
                    let store = DirStateStore::new(dir)?;
                    (Box::new(store.clone()), Arc::new(store))
                }
                None => (Box::new(MemoryStateStore), Arc::new(MemoryStateStore)),
            };
        Self::start(
            runtime,
            cluster,
            config,
            store,
            components,
            Arc::new(Leader::always("simulator")),
        )
    }

    /// Starts the controller on `cluster`: loads the built-ins and every upload
    /// `components` kept (one that no longer loads is a load error), restores the active
    /// policy and state blobs from `store`, and starts the decision thread, which acts
    /// only while `leader` grants it. Blocks while it reads the stores.
    pub fn start<C: LiveCluster>(
        runtime: Runtime,
        cluster: C,
        config: LiveConfig,
        store: Box<dyn StateStore>,
        components: Arc<dyn ComponentStore>,
        leader: Arc<Leader>,
    ) -> Result<(Controller, DriverHandle), LiveError> {
        let catalog = Catalog::with_builtins(runtime)?;
        let metrics = Metrics::new();
        let registry = match &config.registry {
            Some(registry) => registry.clone(),
            None => RegistryAccess::anonymous()?,
        };
        kept::restore(&catalog, components.as_ref(), &registry, &metrics);
        let parameters = driver::restore_parameters(&catalog, store.as_ref());
        let remembered = store.load_active().unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot read which policy was active; starting with {}", config.policy);
            None
        });
        let active = match remembered {
            Some(saved) => match catalog.configure(&saved.policy, &saved.settings) {
                Ok(entry) => entry,
                Err(error) => {
                    tracing::warn!(%error, "the policy active before the restart is not available; starting with {}", config.policy);
                    catalog.get(&config.policy)?
                }
            },
            None => catalog.get(&config.policy)?,
        };
        let fallback = catalog.get(&config.fallback)?;
        let recorder = match &config.record {
            Some(options) => Some(Recorder::open(RecordOptions {
                seed: config.seed,
                ..options.clone()
            })?),
            None => None,
        };
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            catalog,
            status: RwLock::new(LiveStatus {
                active: active.slot.name().to_string(),
                utilisation: UtilisationRing::new(config.keep_utilisation),
                ..LiveStatus::default()
            }),
            metrics,
            commands: Mutex::new(tx),
            stop: stop.clone(),
            ready: AtomicBool::new(false),
            looked: Mutex::new(Instant::now()),
            stalled_after: config.stalled_after,
            leader,
            on_refusal: OnceLock::new(),
            components,
            registry,
            owned_by_settings: RwLock::new(None),
            uploading: tokio::sync::Mutex::new(()),
        });
        let controller = Controller { shared };
        let parts = driver::LoopParts {
            active,
            fallback,
            store,
            parameters,
            recorder,
        };
        let thread = driver::spawn(controller.shared.clone(), cluster, config, parts, rx);
        Ok((
            controller,
            DriverHandle {
                thread: Some(thread),
                stop,
            },
        ))
    }

    /// This replica's part in the leader election; a controller alone always leads.
    pub fn leader(&self) -> &Leader {
        self.shared.leader()
    }

    /// Refuses a change when this replica does not lead: only the leader decides, so a
    /// change made on a follower would not be the one that applies.
    pub fn ensure_leading(&self) -> Result<(), LiveError> {
        let leader = &self.shared.leader;
        if leader.is_leading() {
            return Ok(());
        }
        Err(LiveError::NotLeader {
            identity: leader.identity().to_string(),
            leader: leader.holder(),
        })
    }

    /// Calls `hook` for every refused component or settings file from now on (set once;
    /// later calls are ignored).
    pub fn on_refusal(&self, hook: RefusalHook) {
        let _ = self.shared.on_refusal.set(hook);
    }

    /// Reports a refused component or settings file to the hook, if any.
    pub fn report_refusal(&self, source: &str, error: &str) {
        self.shared.report_refusal(source, error);
    }

    /// The loaded policies.
    pub fn catalog(&self) -> &Catalog {
        self.shared.catalog()
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        self.shared.metrics()
    }

    /// Makes `owned` what the followed settings file decides (`None`: no settings
    /// file), in order with every other change: an API change the driver gets after
    /// this is held to it, one it got before is not undone by it.
    pub(crate) async fn set_owned_by_settings(
        &self,
        owned: Option<OwnedBySettings>,
    ) -> Result<(), LiveError> {
        self.send(|reply| Command::Own(owned, reply)).await
    }

    /// What the followed settings file decides, as the decision thread last applied it
    /// (none when no settings file is followed).
    pub(crate) fn owned_by_settings(&self) -> Option<OwnedBySettings> {
        self.shared.owned_by_settings.read().unwrap().clone()
    }

    /// A copy of what the driver published last.
    pub fn status(&self) -> LiveStatus {
        self.shared.status.read().unwrap().clone()
    }

    /// Reads the published status without copying it.
    pub fn with_status<R>(&self, f: impl FnOnce(&LiveStatus) -> R) -> R {
        f(&self.shared.status.read().unwrap())
    }

    /// Whether the decision thread is making progress: it looked at the cluster within
    /// [`LiveConfig::stalled_after`]. `Err` says for how long it has not.
    pub fn is_alive(&self) -> Result<(), Duration> {
        let since = self.shared.looked.lock().unwrap().elapsed();
        if since < self.shared.stalled_after {
            Ok(())
        } else {
            Err(since)
        }
    }

    /// Whether the decision thread runs, the cluster's caches are complete, and it is
    /// not stopping.
    pub fn is_ready(&self) -> bool {
        self.shared.ready.load(Ordering::Relaxed) && !self.shared.stop.load(Ordering::Relaxed)
    }

    /// Loads a component (an upload or a file), replacing a policy of the same name;
    /// when that policy is active, the new version decides from the next round on.
    /// A refused component changes nothing and is counted as a load error.
    pub async fn load_policy(
        &self,
        bytes: Vec<u8>,
        source: String,
        parameters: BTreeMap<String, Settings>,
    ) -> Result<(CatalogEntry, Option<Applied>), LiveError> {
        let shared = self.shared.clone();
        let source_for_load = source.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            shared.catalog.load(&bytes, &source_for_load, &parameters)
        })
        .await
        .map_err(|_| LiveError::Stopped)?;
        let entry = match loaded {
            Ok(entry) => entry,
            Err(error) => {
                self.shared.metrics.observe_load_error(error.metric_label());
                self.shared
                    .catalog
                    .record_failure(&source, &error.to_string());
                tracing::warn!(%error, source, "policy refused; the running policy stays");
                self.report_refusal(&source, &error.to_string());
                return Err(error.into());
            }
        };
        tracing::info!(policy = entry.slot.name(), digest = %entry.slot.module.digest(), source, "policy loaded");
        let name = entry.slot.name().to_string();
        let applied = self.send(|reply| Command::Reload(name, reply)).await?;
        Ok((entry, applied))
    }

    /// Loads an uploaded component like [`Controller::load_policy`], then hands it to
    /// the component store so that a restart (or the next leader) loads it again. An
    /// upload the store cannot keep is used all the same; `Uploaded::persistence`
    /// says so, and why.
    pub async fn upload_policy(&self, bytes: Vec<u8>) -> Result<Uploaded, LiveError> {
        let _one_at_a_time = self.shared.uploading.lock().await;
        let (entry, applied) = self
            .load_policy(bytes.clone(), "upload".into(), BTreeMap::new())
            .await?;
        self.keep_loaded(entry, applied, bytes).await
    }

    /// Makes `name` the active policy from the next round on, unless the followed
    /// settings file decides the active policy (409): the decision thread checks that
    /// in order with the file's own changes.
    pub async fn activate(&self, name: &str) -> Result<Applied, LiveError> {
        self.activate_by(name, ChangeBy::Api).await
    }

    /// [`Controller::activate`], asked for by `by`.
    pub(crate) async fn activate_by(&self, name: &str, by: ChangeBy) -> Result<Applied, LiveError> {
        self.shared.catalog.get(name)?;
        let name = name.to_string();
        self.send(|reply| Command::Activate(name, by, reply)).await
    }

    /// Sets `name`'s parameters (checked by its `configure`) and keeps them in the state
    /// store, whether the policy is active or not; when it is active, the new values
    /// apply from the next round on. The decision thread makes the change, between
    /// rounds and in order with activations, so no activation answered before or after
    /// it is undone by it. Parameters the followed settings file gives are refused (409).
    pub async fn set_parameters(
        &self,
        name: &str,
        settings: &Settings,
    ) -> Result<(CatalogEntry, Option<Applied>), LiveError> {
        self.set_parameters_by(name, settings, ChangeBy::Api).await
    }

    /// [`Controller::set_parameters`], asked for by `by`.
    pub(crate) async fn set_parameters_by(
        &self,
        name: &str,
        settings: &Settings,
        by: ChangeBy,
    ) -> Result<(CatalogEntry, Option<Applied>), LiveError> {
        self.shared.catalog.get(name)?;
        let (owned_name, owned_settings) = (name.to_string(), settings.clone());
        let (entry, applied) = self
            .send(|reply| Command::SetParameters(owned_name, owned_settings, by, reply))
            .await?;
        tracing::info!(
            policy = name,
            settings = ?entry.slot.settings,
            from_round = applied.as_ref().map(|a| a.from_round),
            "parameters changed"
        );
        Ok((entry, applied))
    }

    /// Starts an experiment from the next round on; a running one is replaced only when
    /// the request says so. Refused (409) when the followed settings file decides the
    /// experiment.
    pub async fn start_experiment(
        &self,
        request: ExperimentRequest,
    ) -> Result<ExperimentReport, LiveError> {
        self.start_experiment_by(request, ChangeBy::Api).await
    }

    /// [`Controller::start_experiment`], asked for by `by`.
    pub(crate) async fn start_experiment_by(
        &self,
        request: ExperimentRequest,
        by: ChangeBy,
    ) -> Result<ExperimentReport, LiveError> {
        let entry = self.shared.catalog.get(&request.policy_b)?;
        let experiment = Box::new(Experiment::new(entry.slot, request.mode));
        self.send(|reply| Command::StartExperiment(experiment, request.replace, by, reply))
            .await
    }

    /// Stops the running experiment; returns its final figures. Refused (409) when the
    /// followed settings file decides the experiment.
    pub async fn stop_experiment(&self) -> Result<ExperimentReport, LiveError> {
        self.stop_experiment_by(ChangeBy::Api).await
    }

    /// [`Controller::stop_experiment`], asked for by `by`.
    pub(crate) async fn stop_experiment_by(
        &self,
        by: ChangeBy,
    ) -> Result<ExperimentReport, LiveError> {
        self.send(|reply| Command::StopExperiment(by, reply)).await
    }

    /// Hands a loss sample for an active job to the cluster, which keeps it in the
    /// job's series (stamped with the cluster's clock) or says why not.
    pub async fn push_loss(&self, job: &str, step: u64, value: f64) -> Result<LossAck, LiveError> {
        if !switchyard_control::is_loss_value(value) {
            return Err(LiveError::BadLossValue(value));
        }
        let ack = self
            .send(|reply| Command::PushLoss(job.to_string(), step, value, reply))
            .await?;
        self.shared.metrics.observe_loss_sample(ack.metric_label());
        Ok(ack)
    }

    /// The checkpoint asked of the active job `job` now.
    pub async fn checkpoint_request(&self, job: &str) -> Result<CheckpointRequest, LiveError> {
        let job = job.to_string();
        self.send(|reply| Command::CheckpointRequest(job, reply))
            .await
    }

    /// Hands a task's acknowledgement of its checkpoint of the active job `job` to the
    /// cluster, in order with every other command: once every asked task has
    /// acknowledged, the cluster stops the job at once.
    pub async fn acknowledge_checkpoint(
        &self,
        job: &str,
        ack: CheckpointAck,
    ) -> Result<Acknowledged, LiveError> {
        ack.check_path()?;
        let job = job.to_string();
        let taken = self
            .send(|reply| Command::AcknowledgeCheckpoint(job, ack, reply))
            .await;
        let label = match &taken {
            Ok(_) => "accepted",
            Err(LiveError::Checkpoint(refused)) => refused.metric_label(),
            Err(_) => "failed",
        };
        tracing::info!(outcome = label, "checkpoint acknowledgement");
        taken
    }

    /// The active jobs now. The decision thread lists them between rounds from a
    /// snapshot, at most once per summary interval however often this is asked (later
    /// askers share the listing), so readers cannot slow the rounds down.
    pub async fn jobs(&self) -> Result<Arc<JobList>, LiveError> {
        self.send(Command::ListJobs).await
    }

    async fn send<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T, LiveError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.shared
            .commands
            .lock()
            .unwrap()
            .send(command(tx))
            .map_err(|_| LiveError::Stopped)?;
        rx.await.map_err(|_| LiveError::Stopped)?
    }
}
