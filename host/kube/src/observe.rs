//! Observing the cluster: reflectors (kube-runtime watchers feeding in-memory stores) on
//! Nodes, Pods and TrainingJobs; measured usage from `metrics.k8s.io` when the cluster
//! serves it; loss samples from following training containers' logs (and, kept in the
//! same [`LossBook`], from pushes); the snapshot the policy sees is built from those
//! caches in [`crate::snapshot`]. Watches restart on their own with back-off when the
//! API server drops them; each event also marks what it changed ([`crate::changes`]).
//! This module reads; it must not write to the cluster.
//!
//! A followed log is read with timestamps, each sample keeps its line's time, and each
//! pod's follower remembers the timestamp of the last line it read: when the stream ends
//! and the pod is followed again, the log is asked for from that second on
//! (`sinceTime`) and the lines up to the remembered timestamp are skipped, so no sample
//! is taken twice. A process that has not followed the pod before (a new leader) starts
//! from the job's latest recorded sample in the same way. A job's series also takes each
//! step once, and starts from the samples in its status, so a restarted controller
//! continues the series rather than starting it over.
//!
//! Pods are watched cluster-wide, not only the controller's own: a node's `requested`
//! must count every pod bound to it, whoever scheduled it. The controller's own pods are
//! one watch (by label); every other pod is watched only while it is bound and has not
//! finished (`spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed`, the
//! selector kube-scheduler uses for assigned pods), and every object is trimmed to what
//! is read ([`crate::trim`]) before it is stored.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node as KubeNode, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, LogParams};
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use tokio::sync::Notify;

use crate::act::node_of;
use crate::changes::Changes;
use crate::charges::{self, Charges};
use crate::crd::{self, TrainingJob};
use crate::pod_index::PodIndex;
use crate::progress::LogPattern;
use crate::views::Views;
use crate::volumes::VolumeCaches;
use crate::{Error, JOB_LABEL, Result, pods, quantity, trim};
pub use switchyard_control::LOSS_WINDOW;
use switchyard_control::LossSeries;
// The core types are named `model::X` here, apart from the Kubernetes types of the same names.
use switchyard_core as model;
use switchyard_core::Resources;

/// Every job's loss series, what of it is already in the job's status, and how far each
/// followed log has been read.
#[derive(Debug, Default)]
pub struct LossBook {
    id_to_series: HashMap<String, JobLoss>,
    /// Per followed pod (`<job id>:<pod>`), the timestamp of the last line read.
    pod_to_read_until: HashMap<String, Timestamp>,
    /// Jobs whose series changed since the snapshot last looked.
    changed: HashSet<String>,
}

#[derive(Debug, Default)]
struct JobLoss {
    series: LossSeries,
    /// Raised by every sample taken.
    version: u64,
    /// The version last written to the job's status.
    written: u64,
    /// When it was last written (Unix seconds).
    written_at: Option<f64>,
}

impl LossBook {
    /// Whether job `id` has a series (else its status is what there is).
    pub fn has(&self, id: &str) -> bool {
        self.id_to_series.contains_key(id)
    }

    /// Starts job `id`'s series from the samples its status holds.
    pub fn seed(&mut self, id: &str, from_status: &[crd::LossSample]) {
        self.changed.insert(id.to_string());
        self.id_to_series
            .entry(id.to_string())
            .or_insert_with(|| JobLoss {
                series: LossSeries::from_samples(from_status.iter().map(|s| model::LossSample {
                    time: s.time,
                    step: s.step,
                    value: s.value,
                })),
                ..JobLoss::default()
            });
    }

    /// Adds a sample to job `id`'s series; false when its step is already there.
    pub fn record(&mut self, id: &str, time: f64, step: Option<u64>, value: f64) -> bool {
        let job = self.id_to_series.entry(id.to_string()).or_default();
        let taken = job.series.record(time, step, value);
        if taken {
            job.version += 1;
            self.changed.insert(id.to_string());
        }
        taken
    }

