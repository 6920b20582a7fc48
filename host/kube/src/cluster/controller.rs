//! [`KubeCluster`]: what the backend holds between rounds (the caches, the actor, the
//! leadership grant, what the last pass knew of jobs and nodes, the log followers),
//! its constructors, and the helpers every part of a round shares. The round's parts
//! are its sibling modules; this one must not carry one out.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::{Client, ResourceExt};
use tokio::runtime::Handle;

use super::adopted::AdoptedPass;
use crate::act::Actor;
use crate::crd::TrainingJob;
use crate::observe::Caches;
use crate::pods::own_of;
use crate::template;
use switchyard_control::Leader;

/// The cluster's clock: Unix seconds.
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// A real cluster behind the control loop.
pub struct KubeCluster {
    pub(super) handle: Handle,
    pub(super) client: Client,
    pub(super) caches: Caches,
    pub(super) actor: Actor,
    pub(super) leader: Arc<Leader>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) clock: Clock,
    pub(super) known_jobs: HashSet<String>,
    pub(super) known_nodes: HashMap<String, bool>,
    /// Per followed pod (`namespace/name`): its job's id and the follower.
    pub(super) followed: HashMap<String, (String, tokio::task::JoinHandle<crate::Result<usize>>)>,
    /// Per pod whose follower failed: when to try again.
    pub(super) follow_backoff: HashMap<String, Backoff>,
    /// Jobs the next pass looks at whatever the watch events say: a restart under way,
    /// failed pods or a resize not handled yet, claims, a follower to start, an end
    /// not recorded yet. Every pass makes it anew from the jobs it visits.
    pub(super) revisit: HashSet<String>,
    /// The batch of loss writes under way, if any.
    pub(super) loss_writes: Option<tokio::task::JoinHandle<()>>,
    /// Restarts finished here (job id to `requestedAt`) that the job cache may still
    /// show under way.
    pub(super) restarts_done: HashMap<String, String>,
    pub(super) last_pass: Option<Instant>,
    /// Whether this replica led at the last look.
    pub(super) was_leading: bool,
    /// Jobs queued again since the last round (a preemption or a gang's recovery
    /// finished: their pods are gone and they wait), for the next round's
    /// `job-preempted` triggers.
    pub(super) requeued: Vec<String>,
    /// Pods holding up a restart on a node that is not Ready, already reported.
    pub(super) unconfirmed_warned: HashSet<String>,
    pub(super) finished: usize,
    /// Per job id, the `VolumesReady` condition last written (status, reason, message).
    pub(super) volume_conditions: HashMap<String, (&'static str, String, String)>,
    /// What the pass over the adopted jobs keeps between passes.
    pub(super) adopted: AdoptedPass,
    /// In-place resizes asked of adopted pods, by pod UID, followed until applied.
    pub(super) adopted_resizes: std::sync::Mutex<HashMap<String, crate::act::AskedResize>>,
    /// Grows of elastic adopted jobs whose new pods are released to the nodes decided
    /// once the operator made them.
    pub(super) adopted_grows: std::sync::Mutex<super::adopted_grow::Grows>,
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
            adopted: AdoptedPass::default(),
            adopted_resizes: Default::default(),
            adopted_grows: Default::default(),
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

    /// Setting this flag makes [`switchyard_control::Cluster::advance`] return
    /// [`switchyard_control::Advance::Stopped`].
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether this replica may act now: it leads, and its caches are complete (a
    /// leader acting on a cache that has not listed yet would place running jobs again
    /// and finish restarts whose old pods still run).
    pub(super) fn may_act(&self) -> bool {
        self.leader.is_leading() && self.caches.synced()
    }

    pub(super) fn now_timestamp(&self) -> Timestamp {
        let millis = ((self.clock)() * 1000.0) as i64;
        Timestamp::from_millisecond(millis).unwrap_or_else(|_| Timestamp::now())
    }

    /// Charges the pods just released for `job`'s `(task, node)` pairs to their nodes
    /// until the pod cache shows them ([`crate::observe::Assumed`]).
    pub(super) fn assume(&self, job: &TrainingJob, pairs: &[(String, String)]) {
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
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A job a pass looks at: its id, the job (none: it is gone) and its own pods, read
/// once for the whole pass.
pub(super) struct Visit {
    pub(super) id: String,
    pub(super) job: Option<Arc<TrainingJob>>,
    /// The pods the job controls, by name.
    pub(super) own: Vec<Arc<Pod>>,
}

impl Visit {
    pub(super) fn of(id: String, job: Option<Arc<TrainingJob>>, caches: &Caches) -> Self {
        let own = match &job {
            Some(job) => own_of(job, caches.pod_index.labelled_id(&id)),
            None => Vec::new(),
        };
        Visit { id, job, own }
    }
}

/// When a pod whose follower failed is followed again.
pub(super) struct Backoff {
    pub(super) until: Instant,
    /// The wait that was, doubled at the next failure.
    pub(super) wait: Duration,
    /// The pod's job's id.
    pub(super) job: String,
}
