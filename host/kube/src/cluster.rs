//! [`Cluster`] (and [`LiveCluster`]) for a real Kubernetes cluster: the control loop's
//! clock is the wall clock, `advance` waits for watch events (job arrivals and
//! completions, node changes) or the policy's next tick, the snapshot comes from the
//! reflectors' caches, and accepted actions go to [`Actor`]. While it waits, the leader
//! also carries staged restarts on ([`Actor::advance_restart`], woken by the reflectors
//! when old pods terminate), writes each job's new loss samples to its status, and
//! follows training logs. Only the leader ([`Leader`]) does any of that, or acts; a
//! follower's `advance` just waits. The control loop is synchronous, so it runs on a
//! blocking thread and this type enters the tokio runtime through a [`Handle`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::runtime::Handle;

use crate::Error;
use crate::act::{self, Actor, Migration, RestartProgress, delete_key, node_of};
use crate::changes::{Dirty, Reader};
use crate::crd::{Phase, RestartAction, TrainingJob};
use crate::observe::{self, Caches, job_id};
use crate::progress::LogPattern;
use crate::volumes;
use crate::{pods, rules};
use switchyard_control::{ActionOutcome, Advance, Cluster, Leader, LiveCluster, LossAck};
use switchyard_core::{Action, JobLabel, Operation, RuledNode, Snapshot, Trigger};