    /// The time of job `id`'s latest sample, if it has any.
    pub fn latest_time(&self, id: &str) -> Option<f64> {
        self.id_to_series
            .get(id)?
            .series
            .to_vec()
            .iter()
            .map(|s| s.time)
            .reduce(f64::max)
    }

    /// The version of job `id`'s series: raised by every sample taken.
    pub fn version(&self, id: &str) -> Option<u64> {
        self.id_to_series.get(id).map(|j| j.version)
    }

    /// Job `id`'s samples, oldest first.
    pub fn samples(&self, id: &str) -> Option<Vec<model::LossSample>> {
        self.id_to_series.get(id).map(|j| j.series.to_vec())
    }

    /// The series with samples not yet in their job's status, last written at least
    /// `every` seconds before `now`: (job id, version, samples).
    pub fn due(&self, now: f64, every: f64) -> Vec<(String, u64, Vec<model::LossSample>)> {
        self.id_to_series
            .iter()
            .filter(|(_, j)| j.version > j.written && j.written_at.is_none_or(|t| now - t >= every))
            .map(|(id, j)| (id.clone(), j.version, j.series.to_vec()))
            .collect()
    }

    /// Notes that `version` of job `id`'s series is in its status since `now`.
    pub fn written(&mut self, id: &str, version: u64, now: f64) {
        if let Some(job) = self.id_to_series.get_mut(id) {
            job.written = job.written.max(version);
            job.written_at = Some(now);
        }
    }

    /// The jobs whose series changed since the last call (for the snapshot).
    pub fn take_changed(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.changed)
    }

    /// Drops a finished job's series and cursors.
    pub fn forget(&mut self, id: &str) {
        self.changed.insert(id.to_string());
        self.id_to_series.remove(id);
        let prefix = format!("{id}:");
        self.pod_to_read_until
            .retain(|k, _| !k.starts_with(&prefix));
    }
}

/// Pods this replica has bound and the pod reflector has not shown bound yet, charged to
/// their nodes meanwhile: kube-scheduler's assume cache. Without it, the round after a
/// placement sees the node's room still free and the next placement lands in it too,
/// for the kubelet to refuse. An entry goes once the cache shows the pod bound, or after
/// [`ASSUME_FOR`] (a pod deleted before the cache saw it).
#[derive(Debug, Default)]
pub struct Assumed {
    /// `namespace/name` to (node, requests, when bound).
    pods: HashMap<String, (String, Resources, std::time::Instant)>,
}

/// How long a bound pod is charged to its node without the cache showing it.
pub const ASSUME_FOR: std::time::Duration = std::time::Duration::from_secs(120);

impl Assumed {
    /// Charges pod `namespace/name`, just bound to `node`, with `requests`.
    pub fn bound(&mut self, namespace: &str, name: &str, node: &str, requests: Resources) {
        self.pods.insert(
            format!("{namespace}/{name}"),
            (node.to_string(), requests, std::time::Instant::now()),
        );
    }

    /// Whether no pod is assumed.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// The charges of pods the pod cache (`cached`, by namespace and name) does not
    /// show bound; forgets those it shows, and those assumed too long ago.
    pub(crate) fn pending(&mut self, cached: &Store<Pod>) -> Vec<(String, Resources)> {
        self.pods.retain(|key, (_, _, at)| {
            let shown_bound = key.split_once('/').is_some_and(|(namespace, name)| {
                cached
                    .get(&ObjectRef::new(name).within(namespace))
                    .is_some_and(|p| node_of(&p).is_some())
            });
            at.elapsed() < ASSUME_FOR && !shown_bound
        });
        self.pods
            .values()
            .map(|(node, requests, _)| (node.clone(), *requests))
            .collect()
    }
}

/// The samples of a series as the status holds them.
pub fn status_loss(samples: &[model::LossSample]) -> Vec<crd::LossSample> {
    samples
        .iter()
        .map(|s| crd::LossSample {
            time: s.time,
            step: s.step,
            value: s.value,
        })
        .collect()
}

