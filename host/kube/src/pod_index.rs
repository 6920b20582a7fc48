//! The controller's pods grouped by the job they are labelled with, and what they request
//! on each node, kept in step with the pod cache by its watch events. Finding a job's
//! pods by scanning the whole cache made a pass cost jobs × pods; building the grouping
//! once per pass still cost a hash per pod per pass, twice per round (the pass and the
//! snapshot). Kept up to date per event, a lookup costs one job's pods and a round costs
//! what changed.
//!
//! Each event also marks what it touched in [`Changes`]: the job and the node of the pod
//! before and after it. A relist (`Init` .. `InitDone`) replaces the whole cache, and
//! which pods went is known only by their absence, so the index is rebuilt from the
//! cache at its next read and [`Changes`] marks everything. Pods are the cache's own
//! `Arc`s, not copies. It reads the cache; it must not decide anything about the pods.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use switchyard_core::Resources;

use crate::changes::Changes;
use crate::crd::TrainingJob;
use crate::pods::{holds_resources, job_id, labelled_job, placed_node, pod_key, pod_requests};

/// The controller's pods by job, kept from the pod cache's watch events.
#[derive(Clone)]
pub struct PodIndex {
    store: Store<Pod>,
    changes: Changes,
    inner: Arc<RwLock<Inner>>,
}

#[derive(Default)]
struct Inner {
    /// The cache was relisted (or never read): rebuild before the next read.
    stale: bool,
    /// Job id (`namespace/name`) to its labelled pods by name.
    by_job: HashMap<String, BTreeMap<String, Arc<Pod>>>,
    /// Pod `namespace/name` to what the index holds of it.
    by_pod: HashMap<String, Entry>,
    /// What the pods holding resources request, per node.
    per_node: HashMap<String, Resources>,
}

struct Entry {
    job: Option<String>,
    charge: Option<(String, Resources)>,
}

impl Inner {
    /// Removes pod `key`; returns its job and node, for marking.
    fn remove(&mut self, key: &str, name: &str) -> (Option<String>, Option<String>) {
        let Some(entry) = self.by_pod.remove(key) else {
            return (None, None);
        };
        if let Some(job) = &entry.job
            && let Some(pods) = self.by_job.get_mut(job)
        {
            pods.remove(name);
            if pods.is_empty() {
                self.by_job.remove(job);
            }
        }
        let node = entry.charge.map(|(node, requests)| {
            if let Some(sum) = self.per_node.get_mut(&node) {
                *sum = sum.saturating_minus(&requests);
                if *sum == Resources::default() {
                    self.per_node.remove(&node);
                }
            }
            node
        });
        (entry.job, node)
    }

    fn insert(&mut self, key: String, pod: Arc<Pod>) -> (Option<String>, Option<String>) {
        let job = labelled_job(&pod);
        // A pod released to the scheduler takes its room on the node it is pinned to
        // from then on, bound or not yet, as a nominated pod does for kube-scheduler.
        let charge = placed_node(&pod)
            .filter(|_| holds_resources(&pod))
            .map(|node| (node.to_string(), pod_requests(&pod)));
        if let Some((node, requests)) = &charge {
            let sum = self.per_node.entry(node.clone()).or_default();
            *sum = sum.plus(requests);
        }
        if let Some(job) = &job {
            self.by_job
                .entry(job.clone())
                .or_default()
                .insert(pod.name_any(), pod.clone());
        }
        let node = placed_node(&pod).map(str::to_string);
        self.by_pod.insert(
            key,
            Entry {
                job: job.clone(),
                charge,
            },
        );
        (job, node)
    }
}

impl PodIndex {
    /// An index over `store` (read in full at the first lookup), marking in `changes`.
    pub fn new(store: Store<Pod>, changes: Changes) -> Self {
        PodIndex {
            store,
            changes,
            inner: Arc::new(RwLock::new(Inner {
                stale: true,
                ..Inner::default()
            })),
        }
    }

    /// The cache this index groups.
    pub fn store(&self) -> &Store<Pod> {
        &self.store
    }

    /// Takes in a watch event, after the cache applied it.
    pub fn apply(&self, event: &watcher::Event<Pod>) {
        match event {
            watcher::Event::Apply(pod) | watcher::Event::Delete(pod) => {
                let mut inner = self.inner.write().expect("pod index lock");
                if inner.stale {
                    // Rebuilt from the cache, this event included, at the next read.
                    drop(inner);
                    if let Some(job) = labelled_job(pod) {
                        self.changes.job(&job);
                    }
                    if let Some(node) = placed_node(pod) {
                        self.changes.node(node);
                    }
                    return;
                }
                let key = pod_key(pod);
                let name = pod.name_any();
                let (old_job, old_node) = inner.remove(&key, &name);
                let (new_job, new_node) = match event {
                    watcher::Event::Apply(_) => {
                        let kept = self
                            .store
                            .get(&ObjectRef::from_obj(pod))
                            .unwrap_or_else(|| Arc::new(pod.clone()));
                        inner.insert(key, kept)
                    }
                    _ => (None, None),
                };
                drop(inner);
                for job in [old_job, new_job].iter().flatten() {
                    self.changes.job(job);
                }
                for node in [old_node, new_node].iter().flatten() {
                    self.changes.node(node);
                }
            }
            watcher::Event::InitDone => {
                self.inner.write().expect("pod index lock").stale = true;
                self.changes.everything();
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        {
            let mut inner = self.inner.write().expect("pod index lock");
            if inner.stale {
                let mut fresh = Inner::default();
                for pod in self.store.state() {
                    fresh.insert(pod_key(&pod), pod);
                }
                *inner = fresh;
            }
        }
        self.inner.read().expect("pod index lock")
    }

    /// The pods labelled with `job`'s name in its namespace, whoever owns them, by name.
    pub fn labelled(&self, job: &TrainingJob) -> Vec<Arc<Pod>> {
        let id = job_id(job);
        self.labelled_id(&id)
    }

    /// The pods labelled with job `id` (`namespace/name`), by name.
    pub fn labelled_id(&self, id: &str) -> Vec<Arc<Pod>> {
        self.read()
            .by_job
            .get(id)
            .map(|pods| pods.values().cloned().collect())
            .unwrap_or_default()
    }

    /// What the pods placed on `node` (bound, or released to it) that still hold resources
    /// request.
    pub fn requested_on(&self, node: &str) -> Resources {
        self.read().per_node.get(node).copied().unwrap_or_default()
    }

    /// How many pods the index holds.
    pub fn len(&self) -> usize {
        self.read().by_pod.len()
    }

    /// Whether the index holds no pod.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
