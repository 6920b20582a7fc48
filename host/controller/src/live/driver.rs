//! The decision thread: advances the cluster (any [`LiveCluster`]), applies operator
//! commands between rounds, runs rounds through the [`ControlLoop`], and publishes status
//! and metrics after each. Policy calls are synchronous Wasm calls, so they get a thread
//! of their own rather than blocking the async runtime that serves the API. When this
//! replica becomes leader it resumes the active policy and state blobs the previous
//! leader persisted; while it follows, the cluster produces no rounds and acts on
//! nothing, and the driver only serves commands and publishes the summary.

use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::catalog::{Catalog, CatalogEntry};
use super::config::{LiveConfig, LiveError};
use super::shared::{ApiChange, Applied, Command, OwnedBySettings, Shared};
use super::views::{ChartMark, JobList, LiveStatus, MarkKind, UtilisationSample};
use switchyard_control::{
    ActivePolicy, ControlLoop, ExperimentMode, ExperimentReport, LiveCluster, PolicyParameters,
    Recorder, RoundOutcome, RunEnd, StateStore, Step,
};
use switchyard_core::{Settings, Trigger};
use switchyard_runtime::PolicyModule;
use switchyard_sim::PACE_SLICE;

struct Driver {
    shared: Arc<Shared>,
    control: ControlLoop,
    keep_decisions: usize,
    keep_decisions_bytes: usize,
    commands: mpsc::Receiver<Command>,
    summary_at: Option<Instant>,
    summary_every: Duration,
    utilisation_at: Option<Instant>,
    utilisation_every: Duration,
    /// The last job listing: when it was made, the rounds run by then, the listing.
    job_list: Option<(Instant, u64, Arc<JobList>)>,
    /// A command changed what decides; worth a round even when the cluster is idle.
    changed_policy: bool,
    /// Whether this replica led when the driver last looked.
    was_leading: bool,
    /// State save failures already counted in the metrics.
    save_failures_seen: u64,
    /// The parameters operators set, by policy, as this driver last kept them.
    parameters: PolicyParameters,
    /// What the followed settings file decides, as of the last command that said so.
    owned: Option<OwnedBySettings>,
}

/// What the decision thread builds its control loop from. The loop is built on the
/// thread that owns it, so its parts travel there whole.
pub(super) struct LoopParts {
    /// The policy that decides at start.
    pub(super) active: CatalogEntry,
    /// The policy that decides a round the active one failed.
    pub(super) fallback: CatalogEntry,
    /// Where state blobs, the active policy and the parameters are kept.
    pub(super) store: Box<dyn switchyard_control::StateStore>,
    /// The parameters operators set, by policy, as the store kept them.
    pub(super) parameters: PolicyParameters,
    /// What records each round, when `--record` asks for it.
    pub(super) recorder: Option<Recorder>,
}

pub(super) fn spawn<C: LiveCluster>(
    shared: Arc<Shared>,
    mut cluster: C,
    config: LiveConfig,
    parts: LoopParts,
    commands: mpsc::Receiver<Command>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("switchyard-decide".into())
        .spawn(move || {
            let LoopParts {
                active,
                fallback,
                store,
                parameters,
                recorder,
            } = parts;
            let mut control = ControlLoop::new(active.slot, fallback.slot, config.seed)
                .with_state_store(store)
                .with_disruption_budget(config.disruption)
                .keep_records(false);
            if let Some(recorder) = recorder {
                control = control.with_observer(Box::new(recorder));
            }
            let was_leading = shared.leader().is_leading();
            let mut driver = Driver {
                shared,
                control,
                keep_decisions: config.keep_decisions.max(1),
                keep_decisions_bytes: config.keep_decisions_bytes,
                commands,
                summary_at: None,
                summary_every: cluster.summary_every(),
                utilisation_at: None,
                utilisation_every: config.utilisation_every,
                job_list: None,
                changed_policy: false,
                was_leading,
                save_failures_seen: 0,
                parameters,
                owned: None,
            };
            driver.run(&mut cluster);
        })
        .expect("cannot start the decision thread")
}

