//! [`Cluster`] (and [`LiveCluster`]) for a real Kubernetes cluster: the control loop's
//! clock is the wall clock, `advance` waits for watch events (job arrivals and
//! completions, node changes) or the policy's next tick, the snapshot comes from the
//! reflectors' caches, and accepted actions go to [`Actor`]. While it waits, the leader
//! also drives gangs and restarts ([`drive`](self::drive): members lost, placements
//! refused, staged restarts carried on), writes each job's new loss samples to its
//! status, and follows training logs ([`logs`](self::logs)). Only the leader
//! ([`Leader`]) does any of that, or acts; a follower's `advance` just waits. The
//! control loop is synchronous, so it runs on a blocking thread and this type enters
//! the tokio runtime through a [`Handle`].

mod drive;
mod logs;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio::runtime::Handle;

pub use self::logs::{LOSS_WRITE_EVERY, follow_log};
use crate::Error;
use crate::act::{Actor, Migration};
use crate::changes::{Dirty, Reader};
use crate::crd::{Phase, TrainingJob};
use crate::gang;
use crate::loss::status_loss;
use crate::observe::Caches;
use crate::pods::{job_id, own_of, schedulable, task_of};
use crate::template;
use switchyard_control::{ActionOutcome, Advance, Cluster};
use switchyard_control::{Leader, LiveCluster, LossAck};
use switchyard_core::{Action, JobLabel, Operation, Snapshot, Trigger};

/// The longest a wait lasts before the driver's commands are served again.
const WAIT: Duration = Duration::from_millis(50);
/// Without a watch event, the leader still looks at the caches this often (restart
/// deadlines, loss to write, logs to follow).
const POLL: Duration = Duration::from_secs(1);

/// The cluster's clock: Unix seconds.
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// A real cluster behind the control loop.
pub struct KubeCluster {
    handle: Handle,
    client: Client,
    caches: Caches,
    actor: Actor,
    leader: Arc<Leader>,
    stop: Arc<AtomicBool>,
    clock: Clock,
    known_jobs: HashSet<String>,
    known_nodes: HashMap<String, bool>,
    /// Per followed pod (`namespace/name`): its job's id and the follower.
    followed: HashMap<String, (String, tokio::task::JoinHandle<crate::Result<usize>>)>,
    /// Per pod whose follower failed: when to try again.
    follow_backoff: HashMap<String, logs::Backoff>,
    /// Jobs the next pass looks at whatever the watch events say: a restart under way,
    /// failed pods or a resize not handled yet, claims, a follower to start, an end
    /// not recorded yet. Every pass makes it anew from the jobs it visits.
    revisit: HashSet<String>,
    /// The batch of loss writes under way, if any.
    loss_writes: Option<tokio::task::JoinHandle<()>>,
    /// Restarts finished here (job id to `requestedAt`) that the job cache may still
    /// show under way.
    restarts_done: HashMap<String, String>,
    last_pass: Option<Instant>,
    /// Whether this replica led at the last look.
    was_leading: bool,
    /// Jobs queued again since the last round (a preemption or a gang's recovery
    /// finished: their pods are gone and they wait), for the next round's
    /// `job-preempted` triggers.
    requeued: Vec<String>,
    /// Pods holding up a restart on a node that is not Ready, already reported.
    unconfirmed_warned: HashSet<String>,
    finished: usize,
    /// Per job id, the `VolumesReady` condition last written (status, reason, message).
    volume_conditions: HashMap<String, (&'static str, String, String)>,
}

impl KubeCluster {
    /// A cluster over started `caches`, acting through `actor` while `leader` grants it
    /// (every call the actor makes checks the grant first).
    pub fn new(
        handle: Handle,
        client: Client,
        caches: Caches,
        actor: Actor,
        leader: Arc<Leader>,
    ) -> Self {
        Self {
            handle,
            client,
            caches,
            actor: actor.fenced_by(leader.clone()),
            leader,
            stop: Arc::default(),
            clock: Arc::new(unix_now),
            known_jobs: HashSet::new(),
            known_nodes: HashMap::new(),
            followed: HashMap::new(),
            follow_backoff: HashMap::new(),
            revisit: HashSet::new(),
            loss_writes: None,
            restarts_done: HashMap::new(),
            last_pass: None,
            was_leading: false,
            requeued: Vec::new(),
            unconfirmed_warned: HashSet::new(),
            finished: 0,
            volume_conditions: HashMap::new(),
        }
    }

    /// Gives each API call `timeout` instead of [`crate::retry::CALL_TIMEOUT`].
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.actor = self.actor.with_call_timeout(timeout);
        self
    }

    /// Reads time from `clock` instead of the system clock (tests).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// This replica's grant to act.
    pub fn leader(&self) -> Arc<Leader> {
        self.leader.clone()
    }