/// The caches the snapshot is built from.
#[derive(Clone)]
pub struct Caches {
    /// Every node.
    pub nodes: Store<KubeNode>,
    /// The controller's pods (those with its job label).
    pub pods: Store<Pod>,
    /// The controller's pods by job, kept in step with `pods` by its watch events.
    pub pod_index: PodIndex,
    /// What changed since the pass and the snapshot last looked, marked by the watch
    /// events on nodes, the controller's pods and TrainingJobs.
    pub changes: Changes,
    /// Every other pod while it is bound and holds resources, as what it takes from its
    /// node ([`Charges`]).
    pub others: Charges,
    /// Every TrainingJob.
    pub jobs: Store<TrainingJob>,
    /// Measured usage, when `metrics.k8s.io` answers.
    pub usage: Arc<Mutex<Option<Arc<Usage>>>>,
    /// Loss series per job id, and how far each followed log was read.
    pub loss: Arc<Mutex<LossBook>>,
    /// Pods bound by this replica that the pod cache does not show bound yet.
    pub assumed: Arc<Mutex<Assumed>>,
    /// Signalled on every watch event.
    pub changed: Arc<Notify>,
    /// The snapshot's views, kept between rounds.
    pub views: Arc<Mutex<Views>>,
    /// Claims, volumes and storage classes.
    pub volumes: VolumeCaches,
}

/// Starts a reflector on `api`: returns its store and the future that keeps it filled
/// (to be spawned). Each object is trimmed by `trim` before the store keeps it (see
/// [`crate::trim`]), and each event signals `changed`.
pub fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    trim: fn(&mut K),
    changed: Arc<Notify>,
) -> (
    Store<K>,
    impl std::future::Future<Output = ()> + Send + 'static,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    (
        store,
        reflect_into(writer, api, config, trim, changed, |_| {}),
    )
}

/// [`reflect`] into `writer`, handing each event to `note` once the store applied it
/// (to mark what changed, [`crate::changes`]).
pub fn reflect_into<K>(
    writer: Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    trim: fn(&mut K),
    changed: Arc<Notify>,
    note: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let stream = watcher(api, config)
        .modify(trim)
        .default_backoff()
        .reflect(writer);
    async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            match stream.next().await {
                Some(Ok(event)) => {
                    note(&event);
                    changed.notify_one();
                }
                // The watcher retries on its own with back-off; the error is only news.
                Some(Err(error)) => tracing::warn!(%error, "watch failed; retrying with back-off"),
                None => break,
            }
        }
    }
}

impl Caches {
    /// Caches over three stores (filled by reflectors, or by hand in tests), with no
    /// other pods, usage, loss series or assumed pods yet.
    pub fn new(nodes: Store<KubeNode>, pods: Store<Pod>, jobs: Store<TrainingJob>) -> Self {
        let changes = Changes::default();
        Caches {
            nodes,
            pod_index: PodIndex::new(pods.clone(), changes.clone()),
            changes,
            pods,
            others: Charges::listed_empty(),
            jobs,
            usage: Arc::default(),
            loss: Arc::default(),
            assumed: Arc::default(),
            changed: Arc::new(Notify::new()),
            views: Arc::default(),
            volumes: VolumeCaches::listed_empty(),
        }
    }

    /// Notes a watch event on the nodes, once the node store applied it (the reflectors
    /// of [`Caches::start`] do; caches filled by hand call it).
    pub fn node_event(&self, event: &watcher::Event<KubeNode>) {
        self.changes.node_event(event);
    }

    /// Notes a watch event on the controller's pods, once the pod store applied it.
    pub fn pod_event(&self, event: &watcher::Event<Pod>) {
        self.pod_index.apply(event);
    }

    /// Notes a watch event on the TrainingJobs, once the job store applied it.
    pub fn job_event(&self, event: &watcher::Event<TrainingJob>) {
        self.changes.job_event(event);
    }

    /// These caches reading claims, volumes and storage classes from `volumes`.
    pub fn with_volumes(mut self, volumes: VolumeCaches) -> Self {
        self.volumes = volumes;
        self
    }

