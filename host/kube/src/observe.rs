//! Observing the cluster: reflectors (kube-runtime watchers feeding in-memory stores) on
//! Nodes, Pods and TrainingJobs; measured usage from `metrics.k8s.io` when the cluster
//! serves it; loss samples from following training containers' logs (and, kept in the
//! same [`LossBook`], from pushes); and the [`Snapshot`] the policy sees, built from
//! those caches. Watches restart on their own with back-off when the API server drops
//! them. This module reads; it must not write to the cluster.
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
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node as KubeNode, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, LogParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use tokio::sync::Notify;

use crate::act::{node_of, task_of};
use crate::charges::{self, Charges};
use crate::crd::{self, Phase, RestartAction, TrainingJob};
use crate::pod_index::PodsByJob;
use crate::progress::LogPattern;
use crate::views::{JobKey, Views};
use crate::volumes::{self, VolumeCaches};
use crate::{Error, JOB_LABEL, Result, pods, quantity, trim};
use crate::{rules, spread};
pub use switchyard_control::loss::LOSS_WINDOW;
use switchyard_control::loss::LossSeries;
use switchyard_core::eligibility::SelectorTerm;
use switchyard_core::model::{self, JobPhase, Resources, Snapshot, TaskPhase, Trigger};

/// Every job's loss series, what of it is already in the job's status, and how far each
/// followed log has been read.
#[derive(Debug, Default)]
pub struct LossBook {
    id_to_series: HashMap<String, JobLoss>,
    /// Per followed pod (`<job id>:<pod>`), the timestamp of the last line read.
    pod_to_read_until: HashMap<String, Timestamp>,
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