    /// Setting this flag makes [`Cluster::advance`] return [`Advance::Stopped`].
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether this replica may act now: it leads, and its caches are complete (a
    /// leader acting on a cache that has not listed yet would place running jobs again
    /// and finish restarts whose old pods still run).
    fn may_act(&self) -> bool {
        self.leader.is_leading() && self.caches.synced()
    }

    fn now_timestamp(&self) -> Timestamp {
        let millis = ((self.clock)() * 1000.0) as i64;
        Timestamp::from_millisecond(millis).unwrap_or_else(|_| Timestamp::now())
    }

    /// Charges the pods just released for `job`'s `(task, node)` pairs to their nodes
    /// until the pod cache shows them ([`crate::observe::Assumed`]).
    fn assume(&self, job: &TrainingJob, pairs: &[(String, String)]) {
        let generation = job.status.as_ref().map(|s| s.generation).unwrap_or(0);
        let tasks = template::tasks(job);
        let namespace = job.namespace().unwrap_or_default();
        let mut assumed = self.caches.assumed.lock().expect("assumed lock");
        for (task, node) in pairs {
            if let Some(spec) = tasks.iter().find(|t| t.name == *task) {
                let pod = template::pod_name(&job.name_any(), task, generation);
                assumed.released(&namespace, &pod, node, spec.requests);
            }
        }
    }

    /// The jobs this pass looks at: every job when `dirty.all` (the first pass as
    /// leader, or a relist), else those whose object or pods changed, those a follower
    /// of stopped, and those an earlier pass left work on (`revisit`).
    /// Each comes with the pods labelled with it, read once for the whole pass.
    fn jobs_to_visit(&mut self, dirty: &Dirty, followers_done: Vec<String>) -> Vec<Visit> {
        let revisit = std::mem::take(&mut self.revisit);
        if dirty.all {
            return self
                .caches
                .managed_jobs()
                .into_iter()
                .map(|job| Visit::of(job_id(&job), Some(job), &self.caches))
                .collect();
        }
        let mut ids: Vec<String> = dirty
            .jobs
            .iter()
            .cloned()
            .chain(revisit)
            .chain(followers_done)
            .collect();
        ids.sort();
        ids.dedup();
        ids.into_iter()
            .map(|id| {
                let job = self.caches.training_job(&id);
                Visit::of(id, job, &self.caches)
            })
            .collect()
    }

    /// Whether the visited job is still active (not finished); a job whose pods say it
    /// succeeded gets its final phase and loss samples (and is looked at again next
    /// pass while that write fails).
    fn still_active(&mut self, visit: &Visit) -> bool {
        let Some(job) = &visit.job else {
            return false;
        };
        let phase = job.status.as_ref().and_then(|s| s.phase);
        if matches!(phase, Some(Phase::Succeeded | Phase::Failed)) {
            return false;
        }
        if !gang::succeeded(job, &visit.own) {
            return true;
        }
        let id = &visit.id;
        let loss = self
            .caches
            .loss
            .lock()
            .expect("loss lock")
            .samples(id)
            .map(|s| status_loss(&s));
        let outcome = self.handle.block_on(self.actor.update_status(job, |s| {
            s.phase = Some(Phase::Succeeded);
            if let Some(loss) = &loss {
                s.loss = loss.clone();
            }
        }));
        match outcome {
            Ok(_) => {
                self.finished += 1;
                self.caches.loss.lock().expect("loss lock").forget(id);
            }
            Err(error) => {
                tracing::warn!(%error, job = id, "recording the end of a job");
                self.revisit.insert(id.clone());
            }
        }
        false
    }

    /// What changed since the last look: jobs that arrived or finished, nodes that
    /// appeared, left or changed schedulability. Finished jobs get their final phase
    /// and loss samples. Only the visited jobs and the dirty nodes are looked at, but
    /// every one of both after a relist.
    fn changes(&mut self, visits: &[Visit], dirty: &Dirty) -> Vec<Trigger> {
        let mut triggers = Vec::new();
        let mut arrived: Vec<String> = Vec::new();
        let mut finished: Vec<String> = Vec::new();
        if dirty.all {
            let mut active = HashSet::new();
            for visit in visits {
                if self.still_active(visit) {
                    active.insert(visit.id.clone());
                }
            }
            // Hash sets, not ordered ones: a pass over thousands of jobs compares
            // strings only for what changed; the triggers are sorted below.
            arrived.extend(active.difference(&self.known_jobs).cloned());
            finished.extend(self.known_jobs.difference(&active).cloned());
            self.known_jobs = active;
        } else {
            for visit in visits {
                let active = self.still_active(visit);
                match (active, self.known_jobs.contains(&visit.id)) {
                    (true, false) => {
                        self.known_jobs.insert(visit.id.clone());
                        arrived.push(visit.id.clone());
                    }
                    (false, true) => {
                        self.known_jobs.remove(&visit.id);
                        finished.push(visit.id.clone());
                    }
                    _ => {}
                }
            }
        }
        arrived.sort();
        finished.sort();
        triggers.extend(arrived.into_iter().map(Trigger::JobArrived));
        triggers.extend(finished.into_iter().map(Trigger::JobFinished));
        let mut changed: Vec<String> = Vec::new();
        let mut look = |known_nodes: &mut HashMap<String, bool>,
                        name: &str,
                        node: Option<&KubeNode>| {
            match (node.map(schedulable), known_nodes.get_mut(name)) {
                (Some(now), Some(known)) if *known == now => {}
                (Some(now), Some(known)) => {
                    *known = now;
                    changed.push(name.to_string());
                }
                (Some(now), None) => {
                    known_nodes.insert(name.to_string(), now);
                    changed.push(name.to_string());
                }
                (None, Some(_)) => {
                    known_nodes.remove(name);
                    changed.push(name.to_string());
                }
                (None, None) => {}
            }
        };
        if dirty.all {
            let nodes = self.caches.nodes.state();
            for node in &nodes {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                look(&mut self.known_nodes, name, Some(&**node));
            }
            let present: HashSet<&str> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let gone: Vec<String> = self
                .known_nodes
                .keys()
                .filter(|name| !present.contains(name.as_str()))
                .cloned()
                .collect();
            for name in gone {
                look(&mut self.known_nodes, &name, None);
            }
        } else {
            for name in &dirty.nodes {
                let node = self.caches.nodes.get(&ObjectRef::new(name));
                look(&mut self.known_nodes, name, node.as_deref());
            }
        }
        changed.sort();
        triggers.extend(changed.into_iter().map(Trigger::NodeChanged));
        triggers
    }

    /// The leader's work between rounds; returns the triggers of a round, if one is due.
    /// It looks at what the watch events marked since the last pass, and at the jobs
    /// that an earlier pass left work on (`revisit`).
    fn leader_pass(&mut self) -> Vec<Trigger> {
        let mut dirty = self.caches.changes.take(Reader::Pass);
        if !self.was_leading {
            // What this replica saw while it followed (or led before) may be stale: the
            // first round as leader hears of every job and node again.
            self.was_leading = true;
            self.known_jobs.clear();
            self.known_nodes.clear();
            self.restarts_done.clear();
            self.unconfirmed_warned.clear();
            dirty.all = true;
        }
        self.last_pass = Some(Instant::now());
        let followers_done = self.reap_followers();
        let visits = self.jobs_to_visit(&dirty, followers_done);
        self.drive_gangs(&visits);
        self.drive_restarts(&visits);
        self.drive_volume_conditions(&visits, dirty.all);
        self.write_loss();
        self.follow_logs(&visits, dirty.all);
        let mut triggers = self.changes(&visits, &dirty);
        triggers.extend(self.requeued.drain(..).map(Trigger::JobPreempted));
        triggers
    }

    fn wait(
        &mut self,
        until: Option<f64>,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Self),
    ) -> Advance {
        let mut dirty = true;
        loop {
            between(self);
            if stop.load(Ordering::Relaxed) || self.stop.load(Ordering::Relaxed) {
                return Advance::Stopped;
            }
            let tick_due = until.is_some_and(|t| (self.clock)() >= t);
            let poll_due = self.last_pass.is_none_or(|t| t.elapsed() >= POLL);
            let leading = self.may_act();
            if !leading {
                self.was_leading = false;
            }
            if leading && (dirty || tick_due || poll_due || !self.was_leading) {
                let triggers = self.leader_pass();
                if !triggers.is_empty() {
                    return Advance::Events(triggers);
                }
                if tick_due {
                    return Advance::Reached { quiescent: false };
                }
            }
            let wait = until
                .map(|t| Duration::from_secs_f64((t - (self.clock)()).max(0.0)))
                .unwrap_or(WAIT)
                .min(WAIT);
            let changed = self.caches.changed.clone();
            dirty = self.handle.block_on(async move {
                tokio::select! {
                    _ = changed.notified() => true,
                    _ = tokio::time::sleep(wait) => false,
                }
            });
        }
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Cluster for KubeCluster {
    fn now(&self) -> f64 {
        (self.clock)()
    }

    fn advance(&mut self, until: Option<f64>) -> Advance {
        self.wait(until, &AtomicBool::new(false), &mut |_| {})
    }

    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        self.caches.snapshot((self.clock)(), triggers)
    }

    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) -> Vec<ActionOutcome> {
        let now = self.now_timestamp();
        let mut outcomes = Vec::with_capacity(accepted.len());
        for action in accepted {
            // Leadership can be lost between rounds; a follower must not act.
            if !self.may_act() {
                tracing::warn!("lost leadership; the rest of the decision is not carried out");
                let error = Error::NotLeading {
                    action: format!("{} of job {}", action.op.name(), action.op.job()),
                };
                outcomes.push(Err(error.to_failure()));
                continue;
            }
            let Some((job, pods)) = self.caches.job_and_pods(action.op.job()) else {
                tracing::warn!(job = action.op.job(), "job vanished before its action ran");
                let error = Error::NotFound(format!(
                    "TrainingJob {} is no longer in the cluster",
                    action.op.job()
                ));
                outcomes.push(Err(error.to_failure()));
                continue;
            };
            let actor = &self.actor;
            let reason = action.reason.as_str();
            // Each action returns as soon as its API calls are made: a migration or a
            // rescale only starts here, so no grace period holds up the other actions.
            let outcome = self.handle.block_on(async {
                match &action.op {
                    Operation::Place { assignments, .. } => {
                        let pairs: Vec<(String, String)> = assignments
                            .iter()
                            .map(|a| (a.task.clone(), a.node.clone()))
                            .collect();
                        let placed = actor.place(&job, &pairs, reason, now).await;
                        if placed.is_ok() {
                            self.assume(&job, &pairs);
                        }
                        placed
                    }
                    Operation::Migrate {
                        task,
                        node,
                        purpose,
                        ..
                    } => {
                        let migration = Migration {
                            task: task.as_deref(),
                            node,
                            purpose,
                            reason,
                        };
                        actor.migrate(&job, &pods, migration, now).await
                    }
                    Operation::SetCpuWeight { task, weight, .. } => {
                        match pods.iter().find(|p| task_of(p) == Some(task.as_str())) {
                            Some(pod) => actor.set_cpu_weight(&job, pod, *weight, reason).await,
                            None => {
                                let error =
                                    crate::Error::NotFound(format!("task {task} has no pod"));
                                Err(actor.action_failed(&job, "SetCpuWeight", error).await)
                            }
                        }
                    }
                    Operation::Scale {
                        replicas, nodes, ..
                    } => {
                        actor
                            .scale(&job, &pods, *replicas, nodes, reason, now)
                            .await
                    }
                    Operation::Wait { .. } => Ok(()),
                    Operation::Preempt { .. } => actor.preempt(&job, &pods, reason, now).await,
                }
            });
            match outcome {
                Ok(()) => outcomes.push(Ok(())),
                Err(error) => {
                    tracing::warn!(%error, label = error.metric_label(), job = action.op.job(), "action failed");
                    outcomes.push(Err(error.to_failure()));
                }
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
            if let Some(job) = self.caches.training_job(id)
                && let Err(error) = self
                    .handle
                    .block_on(self.actor.set_policy_labels(&job, labels))
            {
                tracing::warn!(%error, job = id, "writing policy labels");
            }
        }
        outcomes
    }

    fn finished_jobs(&self) -> usize {
        self.finished
    }
}

impl LiveCluster for KubeCluster {
    fn advance_live(
        &mut self,
        until: Option<f64>,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Self),
    ) -> Advance {
        self.wait(until, stop, between)
    }