    /// Starts the reflectors on `client`; the returned futures must be spawned. The
    /// controller's own pods are watched by their label; other pods only while they
    /// are bound and hold resources (kube-scheduler's assigned-pods selector), which is
    /// all a node's `requested` needs of them.
    pub fn start(client: &Client) -> (Caches, Vec<futures::future::BoxFuture<'static, ()>>) {
        let changed = Arc::new(Notify::new());
        let changes = Changes::default();
        let (nodes, nodes_writer) = reflector::store();
        let n = reflect_into(
            nodes_writer,
            Api::<KubeNode>::all(client.clone()),
            watcher::Config::default(),
            trim::node,
            changed.clone(),
            {
                let changes = changes.clone();
                move |event| changes.node_event(event)
            },
        );
        let (pods, pods_writer) = reflector::store();
        let pod_index = PodIndex::new(pods.clone(), changes.clone());
        let p = reflect_into(
            pods_writer,
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(JOB_LABEL),
            trim::pod,
            changed.clone(),
            {
                let index = pod_index.clone();
                move |event| index.apply(event)
            },
        );
        let others = Charges::default();
        let o = charges::watch(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default()
                .labels(&format!("!{JOB_LABEL}"))
                .fields(OTHERS_HOLDING_RESOURCES),
            others.clone(),
            changed.clone(),
        );
        let (jobs, jobs_writer) = reflector::store();
        let j = reflect_into(
            jobs_writer,
            Api::<TrainingJob>::all(client.clone()),
            watcher::Config::default(),
            trim::job,
            changed.clone(),
            {
                let changes = changes.clone();
                move |event| changes.job_event(event)
            },
        );
        let (claims, c) = reflect(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            watcher::Config::default(),
            trim::claim,
            changed.clone(),
        );
        let (volumes, v) = reflect(
            Api::<PersistentVolume>::all(client.clone()),
            watcher::Config::default(),
            trim::volume,
            changed.clone(),
        );
        let (classes, s) = reflect(
            Api::<StorageClass>::all(client.clone()),
            watcher::Config::default(),
            trim::class,
            changed.clone(),
        );
        let caches = Caches {
            nodes,
            pods,
            pod_index,
            changes,
            others,
            jobs,
            usage: Arc::default(),
            loss: Arc::default(),
            assumed: Arc::default(),
            changed,
            views: Arc::default(),
            volumes: VolumeCaches {
                claims,
                volumes,
                classes,
            },
        };
        (
            caches,
            vec![
                Box::pin(n),
                Box::pin(p),
                Box::pin(o),
                Box::pin(j),
                Box::pin(c),
                Box::pin(v),
                Box::pin(s),
            ],
        )
    }

    /// Whether every reflector has finished its first list. Until then a cache is empty
    /// or partial: a pod not listed yet would make its job look waiting and its restart
    /// look finished, so nothing may act on the caches before this is true.
    pub fn synced(&self) -> bool {
        use futures::FutureExt;
        let listed = |ready: Option<Result<(), reflector::store::WriterDropped>>| {
            matches!(ready, Some(Ok(())))
        };
        listed(self.nodes.wait_until_ready().now_or_never())
            && listed(self.pods.wait_until_ready().now_or_never())
            && self.others.listed()
            && listed(self.jobs.wait_until_ready().now_or_never())
            && listed(self.volumes.claims.wait_until_ready().now_or_never())
            && listed(self.volumes.volumes.wait_until_ready().now_or_never())
            && listed(self.volumes.classes.wait_until_ready().now_or_never())
    }

    /// Resolves once every reflector has finished its first list (see
    /// [`Caches::synced`]); false when a reflector stopped before that.
    pub async fn wait_synced(&self) -> bool {
        let (nodes, pods, jobs) = futures::join!(
            self.nodes.wait_until_ready(),
            self.pods.wait_until_ready(),
            self.jobs.wait_until_ready()
        );
        let (claims, volumes, classes) = futures::join!(
            self.volumes.claims.wait_until_ready(),
            self.volumes.volumes.wait_until_ready(),
            self.volumes.classes.wait_until_ready()
        );
        while !self.others.listed() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        nodes.is_ok()
            && pods.is_ok()
            && jobs.is_ok()
            && claims.is_ok()
            && volumes.is_ok()
            && classes.is_ok()
    }