    /// Drops a finished job's series and cursors.
    pub fn forget(&mut self, id: &str) {
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

    /// The charges of pods `cached` (the pod cache, by `namespace/name`) does not show
    /// bound; forgets those it shows, and those assumed too long ago.
    fn pending(&mut self, cached: &HashMap<String, &Pod>) -> Vec<(String, Resources)> {
        self.pods.retain(|key, (_, _, at)| {
            at.elapsed() < ASSUME_FOR && cached.get(key).is_none_or(|p| node_of(p).is_none())
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
    let stream = watcher(api, config)
        .modify(trim)
        .default_backoff()
        .reflect(writer)
        .touched_objects();
    let driver = async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            match stream.next().await {
                Some(Ok(_)) => changed.notify_one(),
                // The watcher retries on its own with back-off; the error is only news.
                Some(Err(error)) => tracing::warn!(%error, "watch failed; retrying with back-off"),
                None => break,
            }
        }
    };
    (store, driver)
}

impl Caches {
    /// Caches over three stores (filled by reflectors, or by hand in tests), with no
    /// other pods, usage, loss series or assumed pods yet.
    pub fn new(nodes: Store<KubeNode>, pods: Store<Pod>, jobs: Store<TrainingJob>) -> Self {
        Caches {
            nodes,
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
        let (nodes, n) = reflect(
            Api::<KubeNode>::all(client.clone()),
            watcher::Config::default(),
            trim::node,
            changed.clone(),
        );
        let (pods, p) = reflect(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(JOB_LABEL),
            trim::pod,
            changed.clone(),
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
        let (jobs, j) = reflect(
            Api::<TrainingJob>::all(client.clone()),
            watcher::Config::default(),
            trim::job,
            changed.clone(),
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

    /// The snapshot at `now` (Unix seconds) with `triggers`, from the caches only. Views
    /// of nodes and jobs that did not change since the last snapshot are the same `Arc`s
    /// again ([`Views`]).
    pub fn snapshot(&self, now: f64, triggers: Vec<Trigger>) -> Snapshot {
        let pods = PodsByJob::of(self.pods.state());
        let usage = self.usage.lock().expect("usage lock").clone();
        let mut views = self.views.lock().expect("views lock");
        views.begin();
        let mut requested: HashMap<&str, Resources> = HashMap::new();
        for pod in pods.all() {
            if let (Some(node), true) = (node_of(pod), holds_resources(pod)) {
                let requests = views.pod_requests(pod, pod_requests);
                let sum = requested.entry(node).or_default();
                *sum = sum.plus(&requests);
            }
        }
        // Charges whose node names the maps above cannot borrow (other pods, assumed
        // pods, reservations), summed apart and added per node below.
        let mut extra: HashMap<String, Resources> = HashMap::new();
        let mut charge = |node: &str, requests: &Resources| match extra.get_mut(node) {
            Some(sum) => *sum = sum.plus(requests),
            None => {
                extra.insert(node.to_string(), *requests);
            }
        };
        for (node, requests) in self.others.per_node() {
            charge(&node, &requests);
        }
        {
            let mut assumed = self.assumed.lock().expect("assumed lock");
            if !assumed.is_empty() {
                let by_key: HashMap<String, &Pod> = pods
                    .all()
                    .iter()
                    .map(|p| {
                        (
                            format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()),
                            &**p,
                        )
                    })
                    .collect();
                for (node, requests) in assumed.pending(&by_key) {
                    charge(&node, &requests);
                }
            }
        }
        let jobs_now = self.jobs.state();
        for job in &jobs_now {
            for (node, requests) in reserved(job, &pods) {
                charge(&node, &requests);
            }
        }
        let mut cluster_nodes = self.nodes.state();
        cluster_nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let nodes: Vec<Arc<model::Node>> = cluster_nodes
            .iter()
            .map(|node| {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                let mut sum = requested.get(name).copied().unwrap_or_default();
                if let Some(more) = extra.get(name) {
                    sum = sum.plus(more);
                }
                let node_usage = usage.as_ref().and_then(|u| u.nodes.get(name).copied());
                views.node(node, name, sum, node_usage, || model::Node {
                    usage: node_usage,
                    requested: sum,
                    labels: node.labels().clone(),
                    schedulable: schedulable(node),
                    allocatable: node
                        .status
                        .as_ref()
                        .and_then(|s| s.allocatable.as_ref())
                        .map(quantity::resources)
                        .unwrap_or_default(),
                    name: name.to_string(),
                })
            })
            .collect();
        // Where each role's pods may run, as positions in `nodes` (sorted by name).
        views.eligibility_for(&cluster_nodes);
        let ports_in_use = host_ports_in_use(&jobs_now, &pods, &self.others);
        let loss = self.loss.lock().expect("loss lock");
        let mut sets_used = std::collections::HashSet::new();
        let mut jobs: Vec<(f64, Arc<model::Job>)> = jobs_now
            .iter()
            .filter_map(|job| {
                let id = job_id(job);
                let version = job
                    .metadata
                    .resource_version
                    .as_deref()
                    .filter(|v| !v.is_empty());
                // Once per role, not per task: a role's pods share its template.
                let rules = views.job_rules(&id, version, || {
                    job.spec
                        .roles
                        .iter()
                        .map(|r| (r.name.clone(), rules::of_pod_spec(r.template.spec.as_ref())))
                        .collect()
                });
                // A claim bound to a zonal or local volume narrows its role's nodes; a
                // claim not ready holds the job (see `crate::volumes`).
                // A role with host ports stays off the nodes where another job's pod, or
                // another scheduler's, uses them (see `crate::spread`).
                let claims = volumes::mounts_claims(job).then(|| self.volumes.of_job(job));
                let eligible: Vec<Option<u32>> = rules
                    .iter()
                    .map(|(role, r)| {
                        let mut extra: Vec<Vec<SelectorTerm>> = claims
                            .as_ref()
                            .and_then(|c| c.restrictions.get(role).cloned())
                            .unwrap_or_default();
                        if !ports_in_use.is_empty() {
                            extra.extend(port_exclusion(job, role, &ports_in_use));
                        }
                        match extra.is_empty() {
                            true => views.eligible(r),
                            false => views.eligible(&rules::restricted(r, &extra)),
                        }
                    })
                    .collect();
                let held = claims.and_then(|c| c.held);
                sets_used.extend(eligible.iter().copied());
                let key = JobKey {
                    version: version.unwrap_or_default().to_string(),
                    pods: pods
                        .labelled(job)
                        .map(|p| {
                            (
                                p.metadata.uid.clone().unwrap_or_default(),
                                p.metadata.resource_version.clone().unwrap_or_default(),
                            )
                        })
                        .collect(),
                    usage: usage.as_ref().map(|u| Arc::as_ptr(u) as usize),
                    loss: loss.version(&id),
                    eligible: eligible.clone(),
                    held: held.clone(),
                };
                // A pod without a version (made by hand) can change unseen.
                let key = match key.pods.iter().any(|(_, v)| v.is_empty()) {
                    true => JobKey {
                        version: String::new(),
                        ..key
                    },
                    false => key,
                };
                views.job(&id, key, rules.clone(), || {
                    let eligible_of = |role: &str| {
                        rules
                            .iter()
                            .zip(&eligible)
                            .find(|((name, _), _)| name == role)
                            .and_then(|(_, set)| *set)
                    };
                    self.job(
                        job,
                        &pods,
                        usage.as_deref(),
                        &loss,
                        eligible_of,
                        held.is_some(),
                    )
                })
            })
            .collect();
        drop(loss);
        views.sets_used(sets_used.len());
        views.end();
        jobs.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
        Snapshot {
            time: now,
            triggers,
            nodes,
            jobs: jobs.into_iter().map(|(_, j)| j).collect(),
            node_sets: views.node_sets(),
        }
    }

    /// The job as the policy sees it; `eligible` gives the eligibility set of a role's
    /// tasks; `held_by_volumes`: its claims keep its pending tasks from being placed.
    fn job(
        &self,
        job: &TrainingJob,
        all_pods: &PodsByJob,
        usage: Option<&Usage>,
        loss_book: &LossBook,
        mut eligible: impl FnMut(&str) -> Option<u32>,
        held_by_volumes: bool,
    ) -> Option<(f64, model::Job)> {
        let status = job.status.clone().unwrap_or_default();
        if matches!(status.phase, Some(Phase::Succeeded | Phase::Failed)) {
            return None;
        }
        let id = job_id(job);
        let own = own_pods(job, all_pods);
        let tasks: Vec<model::Task> = pods::tasks(job)
            .into_iter()
            .map(|spec| {
                // The task's newest pod: an old one a restart has not deleted yet is
                // not what runs the task.
                let pod = own
                    .iter()
                    .filter(|p| {
                        task_of(p) == Some(spec.name.as_str())
                            && p.metadata.deletion_timestamp.is_none()
                    })
                    .max_by_key(|p| pods::generation_of(p));
                let phase = match pod {
                    // A failed pod is replaced with its gang; it no longer runs.
                    Some(p) if phase_of(p) == Some("Failed") => TaskPhase::Restarting,
                    Some(p) if node_of(p).is_some() => TaskPhase::Running,
                    Some(_) | None
                        if own.iter().any(|p| {
                            task_of(p) == Some(spec.name.as_str())
                                && p.metadata.deletion_timestamp.is_some()
                        }) =>
                    {
                        TaskPhase::Restarting
                    }
                    _ => TaskPhase::Pending,
                };
                model::Task {
                    node: pod.and_then(|p| node_of(p)).map(str::to_string),
                    phase,
                    cpu_weight: pod.map(|p| pods::cpu_weight(job, p)).unwrap_or(1.0),
                    usage: pod
                        .and_then(|p| usage?.pods.get(&(p.namespace()?, p.name_any())).copied()),
                    // The pod, once made, says what admission added (LimitRange
                    // defaults, the runtime class's overhead).
                    requests: pod.map(|p| pod_requests(p)).unwrap_or(spec.requests),
                    eligible: eligible(&spec.role),
                    name: spec.name,
                    role: spec.role,
                }
            })
            .collect();
        let mut tasks = tasks;
        // A restart under way holds its tasks until the replacements are recorded, even
        // when the old pods are gone and the new ones not yet in the cache: the policy
        // must not place them a second time.
        // Held back: pods of a deleted job of the same name still there (their names
        // would collide), or pods of this one waiting for their scheduling gates to be
        // lifted (they cannot be bound until then).
        let gated = own
            .iter()
            .any(|p| node_of(p).is_none() && crate::act::gated(p));
        if gated || has_foreign_pods(job, all_pods) {
            for task in &mut tasks {
                task.phase = TaskPhase::Restarting;
                task.node = None;
            }
        }
        // A job whose claims are not ready keeps what runs; what is not placed yet
        // waits for the claims.
        if held_by_volumes {
            for task in tasks.iter_mut().filter(|t| t.phase == TaskPhase::Pending) {
                task.phase = TaskPhase::Restarting;
            }
        }
        if let Some(restart) = &status.restart {
            let whole_job = matches!(
                restart.action,
                RestartAction::Recover | RestartAction::Preempt
            );
            for task in &mut tasks {
                if whole_job || restart.targets.iter().any(|t| t.task == task.name) {
                    task.phase = TaskPhase::Restarting;
                    task.node = None;
                }
            }
        }
        let phase = if tasks.iter().any(|t| t.phase == TaskPhase::Restarting) {
            JobPhase::Restarting
        } else if tasks.iter().all(|t| t.phase == TaskPhase::Pending) {
            JobPhase::Waiting
        } else {
            JobPhase::Running
        };
        let role = job.spec.scalable_role()?;
        let current = status.replicas.unwrap_or(role.replicas);
        let submit = job
            .creation_timestamp()
            .map(|t| t.0.as_millisecond() as f64 / 1000.0)
            .unwrap_or(0.0);
        let start = own
            .iter()
            .filter_map(|p| p.status.as_ref()?.start_time.as_ref())
            .map(|t| t.0.as_millisecond() as f64 / 1000.0)
            .reduce(f64::min);
        let loss: Vec<model::LossSample> = match loss_book.samples(&id) {
            Some(samples) => samples,
            None => status
                .loss
                .iter()
                .map(|s| model::LossSample {
                    time: s.time,
                    step: s.step,
                    value: s.value,
                })
                .collect(),
        };
        Some((
            submit,
            model::Job {
                phase,
                submit_time: submit,
                start_time: start,
                priority: job.spec.priority,
                utility: job.spec.utility,
                tasks,
                replicas: model::Replicas {
                    role: role.name.clone(),
                    current,
                    min: role.min_replicas.unwrap_or(role.replicas).min(current),
                    max: role.max_replicas.unwrap_or(role.replicas).max(current),
                },
                loss,
                metric_rises: job.spec.metric_rises,
                moves: status.moves.iter().map(Into::into).collect(),
                checkpointable: job.spec.checkpoint.is_some(),
                labels: Arc::new(job_labels(job)),
                id,
            },
        ))
    }

    /// The job with id `id` (`namespace/name`), without its pods.
    pub fn training_job(&self, id: &str) -> Option<Arc<TrainingJob>> {
        self.jobs.find(|j| job_id(j) == id)
    }

    /// The job with id `id` (`namespace/name`) and its current pods, found in `index`
    /// (the pod cache grouped by job once for all the lookups of a pass).
    pub fn job_and_pods(
        &self,
        id: &str,
        index: &PodsByJob,
    ) -> Option<(Arc<TrainingJob>, Vec<Pod>)> {
        let job = self.training_job(id)?;
        let pods = job_pods(&job, index)
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        Some((job, pods))
    }
}

/// Host ports taken on each node, with the UID of the job whose pod takes them (none:
/// another scheduler's pod); empty, without looking, when no job asks for one.
fn host_ports_in_use(
    jobs: &[Arc<TrainingJob>],
    pods: &PodsByJob,
    others: &Charges,
) -> Vec<(Arc<str>, spread::HostPort, Option<String>)> {
    let wanted = jobs.iter().any(|j| {
        j.spec.roles.iter().any(|r| {
            r.template
                .spec
                .as_ref()
                .is_some_and(|s| !spread::host_ports(s).is_empty())
        })
    });
    if !wanted {
        return Vec::new();
    }
    let mut in_use: Vec<(Arc<str>, spread::HostPort, Option<String>)> = others
        .host_ports()
        .into_iter()
        .map(|(node, port)| (node, port, None))
        .collect();
    for pod in pods.all() {
        let (Some(node), Some(spec)) = (node_of(pod), pod.spec.as_ref()) else {
            continue;
        };
        if !holds_resources(pod) {
            continue;
        }
        let uid = pod.labels().get(crate::JOB_UID_LABEL).cloned();
        let node: Arc<str> = Arc::from(node);
        for port in spread::host_ports(spec) {
            in_use.push((node.clone(), port, uid.clone()));
        }
    }
    in_use
}

/// The exclusion keeping `role` of `job` off nodes where its host ports are taken by
/// other jobs' pods or other schedulers' (its own job's pods are kept apart by
/// [`spread::one_task_per_node`]).
fn port_exclusion(
    job: &TrainingJob,
    role: &str,
    in_use: &[(Arc<str>, spread::HostPort, Option<String>)],
) -> Option<Vec<SelectorTerm>> {
    let spec = job
        .spec
        .roles
        .iter()
        .find(|r| r.name == role)?
        .template
        .spec
        .as_ref()?;
    let wanted = spread::host_ports(spec);
    if wanted.is_empty() {
        return None;
    }
    let uid = job.metadata.uid.as_deref();
    spread::port_exclusion(
        &wanted,
        in_use
            .iter()
            .filter(|(_, _, owner)| owner.as_deref().is_none_or(|o| Some(o) != uid))
            .map(|(node, port, _)| (&**node, port)),
    )
}

/// The field selector of the watch on other schedulers' pods: bound and not finished.
pub const OTHERS_HOLDING_RESOURCES: &str =
    "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// The labels the policy sees on `job`: its own, and
/// [`spread::ONE_TASK_PER_NODE_LABEL`] when its tasks may not share a node.
fn job_labels(job: &TrainingJob) -> BTreeMap<String, String> {
    let mut labels = job.labels().clone();
    if spread::one_task_per_node(job) {
        labels.insert(spread::ONE_TASK_PER_NODE_LABEL.into(), "true".into());
    }
    labels
}

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
pub fn job_pods(job: &TrainingJob, all: &PodsByJob) -> Vec<Pod> {
    own_pods(job, all).into_iter().cloned().collect()
}

/// [`job_pods`] without copying them, for passes that only look.
pub fn own_pods<'a>(job: &TrainingJob, all: &'a PodsByJob) -> Vec<&'a Pod> {
    let mut own: Vec<&Pod> = all
        .labelled(job)
        .map(|p| &**p)
        .filter(|p| owned_by(p, job))
        .collect();
    own.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    own
}

/// Whether pods carry `job`'s name but belong to another object: those of a job of the
/// same name that was deleted, which the garbage collector has not removed yet. Their
/// names would collide with the new job's, so it is not placed until they are gone.
pub fn has_foreign_pods(job: &TrainingJob, all: &PodsByJob) -> bool {
    all.labelled(job).any(|p| !owned_by(p, job))
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
    let node = nodes.state().into_iter().find(|n| n.name_any() == node);
    deleting_by.0 < now && node.is_none_or(|n| !ready(&n))
}

/// A pod's phase (`Pending`, `Running`, `Succeeded`, `Failed`).
pub fn phase_of(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// What a restart under way holds on its target nodes: each replacement's requests,
/// from when the restart is recorded until its pod is in the cache, so that nothing else
/// is placed in the room it will need (kube-scheduler's nominated node). A target on the
/// node its old pod still runs on is covered by that pod.
fn reserved(job: &TrainingJob, all: &PodsByJob) -> Vec<(String, Resources)> {
    let Some(restart) = job.status.as_ref().and_then(|s| s.restart.as_ref()) else {
        return Vec::new();
    };
    let generation = job.status.as_ref().map(|s| s.generation).unwrap_or(0);
    let own = own_pods(job, all);
    let tasks = pods::tasks(job);
    restart
        .targets
        .iter()
        .filter(|target| {
            !own.iter().any(|p| {
                task_of(p) == Some(target.task.as_str())
                    && holds_resources(p)
                    && (pods::generation_of(p) == generation
                        || node_of(p) == Some(target.node.as_str()))
            })
        })
        .filter_map(|target| {
            let spec = tasks.iter().find(|t| t.name == target.task)?;
            Some((target.node.clone(), spec.requests))
        })
        .collect()
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
