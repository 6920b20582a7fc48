//! A cluster described by hand: reflector caches filled through the writers a reflector
//! would feed them with, and a clock the test sets, so each step sees exactly the
//! cluster the test describes.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::{Value, json};
use switchyard_control::Leader;
use switchyard_kube::Caches;
use switchyard_kube::KubeCluster;
use switchyard_kube::TrainingJob;
use switchyard_kube::VolumeCaches;

use super::fixtures::{JobBuilder, NS, actor, at, event_json};
use super::mock::Expect;

/// The caches, and the writers a reflector would feed them through.
pub struct World {
    /// The caches the cluster reads.
    pub caches: Caches,
    nodes: Writer<Node>,
    pods: Writer<Pod>,
    jobs: Writer<TrainingJob>,
    claims: Writer<PersistentVolumeClaim>,
    volumes: Writer<PersistentVolume>,
    classes: Writer<StorageClass>,
    clock: Arc<Mutex<f64>>,
    /// The resourceVersion the next object gets, as an API server gives every write one:
    /// the snapshot keeps views until it changes.
    versions: u64,
}

impl World {
    /// A cluster whose reflectors have all listed (their caches are synced).
    pub fn new() -> Self {
        let mut world = Self::unsynced();
        world.on_nodes(&watcher::Event::InitDone);
        world.on_pods(&watcher::Event::InitDone);
        world.on_jobs(&watcher::Event::InitDone);
        world
    }