/// The longest a wait lasts before the driver's commands are served again.
const WAIT: Duration = Duration::from_millis(50);
/// Without a watch event, the leader still looks at the caches this often (restart
/// deadlines, loss to write, logs to follow).
const POLL: Duration = Duration::from_secs(1);
/// A job's status gets its new loss samples at most this often, seconds. The policy
/// reads the series from memory; the status copy is for the next leader.
pub const LOSS_WRITE_EVERY: f64 = 30.0;
/// Logs followed at once.
pub const MAX_FOLLOWERS: usize = 512;
/// The first wait before following again a pod whose follower failed.
pub const FOLLOW_BACKOFF: Duration = Duration::from_secs(5);
/// The longest such wait.
pub const FOLLOW_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Loss writes under way at once.
pub const LOSS_WRITES_IN_FLIGHT: usize = 16;

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
    follow_backoff: HashMap<String, Backoff>,
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
    /// Jobs whose preemption finished since the last round (their pods are gone), for
    /// the next round's `job-preempted` triggers.
    preempted: Vec<String>,
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
            preempted: Vec::new(),
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

    /// Charges the pods just bound for `job`'s `(task, node)` pairs to their nodes until
    /// the pod cache shows them ([`observe::Assumed`]).
    fn assume(&self, job: &TrainingJob, pairs: &[(String, String)]) {
        let generation = job.status.as_ref().map(|s| s.generation).unwrap_or(0);
        let tasks = pods::tasks(job);
        let namespace = job.namespace().unwrap_or_default();
        let mut assumed = self.caches.assumed.lock().expect("assumed lock");
        for (task, node) in pairs {
            if let Some(spec) = tasks.iter().find(|t| t.name == *task) {
                let pod = pods::pod_name(&job.name_any(), task, generation);
                assumed.bound(&namespace, &pod, node, spec.requests);
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
                .jobs
                .state()
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
        if !observe::succeeded(job, &visit.own) {
            return true;
        }
        let id = &visit.id;
        let loss = self
            .caches
            .loss
            .lock()
            .expect("loss lock")
            .samples(id)
            .map(|s| observe::status_loss(&s));
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
            match (node.map(observe::schedulable), known_nodes.get_mut(name)) {
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

    /// Sends every visited job with a failed pod back to the queue (or fails it past
    /// its `backoffLimit`), deletes the pods of finished jobs that still hold resources,
    /// and reports how requested resizes went. A job with such work is looked at again
    /// next pass, until the caches show it done.
    fn drive_failures(&mut self, visits: &[Visit]) {
        let now = self.now_timestamp();
        for visit in visits {
            if !self.may_act() {
                return;
            }
            let Some(job) = &visit.job else {
                continue;
            };
            let Some(work) = FailureWork::of(job, &visit.own) else {
                continue;
            };
            self.revisit.insert(visit.id.clone());
            // Only a job with something to do has its pods copied for the actor.
            let own: Vec<Pod> = visit.own.iter().map(|p| (**p).clone()).collect();
            let id = &visit.id;
            let outcome = match work {
                FailureWork::StopFinished => self.handle.block_on(self.actor.stop_pods(job, &own)),
                FailureWork::ReportResize => {
                    self.handle.block_on(self.actor.report_resize(job, &own))
                }
                FailureWork::Recover => {
                    let failed = observe::failed_pods(&own);
                    self.handle
                        .block_on(self.actor.recover(job, &own, &failed, now))
                }
            };
            match outcome {
                Ok(()) => {}
                // The cache is behind a status this replica just wrote.
                Err(Error::Stale { .. }) => {}
                Err(error) => {
                    tracing::warn!(%error, label = error.metric_label(), job = id, "handling failed or finished pods")
                }
            }
        }
        // A key per pod in the cache is made only when there is something to forget.
        if self.actor.remembers_pods() {
            let present: HashSet<String> = self
                .caches
                .pods
                .state()
                .iter()
                .map(|p| delete_key(p))
                .collect();
            self.actor.forget_deletes(&present);
        }
    }

    /// Gives each visited job whose claims hold it the `VolumesReady=False` condition,
    /// with the reason and the claim named, and `True` once they no longer do (only a
    /// job that had it `False`). Written when what it says changes, once per change even
    /// while the job cache lags behind the write. A job mounting claims is looked at
    /// every pass: its claims change apart from it.
    fn drive_volume_conditions(&mut self, visits: &[Visit], whole: bool) {
        for visit in visits {
            if !self.may_act() {
                return;
            }
            let Some(job) = &visit.job else {
                self.volume_conditions.remove(&visit.id);
                continue;
            };
            let phase = job.status.as_ref().and_then(|s| s.phase);
            if !volumes::mounts_claims(job)
                || matches!(phase, Some(Phase::Succeeded | Phase::Failed))
            {
                continue;
            }
            self.revisit.insert(visit.id.clone());
            let current = job.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == volumes::VOLUMES_CONDITION)
            });
            let wanted = match self.caches.volumes.of_job(job).held {
                Some(held) => ("False", held.reason.to_string(), held.message),
                None if current.is_some_and(|c| c.status == "False") => (
                    "True",
                    "Ready".to_string(),
                    "every claim is bound, or waits for the node its first pod is placed on"
                        .to_string(),
                ),
                None => continue,
            };
            let shown = current.is_some_and(|c| {
                (c.status.as_str(), &c.reason, &c.message) == (wanted.0, &wanted.1, &wanted.2)
            });
            let id = &visit.id;
            if shown || self.volume_conditions.get(id) == Some(&wanted) {
                continue;
            }
            let written = self.handle.block_on(self.actor.update_status(job, |s| {
                act::set_condition(
                    s,
                    volumes::VOLUMES_CONDITION,
                    wanted.0,
                    &wanted.1,
                    &wanted.2,
                )
            }));
            match written {
                Ok(_) => {
                    self.volume_conditions.insert(id.clone(), wanted);
                }
                Err(error) => {
                    tracing::warn!(%error, job = id, "writing the VolumesReady condition")
                }
            }
        }
        if whole && !self.volume_conditions.is_empty() {
            let present: HashSet<&str> = visits.iter().map(|v| v.id.as_str()).collect();
            self.volume_conditions
                .retain(|id, _| present.contains(id.as_str()));
        }
    }

    /// Carries every visited job's restart on as far as the caches allow; never waits.
    /// A job with a restart under way is looked at every pass (its steps wait for
    /// grace periods and deadlines, not only for the caches).
    fn drive_restarts(&mut self, visits: &[Visit]) {
        let now = self.now_timestamp();
        let caches = &self.caches;
        self.restarts_done.retain(|id, requested| {
            caches.training_job(id).is_some_and(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.restart.as_ref())
                    .is_some_and(|r| r.requested_at == *requested)
            })
        });
        for visit in visits {
            let Some(job) = &visit.job else {
                continue;
            };
            let Some(restart) = job.status.as_ref().and_then(|s| s.restart.clone()) else {
                continue;
            };
            self.revisit.insert(visit.id.clone());
            let id = visit.id.clone();
            if self.restarts_done.get(&id) == Some(&restart.requested_at) {
                continue;
            }
            // Terminating pods are included: the replacement waits until they are gone;
            // except those a lost node will never confirm stopped, past their grace
            // period (the pod garbage collector removes them in time).
            let mut job_pods: Vec<Pod> = visit.own.iter().map(|p| (**p).clone()).collect();
            job_pods.retain(|p| {
                let lost = observe::stuck_on_lost_node(p, &self.caches.nodes, now);
                if lost {
                    tracing::warn!(
                        job = id,
                        pod = p.name_any(),
                        "not waiting for a pod whose node is lost"
                    );
                }
                !lost
            });
            match self
                .handle
                .block_on(self.actor.advance_restart(job, &job_pods, now))
            {
                Ok(RestartProgress::Done) if restart.action == RestartAction::Preempt => {
                    tracing::info!(job = id, "preemption finished; the job waits again");
                    self.restarts_done.insert(id.clone(), restart.requested_at);
                    self.preempted.push(id);
                }
                Ok(RestartProgress::Done) => {
                    tracing::info!(job = id, "restart finished");
                    let targets: Vec<(String, String)> = restart
                        .targets
                        .iter()
                        .map(|t| (t.task.clone(), t.node.clone()))
                        .collect();
                    self.assume(job, &targets);
                    self.restarts_done.insert(id, restart.requested_at);
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, label = error.metric_label(), job = id, "restart step failed; retrying when the caches change")
                }
            }
        }
    }

    /// Writes each job's new loss samples to its status, at most every
    /// [`LOSS_WRITE_EVERY`] seconds per job, off the decision thread: one merge patch per
    /// job, [`LOSS_WRITES_IN_FLIGHT`] at a time, and no new batch while one is under way.
    fn write_loss(&mut self) {
        if self.loss_writes.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        let now = (self.clock)();
        let due = self
            .caches
            .loss
            .lock()
            .expect("loss lock")
            .due(now, LOSS_WRITE_EVERY);
        let writes: Vec<_> = due
            .into_iter()
            .filter_map(|(id, version, samples)| {
                let job = self.caches.training_job(&id)?;
                Some((job, id, version, observe::status_loss(&samples)))
            })
            .collect();
        if writes.is_empty() {
            return;
        }
        let (actor, caches) = (self.actor.clone(), self.caches.clone());
        self.loss_writes = Some(self.handle.spawn(async move {
            futures::stream::iter(writes)
                .for_each_concurrent(LOSS_WRITES_IN_FLIGHT, |(job, id, version, loss)| {
                    let (actor, caches) = (&actor, &caches);
                    async move {
                        match actor.patch_status(&job, json!({ "loss": loss })).await {
                            Ok(()) => caches
                                .loss
                                .lock()
                                .expect("loss lock")
                                .written(&id, version, now),
                            Err(error) => tracing::warn!(%error, job = id, "writing loss samples"),
                        }
                    }
                })
                .await;
        }));
    }

    /// Takes in the followers whose streams ended: a failed one's pod waits a back-off
    /// before it is followed again. Returns their jobs, to be looked at this pass.
    fn reap_followers(&mut self) -> Vec<String> {
        let now = Instant::now();
        let finished: Vec<String> = self
            .followed
            .iter()
            .filter(|(_, (_, f))| f.is_finished())
            .map(|(k, _)| k.clone())
            .collect();
        let mut jobs = Vec::new();
        for key in finished {
            let Some((job, task)) = self.followed.remove(&key) else {
                continue;
            };
            let failed = !matches!(futures::FutureExt::now_or_never(task), Some(Ok(Ok(_))));
            if failed {
                let wait = self
                    .follow_backoff
                    .get(&key)
                    .map_or(FOLLOW_BACKOFF, |b| (b.wait * 2).min(FOLLOW_BACKOFF_MAX));
                self.follow_backoff.insert(
                    key,
                    Backoff {
                        until: now + wait,
                        wait,
                        job: job.clone(),
                    },
                );
            } else {
                self.follow_backoff.remove(&key);
            }
            jobs.push(job);
        }
        jobs
    }

    /// Starts a log follower for every running pod of a visited job that reads progress
    /// from logs, naming the container (a pod with a sidecar refuses an unnamed log
    /// request), at most [`MAX_FOLLOWERS`] at a time. A pod whose follower failed is
    /// followed again only after a back-off ([`FOLLOW_BACKOFF`], doubling to
    /// [`FOLLOW_BACKOFF_MAX`]); one whose stream simply ended is followed again at the
    /// next look. A job with a running pod left unfollowed (back-off, limit) is looked
    /// at again next pass.
    fn follow_logs(&mut self, visits: &[Visit], whole: bool) {
        let now = Instant::now();
        let mut present = HashSet::new();
        for visit in visits {
            let Some(job) = &visit.job else {
                self.follow_backoff.retain(|_, b| b.job != visit.id);
                continue;
            };
            let Some(log) = job.spec.progress.log.as_ref() else {
                continue;
            };
            let id = &visit.id;
            // Compiled only for a pod that gets a follower, not for every job each pass.
            let mut pattern: Option<LogPattern> = None;
            let mut own_keys = HashSet::new();
            for pod in &visit.own {
                let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
                own_keys.insert(key.clone());
                present.insert(key.clone());
                let running = observe::phase_of(pod) == Some("Running");
                if !running || node_of(pod).is_none() || self.followed.contains_key(&key) {
                    continue;
                }
                let waiting = self.follow_backoff.get(&key).is_some_and(|b| now < b.until);
                if waiting || self.followed.len() >= MAX_FOLLOWERS {
                    if !waiting {
                        tracing::warn!(
                            limit = MAX_FOLLOWERS,
                            "following as many logs as allowed; the others wait"
                        );
                    }
                    self.revisit.insert(id.clone());
                    continue;
                }
                let Some(container) = pods::log_container(job, pod) else {
                    continue;
                };
                let pattern = match &pattern {
                    Some(p) => p.clone(),
                    None => match LogPattern::compile(&job.name_any(), &log.pattern) {
                        Ok(p) => pattern.insert(p).clone(),
                        Err(error) => {
                            tracing::warn!(%error, "not following the job's logs");
                            break;
                        }
                    },
                };
                let api: Api<Pod> =
                    Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
                let (caches, name, job_id, clock) = (
                    self.caches.clone(),
                    pod.name_any(),
                    id.clone(),
                    self.clock.clone(),
                );
                let task = self.handle.spawn(async move {
                    let followed = observe::follow_log(
                        api,
                        &name,
                        Some(container),
                        pattern,
                        &caches,
                        &job_id,
                        || clock(),
                    )
                    .await;
                    if let Err(error) = &followed {
                        tracing::warn!(%error, "log follower stopped");
                    }
                    followed
                });
                // One follower per pod at a time; when its stream ends, the next pass
                // looks at the job again and starts another from where this one stopped.
                self.followed.insert(key, (id.clone(), task));
            }
            // This job's pods gone: their followers end with their streams; their
            // back-offs go now.
            self.follow_backoff
                .retain(|key, b| b.job != *id || own_keys.contains(key));
        }
        if whole {
            self.follow_backoff.retain(|key, _| present.contains(key));
        }
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
            dirty.all = true;
        }
        self.last_pass = Some(Instant::now());
        let followers_done = self.reap_followers();
        let visits = self.jobs_to_visit(&dirty, followers_done);
        self.drive_failures(&visits);
        self.drive_restarts(&visits);
        self.drive_volume_conditions(&visits, dirty.all);
        self.write_loss();
        self.follow_logs(&visits, dirty.all);
        let mut triggers = self.changes(&visits, &dirty);
        triggers.extend(self.preempted.drain(..).map(Trigger::JobPreempted));
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

