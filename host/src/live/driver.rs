//! The decision thread: advances the paced cluster, applies operator commands between
//! rounds, runs rounds through the [`ControlLoop`], and publishes status and metrics
//! after each. Policy calls are synchronous Wasm calls, so they get a thread of their own
//! rather than blocking the async runtime that serves the API.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::paced::{Paced, SLICE};
use super::{
    Applied, CatalogEntry, Command, Controller, LiveConfig, LiveError, LossSink, SnapshotSummary,
};
use crate::control::{Cluster, ControlLoop, RoundOutcome, RunEnd, Step};
use crate::model::{JobPhase, Settings, Snapshot, Trigger};
use crate::sim::Simulator;

/// The file under the state directory naming the active policy and its parameters.
const ACTIVE_FILE: &str = "active.json";

/// How often the snapshot summary is refreshed while rounds run back to back.
const SUMMARY_EVERY: Duration = Duration::from_millis(50);

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ActiveFile {
    pub(super) policy: String,
    pub(super) settings: Settings,
}

/// The policy that was active when a controller using `dir` last stopped.
pub(super) fn read_active(dir: &Path) -> Option<ActiveFile> {
    let text = std::fs::read(dir.join(ACTIVE_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

fn write_active(dir: &Path, entry: &CatalogEntry) {
    let file = ActiveFile {
        policy: entry.slot.name().to_string(),
        settings: entry.slot.settings.clone(),
    };
    let result = serde_json::to_vec_pretty(&file)
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            std::io::Write::write_all(&mut tmp, &bytes)?;
            tmp.persist(dir.join(ACTIVE_FILE)).map_err(|e| e.error)?;
            Ok(())
        });
    if let Err(error) = result {
        tracing::warn!(%error, "cannot persist the active policy");
    }
}

struct Driver {
    controller: Controller,
    control: ControlLoop,
    keep_decisions: usize,
    state_dir: Option<PathBuf>,
    commands: mpsc::Receiver<Command>,
    loss: Box<dyn LossSink>,
    known_jobs: HashSet<String>,
    summary_at: Option<Instant>,
    /// A command changed what decides; worth a round even when the cluster is idle.
    changed_policy: bool,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn spawn(
    controller: Controller,
    simulator: Simulator,
    config: LiveConfig,
    active: CatalogEntry,
    fallback: CatalogEntry,
    store: Box<dyn crate::control::StateStore>,
    commands: mpsc::Receiver<Command>,
    loss: Box<dyn LossSink>,
) -> JoinHandle<()> {
    let stop = controller.shared.stop.clone();
    std::thread::Builder::new()
        .name("switchyard-decide".into())
        .spawn(move || {
            let control = ControlLoop::new(active.slot, fallback.slot, config.seed)
                .with_state_store(store)
                .keep_records(false);
            let mut driver = Driver {
                controller,
                control,
                keep_decisions: config.keep_decisions.max(1),
                state_dir: config.state_dir,
                commands,
                loss,
                known_jobs: HashSet::new(),
                summary_at: None,
                changed_policy: false,
            };
            let mut cluster = Paced::new(simulator, config.speed, stop);
            driver.run(&mut cluster);
        })
        .expect("cannot start the decision thread")
}

impl Driver {
    fn run(&mut self, cluster: &mut Paced<Simulator>) {
        self.publish_summary(cluster.inner(), true);
        self.controller.shared.ready.store(true, Ordering::Relaxed);
        let stop = self.controller.shared.stop.clone();
        loop {
            let until = self.control.next_tick();
            let advance = cluster.advance(until, &mut |sim| {
                self.apply_commands();
                // Between rounds, keep the summary's clock moving with the cluster's.
                if self.summary_at.is_none_or(|t| t.elapsed() >= SUMMARY_EVERY) {
                    self.publish_summary(sim, false);
                }
            });
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let now = cluster.inner().now();
            match self.control.step_from(advance, now) {
                Step::Round {
                    triggers,
                    quiescent,
                } => {
                    let changed = self.round(cluster.inner(), triggers);
                    if quiescent && !changed {
                        self.idle(cluster.inner(), RunEnd::Idle);
                    }
                }
                Step::End(end) => self.idle(cluster.inner(), end),
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// Nothing happens on its own any more: serve commands, and try a round when the
    /// policy changes (the new one may place what the old one left waiting).
    fn idle(&mut self, sim: &mut Simulator, end: RunEnd) {
        self.controller.shared.status.write().unwrap().ended = Some(end);
        self.publish_summary(sim, true);
        let stop = self.controller.shared.stop.clone();
        self.changed_policy = false;
        while !stop.load(Ordering::Relaxed) {
            self.apply_commands();
            if self.changed_policy && end == RunEnd::Idle {
                self.changed_policy = false;
                if self.round(sim, vec![Trigger::Tick]) {
                    self.controller.shared.status.write().unwrap().ended = None;
                    return;
                }
            }
            std::thread::sleep(SLICE);
        }
    }

    fn round(&mut self, sim: &mut Simulator, triggers: Vec<Trigger>) -> bool {
        let outcome = self.control.decide_round(sim, triggers);
        self.publish_round(&outcome);
        self.publish_summary(sim, false);
        outcome.changed
    }

    fn apply_commands(&mut self) {
        while let Ok(command) = self.commands.try_recv() {
            match command {
                Command::Activate(entry, reply) | Command::Reconfigure(entry, reply) => {
                    let _ = reply.send(Ok(self.swap(entry)));
                }
                Command::StartExperiment(experiment, reply) => {
                    self.control.start_experiment(*experiment);
                    self.changed_policy = true;
                    let report = self.control.experiment_report();
                    self.controller.shared.status.write().unwrap().experiment = report.clone();
                    let _ = reply.send(report.ok_or(LiveError::NoExperiment));
                }
                Command::StopExperiment(reply) => {
                    let report = self.control.stop_experiment();
                    let mut status = self.controller.shared.status.write().unwrap();
                    status.experiment = None;
                    if report.is_some() {
                        status.last_experiment = report.clone();
                    }
                    let _ = reply.send(report.ok_or(LiveError::NoExperiment));
                }
                Command::PushLoss(job, sample, reply) => {
                    let ack = if self.known_jobs.contains(&job) {
                        Ok(self.loss.push(&job, sample))
                    } else {
                        Err(LiveError::UnknownJob(job))
                    };
                    let _ = reply.send(ack);
                }
            }
        }
    }

    fn swap(&mut self, entry: CatalogEntry) -> Applied {
        let previous = self.control.active().name().to_string();
        let name = entry.slot.name().to_string();
        tracing::info!(from = previous, to = name, digest = %entry.slot.module.digest(), from_round = self.control.rounds(), "policy swapped");
        if let Some(dir) = &self.state_dir {
            write_active(dir, &entry);
        }
        self.control.swap_policy(entry.slot);
        self.controller.shared.metrics.observe_swap();
        self.changed_policy = true;
        self.controller.shared.status.write().unwrap().active = name.clone();
        Applied {
            active: name,
            from_round: self.control.rounds(),
        }
    }

    fn publish_round(&mut self, outcome: &RoundOutcome) {
        let metrics = &self.controller.shared.metrics;
        metrics.observe_round(outcome);
        let report = self.control.experiment_report();
        if let Some(report) = &report {
            metrics.observe_experiment(report);
        }
        let record = &outcome.record;
        let mut status = self.controller.shared.status.write().unwrap();
        status.rounds = self.control.rounds();
        status.failures = self.control.failures();
        status.experiment = report;
        let labels = record
            .labels
            .iter()
            .chain(record.arm_b.iter().flat_map(|b| b.labels.iter()));
        for label in labels {
            status
                .labels
                .entry(label.job.clone())
                .or_default()
                .insert(label.key.clone(), label.value.clone());
        }
        for trigger in &record.triggers {
            match trigger {
                Trigger::JobArrived(id) => {
                    self.known_jobs.insert(id.clone());
                }
                Trigger::JobFinished(id) => {
                    self.known_jobs.remove(id);
                    status.labels.remove(id);
                }
                Trigger::Tick | Trigger::NodeChanged(_) => {}
            }
        }
        if status.decisions.len() >= self.keep_decisions {
            status.decisions.pop_front();
        }
        status.decisions.push_back(outcome.record.clone());
    }

    fn publish_summary(&mut self, sim: &mut Simulator, force: bool) {
        if !force && self.summary_at.is_some_and(|t| t.elapsed() < SUMMARY_EVERY) {
            return;
        }
        self.summary_at = Some(Instant::now());
        let snapshot = sim.snapshot(Vec::new());
        self.known_jobs = snapshot.jobs.iter().map(|j| j.id.clone()).collect();
        let summary = summarise(&snapshot, sim.finished_jobs());
        self.controller.shared.status.write().unwrap().snapshot = summary;
    }
}

fn summarise(snapshot: &Snapshot, finished: usize) -> SnapshotSummary {
    let count = |phase: JobPhase| snapshot.jobs.iter().filter(|j| j.phase == phase).count();
    SnapshotSummary {
        time: snapshot.time,
        nodes: snapshot.nodes.len(),
        schedulable_nodes: snapshot.nodes.iter().filter(|n| n.schedulable).count(),
        jobs: snapshot.jobs.len(),
        waiting: count(JobPhase::Waiting),
        running: count(JobPhase::Running),
        restarting: count(JobPhase::Restarting),
        finished,
        allocatable: snapshot
            .nodes
            .iter()
            .fold(Default::default(), |acc, n| acc.plus(&n.allocatable)),
        requested: snapshot
            .nodes
            .iter()
            .fold(Default::default(), |acc, n| acc.plus(&n.requested)),
    }
}
