//! The reflectors adoption reads from ([`Adoption`]): the pods labelled with this
//! instance's queue, and the owners of each enabled kind, every object trimmed to what
//! is read before it is stored. Every event a reflector applies moves the adoption's
//! generation on ([`Adoption::generation`]), so what is made from the caches can be kept
//! until it does (`kept`). It watches; it must not write to the cluster.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use tokio::sync::Notify;

use super::names::Integration;
use crate::watch::reflect_into;
use crate::{DEFAULT_QUEUE, QUEUE_LABEL};

/// A grouping, its type erased, and the generation of the stores it was made from.
pub(super) type KeptGrouping = (u64, Arc<dyn std::any::Any + Send + Sync>);

/// What a reflector does with each event its store applied: moves `generation` on.
fn marker<K>(generation: &Arc<AtomicU64>) -> impl Fn(&watcher::Event<K>) + Send + 'static {
    let generation = generation.clone();
    move |_| {
        generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// What adoption reads: the queue's pods and the enabled kinds' owners. A kind whose
/// store is absent is not enabled.
#[derive(Clone)]
pub struct Adoption {
    /// The queue whose pods this instance adopts (`--queue`).
    pub(crate) queue: Arc<str>,
    /// Every pod labelled with the queue, whoever owns it.
    pub(crate) pods: Store<Pod>,
    pub(crate) jobs: Option<Store<Job>>,
    pub(crate) jobsets: Option<Store<DynamicObject>>,
    pub(crate) pytorchjobs: Option<Store<DynamicObject>>,
    /// Moved on by every event applied to any of the stores above.
    generation: Arc<AtomicU64>,
    /// The grouping last made, with the generation it was made at (`kept`, which
    /// alone knows its type: naming it here would make the modules import one another).
    pub(super) kept: Arc<std::sync::Mutex<Option<KeptGrouping>>>,
}

impl Adoption {
    /// Adoption of nothing: no kind enabled, and an empty, listed pod store (what a
    /// controller started without `--integrations` and without a pod watch has).
    pub fn disabled() -> Self {
        let mut writer: Writer<Pod> = Writer::default();
        writer.apply_watcher_event(&watcher::Event::InitDone);
        Self::over(DEFAULT_QUEUE, writer.as_reader())
    }

    /// Adoption from queue `queue` reading its pods from `pods`, with no kind enabled
    /// yet (the `with_*` builders enable them; caches filled by hand in tests).
    pub fn over(queue: &str, pods: Store<Pod>) -> Self {
        Self {
            queue: Arc::from(queue),
            pods,
            jobs: None,
            jobsets: None,
            pytorchjobs: None,
            generation: Arc::default(),
            kept: Arc::default(),
        }
    }

    /// Notes that a store changed: each reflector calls it for every event it applied;
    /// whoever fills the stores by hand (a test, a bench) calls it after each change, or
    /// what is kept from them stays as it was.
    pub fn mark_changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// How many changes the stores have had: equal readings, equal stores.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Adopts batch Jobs, read from `jobs`.
    pub fn with_jobs(mut self, jobs: Store<Job>) -> Self {
        self.jobs = Some(jobs);
        self
    }

    /// Adopts JobSets, read from `jobsets`.
    pub fn with_jobsets(mut self, jobsets: Store<DynamicObject>) -> Self {
        self.jobsets = Some(jobsets);
        self
    }

    /// Adopts PyTorchJobs, read from `pytorchjobs`.
    pub fn with_pytorchjobs(mut self, pytorchjobs: Store<DynamicObject>) -> Self {
        self.pytorchjobs = Some(pytorchjobs);
        self
    }

    /// Whether pods of `kind` are adopted.
    pub fn enabled(&self, kind: Integration) -> bool {
        match kind {
            Integration::Job => self.jobs.is_some(),
            Integration::JobSet => self.jobsets.is_some(),
            Integration::PyTorchJob => self.pytorchjobs.is_some(),
        }
    }

    /// The queue this instance adopts from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// Starts the reflectors on `client`: the pods labelled `queue` (always, so that a
    /// gated pod of a kind not enabled gets its Event), and the owners of each kind in
    /// `integrations`. Each event signals `changed`. The returned futures must be
    /// spawned.
    pub fn start(
        client: &Client,
        integrations: &[Integration],
        queue: &str,
        changed: Arc<Notify>,
    ) -> (Self, Vec<BoxFuture<'static, ()>>) {
        let mut drivers: Vec<BoxFuture<'static, ()>> = Vec::new();
        let pods_writer: Writer<Pod> = Writer::default();
        let pods = pods_writer.as_reader();
        let generation: Arc<AtomicU64> = Arc::default();
        drivers.push(Box::pin(reflect_into(
            pods_writer,
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(&format!("{QUEUE_LABEL}={queue}")),
            super::trimmed::trim_pod,
            changed.clone(),
            marker(&generation),
        )));
        let mut adoption = Self::over(queue, pods);
        adoption.generation = generation.clone();
        for kind in integrations {
            match kind {
                Integration::Job if adoption.jobs.is_none() => {
                    let writer: Writer<Job> = Writer::default();
                    adoption.jobs = Some(writer.as_reader());
                    drivers.push(Box::pin(reflect_into(
                        writer,
                        Api::<Job>::all(client.clone()),
                        watcher::Config::default(),
                        super::job::trim,
                        changed.clone(),
                        marker(&generation),
                    )));
                }
                Integration::JobSet | Integration::PyTorchJob if !adoption.enabled(*kind) => {
                    let resource = kind.api_resource();
                    let writer: Writer<DynamicObject> = Writer::new(resource.clone());
                    let store = writer.as_reader();
                    let trim: fn(&mut DynamicObject) = match kind {
                        Integration::JobSet => {
                            adoption.jobsets = Some(store);
                            super::jobset::trim
                        }
                        _ => {
                            adoption.pytorchjobs = Some(store);
                            super::pytorchjob::trim
                        }
                    };
                    drivers.push(Box::pin(reflect_into(
                        writer,
                        Api::<DynamicObject>::all_with(client.clone(), &resource),
                        watcher::Config::default(),
                        trim,
                        changed.clone(),
                        marker(&generation),
                    )));
                }
                _ => {}
            }
        }
        (adoption, drivers)
    }

    /// Whether every reflector has finished its first list.
    pub fn synced(&self) -> bool {
        use futures::FutureExt;
        fn listed<K: Clone + kube::runtime::reflector::Lookup + 'static>(s: &Store<K>) -> bool
        where
            K::DynamicType: Eq + std::hash::Hash + Clone,
        {
            matches!(s.wait_until_ready().now_or_never(), Some(Ok(())))
        }
        listed(&self.pods)
            && self.jobs.as_ref().is_none_or(listed)
            && self.jobsets.as_ref().is_none_or(listed)
            && self.pytorchjobs.as_ref().is_none_or(listed)
    }

    /// Resolves once every reflector has listed; false when one stopped before.
    pub async fn wait_synced(&self) -> bool {
        let pods = self.pods.wait_until_ready().await.is_ok();
        let jobs = match &self.jobs {
            Some(s) => s.wait_until_ready().await.is_ok(),
            None => true,
        };
        let jobsets = match &self.jobsets {
            Some(s) => s.wait_until_ready().await.is_ok(),
            None => true,
        };
        let pytorchjobs = match &self.pytorchjobs {
            Some(s) => s.wait_until_ready().await.is_ok(),
            None => true,
        };
        pods && jobs && jobsets && pytorchjobs
    }
}
