//! [`Cluster`] for a real Kubernetes cluster: the control loop's clock is the wall clock,
//! `advance` waits for watch events (job arrivals and completions, node changes) or the
//! policy's next tick, the snapshot comes from the reflectors' caches, and accepted
//! actions go to [`Actor`]. Only the elected leader reports events or acts; a follower's
//! `advance` just waits. The control loop is synchronous, so it runs on a blocking
//! thread and this type enters the tokio runtime through a [`Handle`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::api::Api;
use kube::{Client, ResourceExt};
use tokio::runtime::Handle;
use tokio::sync::watch;

use super::act::{Actor, node_of};
use super::crd::Phase;
use super::observe::{self, Caches, job_id};
use super::progress::LogPattern;
use crate::control::{Advance, Cluster};
use crate::model::{Action, JobLabel, Operation, Snapshot, Trigger};

/// The longest `advance` sleeps before looking at the caches again.
const POLL: Duration = Duration::from_secs(5);

/// A real cluster behind the control loop.
pub struct KubeCluster {
    handle: Handle,
    client: Client,
    caches: Caches,
    actor: Actor,
    leading: Arc<AtomicBool>,
    shutdown: watch::Receiver<bool>,
    known_jobs: BTreeSet<String>,
    known_nodes: BTreeMap<String, bool>,
    followed: HashMap<String, tokio::task::JoinHandle<()>>,
    finished: usize,
}

