//! Observing the cluster: reflectors (kube-runtime watchers feeding in-memory stores) on
//! Nodes, Pods, TrainingJobs and storage, and the caches they fill; the snapshot the
//! policy sees is built from those caches in [`crate::snapshot`]. Watches restart on
//! their own with back-off when the API server drops them; each event also marks what
//! it changed ([`crate::changes`]). This module reads; it must not write to the
//! cluster.
//!
//! Pods are watched cluster-wide, not only the controller's own: a node's `requested`
//! must count every pod bound to it, whoever scheduled it. The controller's own pods are
//! one watch (by label); every other pod is watched only while it is bound and has not
//! finished (`spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed`, the
//! selector kube-scheduler uses for assigned pods), and every object is trimmed to what
//! is read ([`crate::trim`]) before it is stored. Those counts are the policy's view;
//! kube-scheduler, which binds, also counts the pods it assumed or nominated.
//!
//! Every TrainingJob is watched, and only those of this controller's class
//! ([`TrainingJob::managed_by`]) are read: another installation's jobs are never in a
//! snapshot or acted on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node as KubeNode, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::Notify;

use crate::adopt::Adoption;
use crate::changes::Changes;
use crate::charges::{self, Charges};
use crate::crd::{DEFAULT_CONTROLLER_CLASS, TrainingJob};
use crate::loss::LossBook;
use crate::pod_index::PodIndex;
use crate::pods::{own_of, owned_by, placed_node};
use crate::usage::Usage;
use crate::views::Views;
use crate::volumes::VolumeCaches;
use crate::watch::reflect_into;
use crate::{JOB_LABEL, trim};
use switchyard_core::Resources;

/// Pods this replica has released to the scheduler that the pod reflector has not shown
/// released yet, charged to their nodes meanwhile, as kube-scheduler's assume cache
/// does. Without it, the round after a placement sees the node's room still free and the
/// next placement lands in it too, for the scheduler to refuse. An entry goes once the
/// cache shows the pod placed (released or bound), or after `ASSUME_FOR` (a pod
/// deleted before the cache saw it).
#[derive(Debug, Default)]
pub struct Assumed {
    /// `namespace/name` to (node, requests, when released).
    pods: HashMap<String, (String, Resources, std::time::Instant)>,
}

/// How long a released pod is charged to its node without the cache showing it.
pub(crate) const ASSUME_FOR: std::time::Duration = std::time::Duration::from_secs(120);

impl Assumed {
    /// Charges pod `namespace/name`, just released to `node`, with `requests`.
    pub fn released(&mut self, namespace: &str, name: &str, node: &str, requests: Resources) {
        self.pods.insert(
            format!("{namespace}/{name}"),
            (node.to_string(), requests, std::time::Instant::now()),
        );
    }

    /// Whether no pod is assumed.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Whether pod `namespace/name` was released here lately and may not be in the
    /// cache yet.
    pub(crate) fn holds(&self, namespace: &str, name: &str) -> bool {
        self.pods
            .get(&format!("{namespace}/{name}"))
            .is_some_and(|(_, _, at)| at.elapsed() < ASSUME_FOR)
    }

    /// The charges of pods the pod caches (`cached`, by namespace and name: the
    /// controller's own pods and the adopted ones) do not show placed; forgets those one
    /// shows, and those assumed too long ago.
    pub(crate) fn pending(&mut self, cached: &[&Store<Pod>]) -> Vec<(String, Resources)> {
        self.pods.retain(|key, (_, _, at)| {
            let shown = key.split_once('/').is_some_and(|(namespace, name)| {
                cached.iter().any(|store| {
                    store
                        .get(&ObjectRef::new(name).within(namespace))
                        .is_some_and(|p| placed_node(&p).is_some())
                })
            });
            at.elapsed() < ASSUME_FOR && !shown
        });
        self.pods
            .values()
            .map(|(node, requests, _)| (node.clone(), *requests))
            .collect()
    }
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
    /// Every TrainingJob, of every class: read them through [`Caches::managed_jobs`] and
    /// [`Caches::training_job`], which keep to this controller's.
    pub jobs: Store<TrainingJob>,
    /// The controller class whose jobs this controller acts on.
    pub class: Arc<str>,
    /// Measured usage, when `metrics.k8s.io` answers.
    pub usage: Arc<Mutex<Option<Arc<Usage>>>>,
    /// Loss series per job id, and how far each followed log was read.
    pub loss: Arc<Mutex<LossBook>>,
    /// Pods released by this replica that the pod cache does not show placed yet.
    pub assumed: Arc<Mutex<Assumed>>,
    /// Signalled on every watch event.
    pub changed: Arc<Notify>,
    /// The snapshot's views, kept between rounds.
    pub views: Arc<Mutex<Views>>,
    /// Claims, volumes and storage classes.
    pub volumes: VolumeCaches,
    /// The queue's pods and the owners of the kinds adopted ([`Adoption`]).
    pub adoption: Adoption,
}

/// Starts a reflector on `api`: returns its store and the future that keeps it filled
/// (to be spawned). Each object is trimmed by `trim` before the store keeps it (see
/// the crate's `trim` functions), and each event signals `changed`.
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
            class: Arc::from(DEFAULT_CONTROLLER_CLASS),
            usage: Arc::default(),
            loss: Arc::default(),
            assumed: Arc::default(),
            changed: Arc::new(Notify::new()),
            views: Arc::default(),
            volumes: VolumeCaches::listed_empty(),
            adoption: Adoption::disabled(),
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

    /// These caches adopting pods as `adoption` says (started with
    /// [`Adoption::start`], or filled by hand in tests).
    pub fn with_adoption(mut self, adoption: Adoption) -> Self {
        self.adoption = adoption;
        self
    }

    /// These caches reading only the jobs of controller class `class`.
    pub fn of_class(mut self, class: &str) -> Self {
        self.class = Arc::from(class);
        self
    }

    /// Every job of this controller's class.
    pub fn managed_jobs(&self) -> Vec<Arc<TrainingJob>> {
        let mut jobs = self.jobs.state();
        jobs.retain(|j| j.managed_by(&self.class));
        jobs
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
            class: Arc::from(DEFAULT_CONTROLLER_CLASS),
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
            adoption: Adoption::disabled(),
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
            && self.adoption.synced()
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
        let adopted = self.adoption.wait_synced().await;
        nodes.is_ok()
            && adopted
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
        self.jobs
            .get(&ObjectRef::new(name).within(namespace))
            .filter(|j| j.managed_by(&self.class))
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

/// The pods `job` controls (its namespace, its job label, and its UID in their
/// controller owner reference), by name.
pub(crate) fn job_pods(job: &TrainingJob, all: &PodIndex) -> Vec<Pod> {
    own_pods(job, all).iter().map(|p| (**p).clone()).collect()
}

/// [`job_pods`] without copying them, for passes that only look.
pub(crate) fn own_pods(job: &TrainingJob, all: &PodIndex) -> Vec<Arc<Pod>> {
    own_of(job, all.labelled(job))
}

/// Whether pods carry `job`'s name but belong to another object: those of a job of the
/// same name that was deleted, which the garbage collector has not removed yet. Their
/// names would collide with the new job's, so it is not placed until they are gone.
pub(crate) fn has_foreign_pods(job: &TrainingJob, labelled: &[Arc<Pod>]) -> bool {
    labelled.iter().any(|p| !owned_by(p, job))
}