impl Driver {
    fn run<C: LiveCluster>(&mut self, cluster: &mut C) {
        self.publish_summary(cluster, true);
        let stop = self.shared.stop_flag();
        loop {
            let until = self.control.next_tick();
            let advance = cluster.advance_live(until, &stop, &mut |c| self.between(c));
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let now = cluster.now();
            match self.control.step_from(advance, now) {
                Step::Round {
                    triggers,
                    quiescent,
                } => {
                    let changed = self.round(cluster, triggers);
                    if quiescent && !changed {
                        self.idle(cluster, RunEnd::Idle);
                    }
                }
                Step::End(end) => self.idle(cluster, end),
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// What happens while the cluster waits: commands, readiness, a change of leader,
    /// and the summary's clock kept moving with the cluster's.
    fn between<C: LiveCluster>(&mut self, cluster: &mut C) {
        self.shared.looked();
        self.apply_commands(cluster);
        if !self.shared.marked_ready() && cluster.synced() {
            self.publish_summary(cluster, true);
            self.shared.mark_ready();
        }
        let leading = self.shared.leader().is_leading();
        if leading != self.was_leading {
            self.was_leading = leading;
            if leading {
                self.take_over();
            }
        }
        if self
            .summary_at
            .is_none_or(|t| t.elapsed() >= self.summary_every)
        {
            self.publish_summary(cluster, false);
        }
    }

    /// This replica has just become leader: it continues from what the previous leader
    /// persisted (its uploads, the active policy and every state blob), not from what it
    /// last knew.
    fn take_over(&mut self) {
        tracing::info!("leading: resuming the persisted policies and state");
        // Uploads first: the previous leader's active policy may be one of them.
        self.shared.restore_kept();
        self.parameters = restore_parameters(self.shared.catalog(), self.control.state_store());
        self.control.reload_states();
        let saved = match self.control.state_store().load_active() {
            Ok(saved) => saved,
            Err(error) => {
                tracing::warn!(%error, "cannot read which policy the previous leader ran");
                None
            }
        };
        let Some(saved) = saved else { return };
        match self
            .shared
            .catalog()
            .configure(&saved.policy, &saved.settings)
        {
            Ok(entry) => {
                // The same name may now be another version (an upload restored above).
                let active = self.control.active();
                if (entry.slot.module.digest() != active.module.digest()
                    || entry.slot.settings != active.settings)
                    && let Err(error) = self.swap(entry)
                {
                    tracing::warn!(%error, "resuming the previous leader's policy");
                }
            }
            Err(error) => {
                tracing::warn!(%error, "the previous leader's policy is not loaded here; keeping {}", self.control.active().name());
            }
        }
    }

    /// Nothing happens on its own any more: serve commands, and try a round when the
    /// policy changes (the new one may place what the old one left waiting).
    fn idle<C: LiveCluster>(&mut self, cluster: &mut C, end: RunEnd) {
        self.shared.publish(|status| status.ended = Some(end));
        self.publish_summary(cluster, true);
        let stop = self.shared.stop_flag();
        self.changed_policy = false;
        while !stop.load(Ordering::Relaxed) {
            self.between(cluster);
            if self.changed_policy && end == RunEnd::Idle {
                self.changed_policy = false;
                if self.round(cluster, vec![Trigger::Tick]) {
                    self.shared.publish(|status| status.ended = None);
                    return;
                }
            }
            // Wait for a command rather than sleeping, so an activation is decided on
            // at once instead of up to a slice later.
            match self.commands.recv_timeout(PACE_SLICE) {
                Ok(command) => self.handle(cluster, command),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(PACE_SLICE),
            }
        }
    }

    fn round<C: LiveCluster>(&mut self, cluster: &mut C, triggers: Vec<Trigger>) -> bool {
        let outcome = self.control.decide_round(cluster, triggers);
        self.shared.looked();
        self.publish_round(&outcome);
        self.publish_summary(cluster, false);
        outcome.changed
    }

    fn apply_commands<C: LiveCluster>(&mut self, cluster: &mut C) {
        while let Ok(command) = self.commands.try_recv() {
            self.handle(cluster, command);
        }
    }

    fn handle<C: LiveCluster>(&mut self, cluster: &mut C, command: Command) {
        match command {
            Command::Activate(name, by, reply) => {
                let activated = by
                    .check(self.owned.as_ref(), ApiChange::Activate)
                    .and_then(|()| Ok(self.shared.catalog().get(&name)?))
                    .and_then(|entry| self.swap(entry));
                let _ = reply.send(activated);
            }
            Command::SetParameters(name, settings, by, reply) => {
                let set = by
                    .check(self.owned.as_ref(), ApiChange::Parameters(&name))
                    .and_then(|()| self.set_parameters(&name, settings));
                let _ = reply.send(set);
            }
            Command::Reload(name, reply) => {
                self.apply_kept_parameters(&name);
                let reloaded = if self.control.active().name() == name {
                    self.shared
                        .catalog()
                        .get(&name)
                        .map_err(LiveError::from)
                        .and_then(|entry| self.swap(entry))
                        .map(Some)
                } else {
                    Ok(None)
                };
                let _ = reply.send(reloaded);
            }
            Command::Own(owned, reply) => {
                *self.shared.owned_by_settings.write().unwrap() = owned.clone();
                self.owned = owned;
                let _ = reply.send(Ok(()));
            }
            Command::StartExperiment(experiment, replace, by, reply) => {
                if let Err(error) = by.check(self.owned.as_ref(), ApiChange::Experiment) {
                    let _ = reply.send(Err(error));
                    return;
                }
                let running = self.control.experiment_report();
                if let (Some(running), false) = (&running, replace) {
                    let _ = reply.send(Err(LiveError::ExperimentRunning {
                        running: in_words(running),
                    }));
                    return;
                }
                if let Err(error) = experiment.check_against(&cluster.snapshot(Vec::new())) {
                    let _ = reply.send(Err(LiveError::Experiment(error)));
                    return;
                }
                if let Some(replaced) = &running {
                    tracing::info!(
                        experiment = in_words(replaced),
                        rounds = replaced.rounds,
                        "experiment replaced"
                    );
                }
                self.control.start_experiment(*experiment);
                self.changed_policy = true;
                let report = self.control.experiment_report();
                if let Some(started) = &report {
                    tracing::info!(
                        experiment = in_words(started),
                        from_round = self.control.rounds(),
                        "experiment started"
                    );
                }
                let mark = report.as_ref().map(|r| MarkKind::ExperimentStart {
                    mode: mode_name(&r.mode).to_string(),
                    policy_a: r.policy_a.clone(),
                    policy_b: r.policy_b.clone(),
                });
                self.shared.publish(|status| {
                    status.experiment = report.clone();
                    mark.into_iter().for_each(|m| mark_chart(status, m));
                });
                let _ = reply.send(report.ok_or(LiveError::NoExperiment));
            }
            Command::StopExperiment(by, reply) => {
                if let Err(error) = by.check(self.owned.as_ref(), ApiChange::Experiment) {
                    let _ = reply.send(Err(error));
                    return;
                }
                let report = self.control.stop_experiment();
                if let Some(stopped) = &report {
                    tracing::info!(
                        experiment = in_words(stopped),
                        rounds = stopped.rounds,
                        "experiment stopped"
                    );
                }
                self.shared.publish(|status| {
                    status.experiment = None;
                    if let Some(stopped) = &report {
                        status.last_experiment = report.clone();
                        let mark = MarkKind::ExperimentStop {
                            policy_a: stopped.policy_a.clone(),
                            policy_b: stopped.policy_b.clone(),
                        };
                        mark_chart(status, mark);
                    }
                });
                let _ = reply.send(report.ok_or(LiveError::NoExperiment));
            }
            Command::PushLoss(job, step, value, reply) => {
                let ack = if cluster.has_job(&job) {
                    Ok(cluster.push_loss(&job, step, value))
                } else {
                    Err(LiveError::UnknownJob(job))
                };
                let _ = reply.send(ack);
            }
            Command::CheckpointRequest(job, reply) => {
                let request = if cluster.has_job(&job) {
                    Ok(cluster.checkpoint_request(&job))
                } else {
                    Err(LiveError::UnknownJob(job))
                };
                let _ = reply.send(request);
            }
            Command::AcknowledgeCheckpoint(job, ack, reply) => {
                let taken = if cluster.has_job(&job) {
                    cluster
                        .acknowledge_checkpoint(&job, ack)
                        .map_err(LiveError::Checkpoint)
                } else {
                    Err(LiveError::UnknownJob(job))
                };
                let _ = reply.send(taken);
            }
            Command::ListJobs(reply) => {
                let _ = reply.send(Ok(self.job_list(cluster)));
            }
        }
    }

    /// The active jobs, listed again only when a round ran since the last listing or a
    /// summary interval passed: however many readers ask, the cluster builds at most one
    /// snapshot per interval for them, and never during a round.
    fn job_list<C: LiveCluster>(&mut self, cluster: &mut C) -> Arc<JobList> {
        let rounds = self.control.rounds();
        if let Some((at, listed_after, list)) = &self.job_list
            && *listed_after == rounds
            && at.elapsed() < self.summary_every
        {
            return list.clone();
        }
        let snapshot = cluster.snapshot(Vec::new());
        let arms = match self.control.experiment() {
            Some(experiment) => snapshot
                .jobs
                .iter()
                .filter_map(|job| Some((job.id.clone(), experiment.arm_of(&job.id)?)))
                .collect(),
            None => Default::default(),
        };
        let list = Arc::new(JobList {
            time: snapshot.time,
            jobs: snapshot.jobs,
            arms,
            checkpoints: cluster.last_checkpoints(),
        });
        self.job_list = Some((Instant::now(), rounds, list.clone()));
        list
    }

    /// Sets `name`'s parameters: checked by its `configure`, kept in the state store
    /// (the leader's), then in the catalog, then applied from the next round when it is
    /// the active policy. When the store cannot keep them nothing changes and the answer
    /// says why.
    fn set_parameters(
        &mut self,
        name: &str,
        settings: Settings,
    ) -> Result<(CatalogEntry, Option<Applied>), LiveError> {
        let catalog = self.shared.catalog();
        let entry = loop {
            let entry = catalog.configured(name, &settings)?;
            if self.shared.leader().is_leading() {
                let mut parameters = self.parameters.clone();
                parameters.insert(name.to_string(), settings.clone());
                if let Err(error) = self.control.state_store().save_parameters(&parameters) {
                    tracing::error!(%error, policy = name, "cannot persist the parameters; they stay as they were");
                    self.shared.metrics().observe_state_save_failures(1);
                    return Err(LiveError::NotDurable {
                        active: self.control.active().name().to_string(),
                        source: error,
                    });
                }
                self.parameters = parameters;
            }
            if catalog.keep_configured(&entry) {
                break entry;
            }
        };
        tracing::info!(policy = name, settings = ?entry.slot.settings, "parameters set");
        let applied = if self.control.active().name() == name {
            Some(self.swap(entry.clone())?)
        } else {
            None
        };
        Ok((entry, applied))
    }

    /// A policy loaded after the start (a file of the policies directory, an upload)
    /// takes the parameters kept for it, unless the settings file gives its own (the
    /// load has applied those). Kept parameters it refuses leave it as loaded.
    fn apply_kept_parameters(&self, name: &str) {
        let owned_by_file = self
            .owned
            .as_ref()
            .is_some_and(|owned| owned.parameters.contains(name));
        let Some(kept) = self.parameters.get(name).filter(|_| !owned_by_file) else {
            return;
        };
        match self.shared.catalog().get(name) {
            Ok(entry) if &entry.slot.settings == kept => {}
            _ => {
                if let Err(error) = self.shared.catalog().configure(name, kept) {
                    tracing::warn!(%error, policy = name, "the kept parameters do not apply");
                }
            }
        }
    }

    /// Makes `entry` the active policy from the next round. The leader persists the
    /// choice first (a successor resumes it): when that fails nothing changes and the
    /// answer says why, so an activation never looks durable when it is not.
    fn swap(&mut self, entry: CatalogEntry) -> Result<Applied, LiveError> {
        let previous = self.control.active().name().to_string();
        let name = entry.slot.name().to_string();
        // Only the leader's choice is the one a successor must resume; a follower
        // follows the policies directory like the leader does, and keeps it to itself.
        if self.shared.leader().is_leading() {
            let active = ActivePolicy {
                policy: name.clone(),
                settings: entry.slot.settings.clone(),
            };
            if let Err(error) = self.control.state_store().save_active(&active) {
                tracing::error!(%error, from = previous, to = name, "cannot persist the active policy; it stays");
                self.shared.metrics().observe_state_save_failures(1);
                return Err(LiveError::NotDurable {
                    active: previous,
                    source: error,
                });
            }
        }
        tracing::info!(from = previous, to = name, digest = %entry.slot.module.digest(), from_round = self.control.rounds(), "policy swapped");
        self.control.swap_policy(entry.slot);
        self.shared.metrics().observe_swap();
        self.changed_policy = true;
        let mark = MarkKind::Policy {
            policy: name.clone(),
            previous,
        };
        self.shared.publish(|status| {
            status.active = name.clone();
            mark_chart(status, mark);
        });
        Ok(Applied {
            active: name,
            from_round: self.control.rounds(),
        })
    }

    fn publish_round(&mut self, outcome: &RoundOutcome) {
        let metrics = self.shared.metrics();
        metrics.observe_round(outcome);
        let report = self.control.experiment_report();
        if let Some(report) = &report {
            metrics.observe_experiment(report);
        }
        let record = &outcome.record;
        let (rounds, failures) = (self.control.rounds(), self.control.failures());
        let save_failures = self.control.state_save_failures();
        metrics.observe_state_save_failures(save_failures.saturating_sub(self.save_failures_seen));
        self.save_failures_seen = save_failures;
        let state_error = self.control.state_save_error().map(str::to_string);
        let (keep, keep_bytes) = (self.keep_decisions, self.keep_decisions_bytes);
        let catalog = self.shared.catalog();
        self.shared.publish(|status| {
            status.rounds = rounds;
            status.failures = failures;
            status.state_save_failures = save_failures;
            status.state_error = state_error;
            status.experiment = report;
            for arm in std::iter::once(&record.arm_a).chain(&record.arm_b) {
                for label in &arm.labels {
                    status
                        .labels
                        .entry(label.job.clone())
                        .or_default()
                        .insert(label.key.clone(), label.value.clone());
                    status
                        .labels_by
                        .insert(label.job.clone(), arm.policy.clone());
                }
            }
            for trigger in &record.triggers {
                if let Trigger::JobFinished(id) = trigger {
                    status.labels.remove(id);
                    status.labels_by.remove(id);
                }
            }
            for module in &outcome.deciders {
                status
                    .deciders
                    .note(record.round, module, || registry_reference(catalog, module));
            }
            status.decision_bytes += outcome.record.footprint();
            status.decisions.push_back(outcome.record.clone());
            let mut dropped = false;
            while status.decisions.len() > 1
                && (status.decisions.len() > keep || status.decision_bytes > keep_bytes)
            {
                if let Some(old) = status.decisions.pop_front() {
                    status.decision_bytes -= old.footprint();
                    dropped = true;
                }
            }
            if dropped && let Some(oldest) = status.decisions.front() {
                status.deciders.forget_before(oldest.round);
            }
        });
    }

    fn publish_summary<C: LiveCluster>(&mut self, cluster: &mut C, force: bool) {
        if !force
            && self
                .summary_at
                .is_some_and(|t| t.elapsed() < self.summary_every)
        {
            return;
        }
        self.summary_at = Some(Instant::now());
        let summary = cluster.summary();
        let sample = self
            .utilisation_at
            .is_none_or(|t| t.elapsed() >= self.utilisation_every)
            .then(|| UtilisationSample::of(&summary));
        if sample.is_some() {
            self.utilisation_at = Some(Instant::now());
        }
        self.shared.publish(|status| {
            status.snapshot = summary;
            if let Some(sample) = sample {
                status.utilisation.record(sample);
            }
        });
    }
}

/// An experiment in a few words, for logs and refusals: `split of default against even`.
fn in_words(report: &ExperimentReport) -> String {
    let mode = mode_name(&report.mode);
    format!("{mode} of {} against {}", report.policy_a, report.policy_b)
}

fn mode_name(mode: &ExperimentMode) -> &'static str {
    match mode {
        ExperimentMode::Shadow => "shadow",
        ExperimentMode::Split { .. } => "split",
    }
}

/// Marks the allocation chart with `kind` at the cluster time of the latest summary: the
/// change applies from the next round, which that time precedes.
fn mark_chart(status: &mut LiveStatus, kind: MarkKind) {
    let time = status.snapshot.time;
    status.utilisation.mark(ChartMark { time, kind });
}

/// Configures every policy in `catalog` with the parameters `store` kept for it and
/// returns them; a policy that is not loaded, or refuses what was kept, keeps its own
/// (a warning says which).
pub(super) fn restore_parameters(catalog: &Catalog, store: &dyn StateStore) -> PolicyParameters {
    let parameters = store.load_parameters().unwrap_or_else(|error| {
        tracing::warn!(%error, "cannot read the kept parameters; every policy starts with its own");
        PolicyParameters::new()
    });
    for (name, settings) in &parameters {
        if let Err(error) = catalog.configure(name, settings) {
            tracing::warn!(%error, policy = name, "the kept parameters do not apply");
        }
    }
    parameters
}

/// The pinned reference `module` was pulled from, when the catalog holds it under its
/// name from a registry (an upload of other bytes under the name since has none).
fn registry_reference(catalog: &Catalog, module: &PolicyModule) -> Option<String> {
    let entry = catalog.get(module.name()).ok()?;
    (entry.slot.module.digest() == module.digest()
        && switchyard_registry::Reference::is_reference(&entry.source))
    .then_some(entry.source)
}