impl KubeCluster {
    /// A cluster over started `caches`, acting through `actor` while `leading` is true,
    /// stopping when `shutdown` turns true.
    pub fn new(
        handle: Handle,
        client: Client,
        caches: Caches,
        actor: Actor,
        leading: Arc<AtomicBool>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            handle,
            client,
            caches,
            actor,
            leading,
            shutdown,
            known_jobs: BTreeSet::new(),
            known_nodes: BTreeMap::new(),
            followed: HashMap::new(),
            finished: 0,
        }
    }

    fn leading(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }

    /// What changed since the last look: jobs that arrived or finished, nodes that
    /// appeared, left or changed schedulability. Finished jobs get their final phase.
    fn changes(&mut self) -> Vec<Trigger> {
        let pods = self.caches.pods.state();
        let mut triggers = Vec::new();
        let mut active = BTreeSet::new();
        for job in self.caches.jobs.state() {
            let id = job_id(&job);
            let phase = job.status.as_ref().and_then(|s| s.phase);
            if matches!(phase, Some(Phase::Succeeded | Phase::Failed)) {
                continue;
            }
            if let Some(succeeded) = observe::finished(&job, &pods) {
                let phase = if succeeded {
                    Phase::Succeeded
                } else {
                    Phase::Failed
                };
                match self
                    .handle
                    .block_on(self.actor.update_status(&job, |s| s.phase = Some(phase)))
                {
                    Ok(_) => self.finished += 1,
                    Err(error) => tracing::warn!(%error, job = id, "recording the end of a job"),
                }
                continue;
            }
            active.insert(id);
        }
        for id in active.difference(&self.known_jobs) {
            triggers.push(Trigger::JobArrived(id.clone()));
        }
        for id in self.known_jobs.difference(&active) {
            triggers.push(Trigger::JobFinished(id.clone()));
        }
        self.known_jobs = active;
        let nodes: BTreeMap<String, bool> = self
            .caches
            .snapshot(0.0, Vec::new())
            .nodes
            .into_iter()
            .map(|n| (n.name, n.schedulable))
            .collect();
        for (name, schedulable) in &nodes {
            if self.known_nodes.get(name) != Some(schedulable) {
                triggers.push(Trigger::NodeChanged(name.clone()));
            }
        }
        for name in self.known_nodes.keys().filter(|n| !nodes.contains_key(*n)) {
            triggers.push(Trigger::NodeChanged(name.clone()));
        }
        self.known_nodes = nodes;
        triggers
    }

    /// Starts a log follower for every bound pod of a job that reads progress from logs.
    fn follow_logs(&mut self) {
        self.followed.retain(|_, task| !task.is_finished());
        let pods = self.caches.pods.state();
        for job in self.caches.jobs.state() {
            let Some(log) = job.spec.progress.log.clone() else {
                continue;
            };
            let id = job_id(&job);
            let pattern = match LogPattern::compile(&job.name_any(), &log.pattern) {
                Ok(p) => p,
                Err(error) => {
                    tracing::warn!(%error, "not following the job's logs");
                    continue;
                }
            };
            for pod in observe::job_pods(&job, &pods) {
                let running =
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
                if !running || node_of(&pod).is_none() || self.followed.contains_key(&key) {
                    continue;
                }
                let api: Api<k8s_openapi::api::core::v1::Pod> =
                    Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
                let (caches, name, id, pattern) = (
                    self.caches.clone(),
                    pod.name_any(),
                    id.clone(),
                    pattern.clone(),
                );
                let container = log.container.clone();
                let task = self.handle.spawn(async move {
                    if let Err(error) =
                        observe::follow_log(api, &name, container, pattern, &caches, &id, unix_now)
                            .await
                    {
                        tracing::warn!(%error, "log follower stopped");
                    }
                });
                // Spawned tasks need no runtime context beyond the handle; the key keeps
                // one follower per pod for the pod's whole life.
                self.followed.insert(key, task);
            }
        }
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Cluster for KubeCluster {
    fn now(&self) -> f64 {
        unix_now()
    }

    fn advance(&mut self, until: Option<f64>) -> Advance {
        loop {
            if *self.shutdown.borrow() {
                return Advance::Stopped;
            }
            if self.leading() {
                self.follow_logs();
                let triggers = self.changes();
                if !triggers.is_empty() {
                    return Advance::Events(triggers);
                }
                if until.is_some_and(|t| unix_now() >= t) {
                    return Advance::Reached { quiescent: false };
                }
            }
            let wait = until
                .map(|t| Duration::from_secs_f64((t - unix_now()).max(0.0)))
                .unwrap_or(POLL)
                .min(POLL);
            let changed = self.caches.changed.clone();
            let mut shutdown = self.shutdown.clone();
            self.handle.block_on(async move {
                tokio::select! {
                    _ = changed.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => {}
                }
            });
        }
    }

    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        self.caches.snapshot(unix_now(), triggers)
    }

    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) {
        for action in accepted {
            // Leadership can be lost between rounds; a follower must not act.
            if !self.leading() {
                tracing::warn!("lost leadership; dropping the rest of the decision");
                return;
            }
            let Some((job, pods)) = self.caches.job_and_pods(action.op.job()) else {
                tracing::warn!(job = action.op.job(), "job vanished before its action ran");
                continue;
            };
            let actor = &self.actor;
            let reason = action.reason.as_str();
            let outcome = self.handle.block_on(async {
                match &action.op {
                    Operation::Place { assignments, .. } => {
                        let pairs: Vec<(String, String)> = assignments
                            .iter()
                            .map(|a| (a.task.clone(), a.node.clone()))
                            .collect();
                        actor.place(&job, &pairs, reason).await
                    }
                    Operation::Migrate {
                        task, node, kind, ..
                    } => {
                        actor
                            .migrate(&job, &pods, task.as_deref(), node, *kind, reason)
                            .await
                    }
                    Operation::SetCpuWeight { task, weight, .. } => {
                        match pods
                            .iter()
                            .find(|p| super::act::task_of(p) == Some(task.as_str()))
                        {
                            Some(pod) => actor.set_cpu_weight(&job, pod, *weight, reason).await,
                            None => Err(super::Error::NotFound(format!("task {task} has no pod"))),
                        }
                    }
                    Operation::Scale {
                        replicas, nodes, ..
                    } => actor.scale(&job, &pods, *replicas, nodes, reason).await,
                    Operation::Wait { .. } => Ok(()),
                }
            });
            if let Err(error) = outcome {
                tracing::warn!(%error, label = error.metric_label(), job = action.op.job(), "action failed");
            }
        }
        let mut by_job: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
        for label in labels {
            by_job
                .entry(&label.job)
                .or_default()
                .insert(label.key.clone(), label.value.clone());
        }
        for (id, labels) in by_job {
            if let Some((job, _)) = self.caches.job_and_pods(id)
                && let Err(error) = self
                    .handle
                    .block_on(self.actor.set_policy_labels(&job, labels))
            {
                tracing::warn!(%error, job = id, "writing policy labels");
            }
        }
    }

    fn finished_jobs(&self) -> usize {
        self.finished
    }
}