    /// A storage class named `name` with `volumeBindingMode: mode`.
    pub fn class(mut self, name: &str, mode: &str) -> Self {
        let class: StorageClass = serde_json::from_value(json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "resourceVersion": self.next_version()},
            "provisioner": "pd.csi.storage.gke.io", "volumeBindingMode": mode}))
        .unwrap();
        self.classes
            .apply_watcher_event(&watcher::Event::Apply(class));
        self
    }

    /// A `WaitForFirstConsumer` class `name` without a provisioner (kube's
    /// `kubernetes.io/no-provisioner`: only pre-provisioned volumes bind its claims).
    pub fn local_class(mut self, name: &str) -> Self {
        let class: StorageClass = serde_json::from_value(json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "resourceVersion": self.next_version()},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"}))
        .unwrap();
        self.classes
            .apply_watcher_event(&watcher::Event::Apply(class));
        self
    }

    /// An `Available` pre-provisioned volume `name` of class `class` and `size` on node
    /// `host` (a local volume), promised to claim `promised` if given.
    pub fn local_volume(
        mut self,
        name: &str,
        (class, size): (&str, &str),
        host: &str,
        promised: Option<&str>,
    ) -> Self {
        let mut volume = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "resourceVersion": self.next_version()},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": class, "local": {"path": "/mnt/disks/ssd0"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}},
            "status": {"phase": "Available"}});
        if let Some(claim) = promised {
            volume["spec"]["claimRef"] = json!({"namespace": NS, "name": claim});
        }
        let volume: PersistentVolume = serde_json::from_value(volume).unwrap();
        self.volumes
            .apply_watcher_event(&watcher::Event::Apply(volume));
        self.caches.changed.notify_one();
        self
    }

    /// A volume named `name` that only nodes labelled `zone` can mount.
    pub fn zonal_volume(mut self, name: &str, zone: &str) -> Self {
        let volume: PersistentVolume = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "resourceVersion": self.next_version()},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": name},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}},
            "status": {"phase": "Bound"}}))
        .unwrap();
        self.volumes
            .apply_watcher_event(&watcher::Event::Apply(volume));
        self
    }

    /// Claim `name` in the fixtures' namespace, as `value` describes it (its
    /// `spec`, `status`, `metadata.annotations`), or its new state.
    pub fn claim(&mut self, name: &str, value: Value) {
        let mut claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NS, "resourceVersion": self.next_version()}});
        for (key, part) in value.as_object().expect("an object") {
            match key.as_str() {
                "annotations" => claim["metadata"]["annotations"] = part.clone(),
                _ => claim[key] = part.clone(),
            }
        }
        let claim: PersistentVolumeClaim = serde_json::from_value(claim).unwrap();
        self.claims
            .apply_watcher_event(&watcher::Event::Apply(claim));
        self.caches.changed.notify_one();
    }

    /// A cluster whose node and job reflectors have listed while the pod reflector's
    /// first list has not come back yet: its cache is empty, whatever runs.
    pub fn pods_unlisted() -> Self {
        let mut world = Self::unsynced();
        world.on_nodes(&watcher::Event::InitDone);
        world.on_jobs(&watcher::Event::InitDone);
        world
    }

    /// The pod reflector's first list comes back with `pods`.
    pub fn pods_listed(&mut self, pods: Vec<Pod>) {
        self.on_pods(&watcher::Event::Init);
        for mut p in pods {
            p.metadata.resource_version = Some(self.next_version());
            self.on_pods(&watcher::Event::InitApply(p));
        }
        self.on_pods(&watcher::Event::InitDone);
        self.caches.changed.notify_one();
    }

    /// The job reflector lists again (its watch was restarted) and finds `jobs`: those
    /// it does not list are gone, which only their absence says.
    pub fn jobs_listed(&mut self, jobs: &[&JobBuilder]) {
        self.on_jobs(&watcher::Event::Init);
        for j in jobs {
            let mut job = j.build();
            job.metadata.resource_version = Some(self.next_version());
            self.on_jobs(&watcher::Event::InitApply(job));
        }
        self.on_jobs(&watcher::Event::InitDone);
        self.caches.changed.notify_one();
    }

    /// The node reflector lists again and finds `nodes`.
    pub fn nodes_listed(&mut self, nodes: Vec<Node>) {
        self.on_nodes(&watcher::Event::Init);
        for mut n in nodes {
            n.metadata.resource_version = Some(self.next_version());
            self.on_nodes(&watcher::Event::InitApply(n));
        }
        self.on_nodes(&watcher::Event::InitDone);
        self.caches.changed.notify_one();
    }

    fn unsynced() -> Self {
        let (nodes_store, nodes) = reflector::store();
        let (pods_store, pods) = reflector::store();
        let (jobs_store, jobs) = reflector::store();
        let (claims_store, mut claims) = reflector::store();
        let (volumes_store, mut volumes) = reflector::store();
        let (classes_store, mut classes) = reflector::store();
        claims.apply_watcher_event(&watcher::Event::InitDone);
        volumes.apply_watcher_event(&watcher::Event::InitDone);
        classes.apply_watcher_event(&watcher::Event::InitDone);
        Self {
            caches: Caches::new(nodes_store, pods_store, jobs_store).with_volumes(VolumeCaches {
                claims: claims_store,
                volumes: volumes_store,
                classes: classes_store,
            }),
            nodes,
            pods,
            jobs,
            claims,
            volumes,
            classes,
            clock: Arc::new(Mutex::new(at(0).as_second() as f64)),
            versions: 1000,
        }
    }

    /// Applies `event` to the node cache, and notes it as the node reflector does.
    fn on_nodes(&mut self, event: &watcher::Event<Node>) {
        self.nodes.apply_watcher_event(event);
        self.caches.node_event(event);
    }

    /// Applies `event` to the pod cache, and notes it as the pod reflector does.
    pub fn on_pods(&mut self, event: &watcher::Event<Pod>) {
        self.pods.apply_watcher_event(event);
        self.caches.pod_event(event);
    }

    /// Applies `event` to the job cache, and notes it as the job reflector does.
    fn on_jobs(&mut self, event: &watcher::Event<TrainingJob>) {
        self.jobs.apply_watcher_event(event);
        self.caches.job_event(event);
    }

    fn next_version(&mut self) -> String {
        self.versions += 1;
        self.versions.to_string()
    }

    pub fn node(mut self, mut n: Node) -> Self {
        n.metadata.resource_version = Some(self.next_version());
        self.on_nodes(&watcher::Event::Apply(n));
        self
    }

    pub fn pod(&mut self, mut p: Pod) {
        p.metadata.resource_version = Some(self.next_version());
        self.on_pods(&watcher::Event::Apply(p));
        self.caches.changed.notify_one();
    }

    pub fn pod_gone(&mut self, p: Pod) {
        self.on_pods(&watcher::Event::Delete(p));
        self.caches.changed.notify_one();
    }

    pub fn job(&mut self, j: &JobBuilder) {
        let mut job = j.build();
        job.metadata.resource_version = Some(self.next_version());
        self.on_jobs(&watcher::Event::Apply(job));
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

/// The first placement of `job`'s `task` (of `role`, generation 0) on `node`: its
/// Service, the pod created and bound, the placement in the status, the Event.
pub fn first_placement(job: &JobBuilder, task: &str, role: &str, node: &str) -> Vec<Expect> {
    let name = job.build().metadata.name.unwrap_or_default();
    let pod = format!("{name}-{task}-0");
    let mut script = vec![
        super::fixtures::service(&name),
        super::fixtures::budget(&name),
        super::fixtures::create(&pod, &name, task, role),
        super::fixtures::release(&pod, node),
    ];
    script.extend(status_write_of(
        &name,
        job,
        json!({"status": {"placements": [{"task": task, "node": node}]}}),
    ));
    script.push(event_on(&name, "Placed", "Place"));
    script
}

pub fn event_on(job: &str, reason: &str, action: &str) -> Expect {
    Expect::post("/apis/events.k8s.io/v1/namespaces/ml/events")
        .body(json!({"reason": reason, "action": action, "type": "Normal",
            "regarding": {"kind": "TrainingJob", "name": job, "namespace": NS}}))
        .respond(201, event_json())
}
