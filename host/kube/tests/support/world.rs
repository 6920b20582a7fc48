//! A cluster described by hand: reflector caches filled through the writers a reflector
//! would feed them with, and a clock the test sets, so each step sees exactly the
//! cluster the test describes.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::{Value, json};
use switchyard_control::Leader;
use switchyard_kube::cluster::KubeCluster;
use switchyard_kube::crd::TrainingJob;
use switchyard_kube::observe::Caches;

use super::fixtures::{JobBuilder, NS, actor, at, event_json};
use super::mock::Expect;

/// The caches, and the writers a reflector would feed them through.
pub struct World {
    /// The caches the cluster reads.
    pub caches: Caches,
    nodes: Writer<Node>,
    pods: Writer<Pod>,
    jobs: Writer<TrainingJob>,
    clock: Arc<Mutex<f64>>,
    /// The resourceVersion the next object gets, as an API server gives every write one:
    /// the snapshot keeps views until it changes.
    versions: u64,
}

impl World {
    /// A cluster whose reflectors have all listed (their caches are synced).
    pub fn new() -> Self {
        let mut world = Self::unsynced();
        world.nodes.apply_watcher_event(&watcher::Event::InitDone);
        world.pods.apply_watcher_event(&watcher::Event::InitDone);
        world.jobs.apply_watcher_event(&watcher::Event::InitDone);
        world
    }

    /// A cluster whose node and job reflectors have listed while the pod reflector's
    /// first list has not come back yet: its cache is empty, whatever runs.
    pub fn pods_unlisted() -> Self {
        let mut world = Self::unsynced();
        world.nodes.apply_watcher_event(&watcher::Event::InitDone);
        world.jobs.apply_watcher_event(&watcher::Event::InitDone);
        world
    }

    /// The pod reflector's first list comes back with `pods`.
    pub fn pods_listed(&mut self, pods: Vec<Pod>) {
        self.pods.apply_watcher_event(&watcher::Event::Init);
        for mut p in pods {
            p.metadata.resource_version = Some(self.next_version());
            self.pods.apply_watcher_event(&watcher::Event::InitApply(p));
        }
        self.pods.apply_watcher_event(&watcher::Event::InitDone);
        self.caches.changed.notify_one();
    }

    fn unsynced() -> Self {
        let (nodes_store, nodes) = reflector::store();
        let (pods_store, pods) = reflector::store();
        let (jobs_store, jobs) = reflector::store();
        Self {
            caches: Caches::new(nodes_store, pods_store, jobs_store),
            nodes,
            pods,
            jobs,
            clock: Arc::new(Mutex::new(at(0).as_second() as f64)),
            versions: 1000,
        }
    }

    fn next_version(&mut self) -> String {
        self.versions += 1;
        self.versions.to_string()
    }

    pub fn node(mut self, mut n: Node) -> Self {
        n.metadata.resource_version = Some(self.next_version());
        self.nodes.apply_watcher_event(&watcher::Event::Apply(n));
        self
    }

    pub fn pod(&mut self, mut p: Pod) {
        p.metadata.resource_version = Some(self.next_version());
        self.pods.apply_watcher_event(&watcher::Event::Apply(p));
        self.caches.changed.notify_one();
    }

    pub fn pod_gone(&mut self, p: Pod) {
        self.pods.apply_watcher_event(&watcher::Event::Delete(p));
        self.caches.changed.notify_one();
    }

    pub fn job(&mut self, j: &JobBuilder) {
        let mut job = j.build();
        job.metadata.resource_version = Some(self.next_version());
        self.jobs.apply_watcher_event(&watcher::Event::Apply(job));
        self.caches.changed.notify_one();
    }

    pub fn set_clock(&self, seconds_after: i64) {
        *self.clock.lock().unwrap() = at(seconds_after).as_second() as f64;
    }

    pub fn cluster(&self, client: kube::Client, leader: Leader) -> KubeCluster {
        let clock = self.clock.clone();
        KubeCluster::new(
            tokio::runtime::Handle::current(),
            client.clone(),
            self.caches.clone(),
            actor(client),
            Arc::new(leader),
        )
        .with_clock(Arc::new(move || *clock.lock().unwrap()))
    }
}

/// Runs `step` on the cluster on a blocking thread, as the controller's decision thread
/// does, and hands the cluster back.
pub async fn blocking<T: Send + 'static>(
    mut cluster: KubeCluster,
    step: impl FnOnce(&mut KubeCluster) -> T + Send + 'static,
) -> (KubeCluster, T) {
    tokio::task::spawn_blocking(move || {
        let out = step(&mut cluster);
        (cluster, out)
    })
    .await
    .expect("the cluster step did not panic")
}

pub fn status_of(job: &str) -> String {
    format!("/apis/switchyard.dev/v1alpha1/namespaces/ml/trainingjobs/{job}/status")
}

pub fn status_write_of(job: &str, read: &JobBuilder, wanted: Value) -> [Expect; 2] {
    [
        Expect::get(&status_of(job)).ok(read.json()),
        Expect::put(&status_of(job)).body(wanted).ok(read.json()),
    ]
}

/// A merge patch of `job`'s status that must contain `wanted`; answered with `read`.
pub fn status_patch_of(job: &str, read: &JobBuilder, wanted: Value) -> Expect {
    Expect::patch(&status_of(job)).body(wanted).ok(read.json())
}

pub fn event_on(job: &str, reason: &str, action: &str) -> Expect {
    Expect::post("/apis/events.k8s.io/v1/namespaces/ml/events")
        .body(json!({"reason": reason, "action": action, "type": "Normal",
            "regarding": {"kind": "TrainingJob", "name": job, "namespace": NS}}))
        .respond(201, event_json())
}