    fn push_loss(&mut self, job: &str, step: u64, value: f64) -> LossAck {
        let Some(training_job) = self.caches.training_job(job) else {
            return LossAck::Ignored {
                note: format!("TrainingJob {job} is no longer in the cluster"),
            };
        };
        if !training_job.spec.progress.push {
            return LossAck::Ignored {
                note: format!(
                    "TrainingJob {job} does not take pushed samples; set `spec.progress.push: true`"
                ),
            };
        }
        if self
            .caches
            .record_sample(job, (self.clock)(), Some(step), value)
        {
            // Followers do not write statuses; the leader writes the series on its next
            // look at the caches.
            LossAck::Accepted
        } else {
            LossAck::Ignored {
                note: format!("step {step} is already in TrainingJob {job}'s loss series"),
            }
        }
    }

    fn synced(&self) -> bool {
        self.caches.synced()
    }

    fn summary_every(&self) -> Duration {
        Duration::from_secs(1)
    }
}

/// A job a pass looks at: its id, the job (none: it is gone) and its own pods, read
/// once for the whole pass.
struct Visit {
    id: String,
    job: Option<Arc<TrainingJob>>,
    /// The pods the job controls, by name.
    own: Vec<Arc<Pod>>,
}

impl Visit {
    fn of(id: String, job: Option<Arc<TrainingJob>>, caches: &Caches) -> Self {
        let own = match &job {
            Some(job) => own_of(job, caches.pod_index.labelled_id(&id)),
            None => Vec::new(),
        };
        Visit { id, job, own }
    }
}