    /// Where to start reading a log of job `id` that this process has not read yet: the
    /// time of the latest sample recorded (a series seen for the first time starts
    /// from the job's status, where the previous leader wrote it). Log samples carry
    /// their line's time, so lines up to it were read already.
    pub fn loss_cursor(&self, id: &str) -> Option<Timestamp> {
        let mut book = self.loss.lock().expect("loss lock");
        if !book.has(id)
            && let Some(job) = self.training_job(id)
        {
            let status = job.status.clone().unwrap_or_default();
            if !status.loss.is_empty() {
                book.seed(id, &status.loss);
            }
        }
        let latest = book.latest_time(id)?;
        Timestamp::from_millisecond((latest * 1000.0).round() as i64).ok()
    }

    /// Records a sample for job `id` (from a log line or an HTTP push), read at `time`;
    /// `step: None` means the step after the last. A series seen for the first time
    /// starts from the samples in the job's status. Returns false when the step is
    /// already in the series.
    pub fn record_sample(&self, id: &str, time: f64, step: Option<u64>, value: f64) -> bool {
        let mut book = self.loss.lock().expect("loss lock");
        if !book.has(id)
            && let Some(job) = self.training_job(id)
        {
            let status = job.status.clone().unwrap_or_default();
            book.seed(id, &status.loss);
        }
        book.record(id, time, step, value)
    }

    /// The job with id `id` (`namespace/name`), without its pods.
    pub fn training_job(&self, id: &str) -> Option<Arc<TrainingJob>> {
        let (namespace, name) = id.split_once('/')?;
        self.jobs.get(&ObjectRef::new(name).within(namespace))
    }

    /// The job with id `id` (`namespace/name`) and its current pods.
    pub fn job_and_pods(&self, id: &str) -> Option<(Arc<TrainingJob>, Vec<Pod>)> {
        let job = self.training_job(id)?;
        let pods = job_pods(&job, &self.pod_index)
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        Some((job, pods))
    }
}

/// The field selector of the watch on other schedulers' pods: bound and not finished.
pub const OTHERS_HOLDING_RESOURCES: &str =
    "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// A job's id in the snapshot: `namespace/name`.
pub fn job_id(job: &TrainingJob) -> String {
    format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any())
}