/// How the claims of `job` waiting for their first consumer get volumes before its
/// tasks are bound to `pairs` (task, node): each on the node of the first task of the
/// role that mounts it, bound to a pre-provisioned volume that node can mount or made
/// for it (see [`VolumeCaches::provision_on`]). An error when the job's claims hold it,
/// or a claim can no longer get a volume there (the caches changed since the snapshot
/// the decision was taken on).
fn claims_to_provision(
    caches: &Caches,
    job: &TrainingJob,
    pairs: &[(String, String)],
) -> crate::Result<Vec<volumes::Provision>> {
    if !volumes::mounts_claims(job) {
        return Ok(Vec::new());
    }
    let verdict = caches.volumes.of_job(job);
    let held = |message: String| Error::WaitingForVolumes {
        job: job.name_any(),
        message,
    };
    if let Some(found) = verdict.held {
        return Err(held(found.message));
    }
    let tasks = pods::tasks(job);
    let role_of = |task: &str| {
        tasks
            .iter()
            .find(|t| t.name == task)
            .map(|t| t.role.as_str())
    };
    let namespace = job.namespace().unwrap_or_default();
    let mut provisions = Vec::new();
    for selection in verdict.to_select {
        let Some((_, node)) = pairs
            .iter()
            .find(|(task, _)| role_of(task) == Some(selection.role.as_str()))
        else {
            continue;
        };
        let labels = caches
            .nodes
            .get(&ObjectRef::new(node))
            .map(|n| rules::RuledKubeNode::of(&n).labels().clone())
            .unwrap_or_default();
        let taken: Vec<String> = provisions
            .iter()
            .filter_map(|p| match p {
                volumes::Provision::Volume { volume, .. } => Some(volume.clone()),
                volumes::Provision::ForNode { .. } => None,
            })
            .collect();
        let provision = caches
            .volumes
            .provision_on((&namespace, &selection.claim), node, &labels, &taken)
            .ok_or_else(|| {
                held(format!(
                    "PersistentVolumeClaim {} can no longer get a volume on node {node}",
                    selection.claim
                ))
            })?;
        provisions.push(provision);
    }
    Ok(provisions)
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
                        match claims_to_provision(&self.caches, &job, &pairs) {
                            Ok(claims) if claims.is_empty() => {}
                            Ok(claims) => return Err(actor.provision(&job, &claims).await),
                            Err(held) => {
                                return Err(actor.action_failed(&job, "Place", held).await);
                            }
                        }
                        let placed = actor.place(&job, &pairs, reason).await;
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
                        match pods
                            .iter()
                            .find(|p| crate::act::task_of(p) == Some(task.as_str()))
                        {
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
            Some(job) => observe::own_of(job, caches.pod_index.labelled_id(&id)),
            None => Vec::new(),
        };
        Visit { id, job, own }
    }
}

/// When a pod whose follower failed is followed again.
struct Backoff {
    until: Instant,
    /// The wait that was, doubled at the next failure.
    wait: Duration,
    /// The pod's job's id.
    job: String,
}

/// What [`KubeCluster::drive_failures`] has to do for a job, judged from the cache
/// without copying its pods.
enum FailureWork {
    /// The job has finished and some of its pods still run.
    StopFinished,
    /// Pods failed: the gang goes back to the queue (or the job fails).
    Recover,
    /// A resize was asked for and its outcome is not reported yet.
    ReportResize,
}

impl FailureWork {
    fn of(job: &TrainingJob, own: &[Arc<Pod>]) -> Option<Self> {
        let status = job.status.as_ref();
        let phase = status.and_then(|s| s.phase);
        if matches!(phase, Some(Phase::Succeeded | Phase::Failed)) {
            let running = own
                .iter()
                .any(|p| !act::terminated(p) && p.metadata.deletion_timestamp.is_none());
            return running.then_some(Self::StopFinished);
        }
        if status.is_some_and(|s| s.restart.is_some()) {
            return None;
        }
        if !observe::failed_pods(own).is_empty() {
            return Some(Self::Recover);
        }
        let resize_pending = status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == act::CPU_WEIGHT_CONDITION && c.status == "Unknown")
        });
        resize_pending.then_some(Self::ReportResize)
    }
}