/// Whether `job` controls `pod` (its controller owner reference names the job's UID).
pub fn owned_by(pod: &Pod, job: &TrainingJob) -> bool {
    let Some(uid) = job.metadata.uid.as_deref() else {
        return false;
    };
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The pods `job` controls (its namespace, its job label, and its UID in their
/// controller owner reference), by name.
pub fn job_pods(job: &TrainingJob, all: &PodIndex) -> Vec<Pod> {
    own_pods(job, all).iter().map(|p| (**p).clone()).collect()
}

/// [`job_pods`] without copying them, for passes that only look.
pub fn own_pods(job: &TrainingJob, all: &PodIndex) -> Vec<Arc<Pod>> {
    own_of(job, all.labelled(job))
}

/// Those of `labelled` (a job's labelled pods, by name) that `job` controls.
pub fn own_of(job: &TrainingJob, labelled: Vec<Arc<Pod>>) -> Vec<Arc<Pod>> {
    let mut own = labelled;
    own.retain(|p| owned_by(p, job));
    own
}

/// Whether pods carry `job`'s name but belong to another object: those of a job of the
/// same name that was deleted, which the garbage collector has not removed yet. Their
/// names would collide with the new job's, so it is not placed until they are gone.
pub fn has_foreign_pods(job: &TrainingJob, labelled: &[Arc<Pod>]) -> bool {
    labelled.iter().any(|p| !owned_by(p, job))
}

/// Whether `job` has succeeded: every task of the roles its success policy names has a
/// pod that exited successfully, the pod its placement names (so an old pod of a restart,
/// or one of a deleted job of the same name, never counts).
pub fn succeeded<P: Borrow<Pod>>(job: &TrainingJob, own: &[P]) -> bool {
    let Some(status) = job.status.as_ref() else {
        return false;
    };
    if status.restart.is_some() || status.placements.is_empty() {
        return false;
    }
    let needed: Vec<pods::TaskSpec> = pods::tasks(job)
        .into_iter()
        .filter(|t| job.spec.success_needs(&t.role))
        .collect();
    !needed.is_empty()
        && needed.iter().all(|t| {
            status
                .placements
                .iter()
                .find(|p| p.task == t.name)
                .and_then(|placed| {
                    own.iter()
                        .map(Borrow::borrow)
                        .find(|p: &&Pod| p.metadata.name.as_deref() == Some(placed.pod.as_str()))
                })
                .is_some_and(|p| phase_of(p) == Some("Succeeded"))
        })
}

/// The job's pods that failed and are not being deleted yet.
pub fn failed_pods<P: Borrow<Pod>>(own: &[P]) -> Vec<&Pod> {
    own.iter()
        .map(Borrow::borrow)
        .filter(|p| phase_of(p) == Some("Failed") && p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Whether a failed pod was a disruption rather than a failure of the training process:
/// refused by its node's kubelet at admission (`OutOfcpu`, `OutOfnvidia.com/gpu`,
/// `UnexpectedAdmissionError`, ...), evicted, preempted, or stopped with its node. Such a
/// pod is replaced without counting against the job's `backoffLimit`, as a Job's
/// `podFailurePolicy` ignores the `DisruptionTarget` condition.
pub fn is_disruption(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let reason = status.reason.as_deref().unwrap_or_default();
    let admission_or_node = reason.starts_with("OutOf")
        || matches!(
            reason,
            "Evicted"
                | "Preempting"
                | "NodeShutdown"
                | "Shutdown"
                | "Terminated"
                | "NodeLost"
                | "UnexpectedAdmissionError"
                | "NodeAffinity"
                | "NodeAffinityMismatch"
                | "InvalidNodeInfo"
                | "PodOSNotSupported"
        );
    let disruption_target = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "DisruptionTarget" && c.status == "True");
    admission_or_node || disruption_target
}

/// Whether `pod` is being deleted on a node that cannot confirm it stopped (gone, or
/// not Ready) and its grace period is over at `now`: the kubelet will never report it
/// gone, so a restart does not wait for it.
pub fn stuck_on_lost_node(pod: &Pod, nodes: &Store<KubeNode>, now: Timestamp) -> bool {
    let Some(deleting_by) = pod.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    let Some(node) = node_of(pod) else {
        return false;
    };
    let node = nodes.get(&ObjectRef::new(node));
    deleting_by.0 < now && node.is_none_or(|n| !ready(&n))
}

/// A pod's phase (`Pending`, `Running`, `Succeeded`, `Failed`).
pub fn phase_of(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// Whether a pod still holds its node's resources (it has not finished).
pub fn holds_resources(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed"))
}

/// What a pod takes from its node ([`pods::spec_requests`]: containers, sidecars,
/// initialisation, overhead, with whatever the API server's admission added).
pub fn pod_requests(pod: &Pod) -> Resources {
    pod.spec
        .as_ref()
        .map(pods::spec_requests)
        .unwrap_or_default()
}

/// Whether new pods may be bound to `node`: Ready and not cordoned.
pub fn schedulable(node: &KubeNode) -> bool {
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    ready(node) && !cordoned
}

fn ready(node: &KubeNode) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// Usage measured by the metrics server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// Per node name.
    pub nodes: HashMap<String, Resources>,
    /// Per (namespace, pod name), containers summed.
    pub pods: HashMap<(String, String), Resources>,
}

/// Reads node usage, and the controller's pods' usage, from `metrics.k8s.io/v1beta1`.
/// `Ok(None)` when the cluster does not serve it (404 or 503): the snapshot then carries
/// no usage.
pub async fn fetch_usage(client: &Client) -> Result<Option<Usage>> {
    let get = |path: &'static str| async move {
        let request = http::Request::get(path)
            .body(Vec::new())
            .expect("a valid request");
        match client.request::<Value>(request).await {
            Ok(v) => Ok(Some(v)),
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 503) => Ok(None),
            Err(error) => Err(Error::api(format!("reading {path}"))(error)),
        }
    };
    let Some(nodes) = get("/apis/metrics.k8s.io/v1beta1/nodes").await? else {
        return Ok(None);
    };
    // Only the controller's pods: the snapshot carries no other pod's usage.
    let Some(pods) =
        get("/apis/metrics.k8s.io/v1beta1/pods?labelSelector=switchyard.dev%2Fjob").await?
    else {
        return Ok(None);
    };
    let resources = |usage: &Value| -> Resources {
        let map: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> =
            serde_json::from_value(usage.clone()).unwrap_or_default();
        quantity::resources(&map)
    };
    let items = |list: &Value| list["items"].as_array().cloned().unwrap_or_default();
    let mut usage = Usage::default();
    for item in items(&nodes) {
        if let Some(name) = item["metadata"]["name"].as_str() {
            usage
                .nodes
                .insert(name.to_string(), resources(&item["usage"]));
        }
    }
    for item in items(&pods) {
        let (Some(ns), Some(name)) = (
            item["metadata"]["namespace"].as_str(),
            item["metadata"]["name"].as_str(),
        ) else {
            continue;
        };
        let sum = item["containers"]
            .as_array()
            .iter()
            .flat_map(|c| c.iter())
            .fold(Resources::default(), |acc, c| {
                acc.plus(&resources(&c["usage"]))
            });
        usage.pods.insert((ns.to_string(), name.to_string()), sum);
    }
    Ok(Some(usage))
}

/// Follows the log of `pod`'s `container` and records every sample the pattern finds
/// for job `id`, each at its line's time (`clock` for a line without one). A pod
/// followed before is read from where its last follower stopped; one this process has
/// not followed, from the job's latest recorded sample (see the module docs). Returns
/// the number of samples taken when the log ends (the container stopped, or the API
/// server closed the stream).
pub async fn follow_log(
    pods: Api<Pod>,
    pod: &str,
    container: Option<String>,
    mut pattern: LogPattern,
    caches: &Caches,
    id: &str,
    clock: impl Fn() -> f64,
) -> Result<usize> {
    let cursor = format!("{id}:{pod}");
    let followed_before = caches
        .loss
        .lock()
        .expect("loss lock")
        .pod_to_read_until
        .get(&cursor)
        .copied();
    let read_until = followed_before.or_else(|| caches.loss_cursor(id));
    let params = LogParams {
        container,
        follow: true,
        timestamps: true,
        // `sinceTime` has whole seconds; the lines of that second already read are
        // skipped below by their full timestamps.
        since_time: read_until.map(|t| Timestamp::from_second(t.as_second()).unwrap_or(t)),
        ..LogParams::default()
    };
    let stream = pods
        .log_stream(pod, &params)
        .await
        .map_err(Error::api(format!("following the log of pod {pod}")))?;
    let mut lines = stream.lines();
    let mut count = 0;
    while let Some(line) = lines.try_next().await.map_err(|source| Error::Log {
        pod: pod.to_string(),
        source,
    })? {
        let (stamp, text) = match line.split_once(' ') {
            Some((head, rest)) => match head.parse::<Timestamp>() {
                Ok(stamp) => (Some(stamp), rest),
                Err(_) => (None, line.as_str()),
            },
            None => (None, line.as_str()),
        };
        // Samples keep their time in milliseconds: lines are compared at that grain.
        if let (Some(stamp), Some(until)) = (stamp, read_until)
            && stamp.as_millisecond() <= until.as_millisecond()
        {
            continue;
        }
        if let Some(sample) = pattern.parse_line(text) {
            let step = pattern.has_step_group().then_some(sample.step);
            let time = stamp
                .map(|s| s.as_millisecond() as f64 / 1000.0)
                .unwrap_or_else(&clock);
            if caches.record_sample(id, time, step, sample.value) {
                count += 1;
            }
        }
        if let Some(stamp) = stamp {
            caches
                .loss
                .lock()
                .expect("loss lock")
                .pod_to_read_until
                .insert(cursor.clone(), stamp);
        }
    }
    Ok(count)
}
