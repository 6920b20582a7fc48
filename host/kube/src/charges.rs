//! Other schedulers' pods, kept as what each takes from its node and nothing else. A
//! node's `requested` must count every pod bound to it, whoever scheduled it, but of
//! those pods nothing else is read; in a large cluster they are most of the pods, and a
//! typed `Pod` costs kilobytes even trimmed. So they are not a reflector's store but a
//! map from pod to (node, requests), filled by a watch on the pods that are bound and
//! have not finished (kube-scheduler's assigned-pods selector), with the reflector's
//! semantics: the first list replaces the map when it is complete, and the map counts
//! as listed from then on. The nodes whose sum changed are kept until the snapshot takes
//! them ([`Charges::take_changed`]), so that a round looks at those nodes only; a relist
//! changes them all. It reads; it must not write to the cluster.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;

use crate::act::node_of;
use crate::observe::{holds_resources, pod_requests};
use crate::spread::{HostPort, host_ports};
use switchyard_core::Resources;

/// What other schedulers' pods take from their nodes.
#[derive(Clone, Debug, Default)]
pub struct Charges {
    inner: Arc<RwLock<Inner>>,
    listed: Arc<AtomicBool>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Pod UID (else `namespace/name`) to its node and requests.
    by_pod: HashMap<String, (Arc<str>, Resources)>,
    /// The first list (or a re-list) under way, swapped in when it is done.
    listing: Option<HashMap<String, (Arc<str>, Resources)>>,
    /// `by_pod` summed per node, kept in step with every change so that a round reads
    /// it instead of adding up every pod of the cluster again.
    per_node: HashMap<Arc<str>, Resources>,
    /// The host ports of the pods charged that ask for any (few do), with the node.
    ports: HashMap<String, (Arc<str>, Vec<HostPort>)>,
    /// `ports` of the list under way.
    ports_listing: HashMap<String, (Arc<str>, Vec<HostPort>)>,
    /// Nodes whose sum changed since the snapshot last looked.
    changed: HashSet<Arc<str>>,
    /// Whether the snapshot looked since the last (re)list; until it does, every node
    /// counts as changed.
    looked: bool,
}

impl Inner {
    fn charge(&mut self, key: String, charge: (Arc<str>, Resources)) {
        self.discharge(&key);
        let sum = self.per_node.entry(charge.0.clone()).or_default();
        *sum = sum.plus(&charge.1);
        self.changed.insert(charge.0.clone());
        self.by_pod.insert(key, charge);
    }

    fn discharge(&mut self, key: &str) {
        let Some((node, requests)) = self.by_pod.remove(key) else {
            return;
        };
        if let Some(sum) = self.per_node.get_mut(&node) {
            *sum = sum.saturating_minus(&requests);
            if *sum == Resources::default() {
                self.per_node.remove(&node);
            }
        }
        self.changed.insert(node);
    }
}

impl Charges {
    /// Charges with nothing in them that count as listed (a cluster whose pods are all
    /// in the controller's own cache, as in tests).
    pub fn listed_empty() -> Self {
        let charges = Self::default();
        charges.listed.store(true, Ordering::SeqCst);
        charges
    }

    /// Whether the first list is complete.
    pub fn listed(&self) -> bool {
        self.listed.load(Ordering::SeqCst)
    }

    /// Applies one watch event, as a reflector's writer would.
    pub fn apply(&self, event: &watcher::Event<Pod>) {
        let mut guard = self.inner.write().expect("charges lock");
        let inner = &mut *guard;
        match event {
            watcher::Event::Init => {
                inner.listing = Some(HashMap::new());
                inner.ports_listing.clear();
            }
            watcher::Event::InitApply(pod) => {
                if let (Some(listing), Some(charge)) = (inner.listing.as_mut(), charge_of(pod)) {
                    let key = key_of(pod);
                    if let Some(ports) = ports_of(pod, &charge.0) {
                        inner.ports_listing.insert(key.clone(), ports);
                    }
                    listing.insert(key, charge);
                }
            }
            watcher::Event::InitDone => {
                if let Some(listing) = inner.listing.take() {
                    let mut per_node: HashMap<Arc<str>, Resources> = HashMap::new();
                    for (node, requests) in listing.values() {
                        let sum = per_node.entry(node.clone()).or_default();
                        *sum = sum.plus(requests);
                    }
                    inner.by_pod = listing;
                    inner.per_node = per_node;
                    inner.ports = std::mem::take(&mut inner.ports_listing);
                    inner.changed.clear();
                    inner.looked = false;
                }
                self.listed.store(true, Ordering::SeqCst);
            }
            watcher::Event::Apply(pod) => match charge_of(pod) {
                Some(charge) => {
                    let key = key_of(pod);
                    match ports_of(pod, &charge.0) {
                        Some(ports) => inner.ports.insert(key.clone(), ports),
                        None => inner.ports.remove(&key),
                    };
                    inner.charge(key, charge)
                }
                None => {
                    inner.ports.remove(&key_of(pod));
                    inner.discharge(&key_of(pod))
                }
            },
            watcher::Event::Delete(pod) => {
                inner.ports.remove(&key_of(pod));
                inner.discharge(&key_of(pod))
            }
        }
    }

    /// The requests of the pods charged, per node.
    pub fn per_node(&self) -> HashMap<Arc<str>, Resources> {
        self.inner.read().expect("charges lock").per_node.clone()
    }

    /// The requests of the pods charged to `node`.
    pub fn on_node(&self, node: &str) -> Resources {
        let inner = self.inner.read().expect("charges lock");
        inner.per_node.get(node).copied().unwrap_or_default()
    }

    /// The nodes whose charges changed since the last call; `None` when every node may
    /// have (the first call, or a relist since the last).
    pub fn take_changed(&self) -> Option<HashSet<Arc<str>>> {
        let mut inner = self.inner.write().expect("charges lock");
        let changed = std::mem::take(&mut inner.changed);
        let looked = std::mem::replace(&mut inner.looked, true);
        looked.then_some(changed)
    }

    /// The host ports the pods charged use, with their nodes.
    pub fn host_ports(&self) -> Vec<(Arc<str>, HostPort)> {
        let inner = self.inner.read().expect("charges lock");
        inner
            .ports
            .values()
            .flat_map(|(node, ports)| ports.iter().map(|p| (node.clone(), p.clone())))
            .collect()
    }

    /// How many pods are charged.
    pub fn len(&self) -> usize {
        self.inner.read().expect("charges lock").by_pod.len()
    }

    /// Whether no pod is charged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn key_of(pod: &Pod) -> String {
    pod.metadata
        .uid
        .clone()
        .unwrap_or_else(|| format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()))
}

fn ports_of(pod: &Pod, node: &Arc<str>) -> Option<(Arc<str>, Vec<HostPort>)> {
    let ports = host_ports(pod.spec.as_ref()?);
    (!ports.is_empty()).then(|| (node.clone(), ports))
}

fn charge_of(pod: &Pod) -> Option<(Arc<str>, Resources)> {
    let node = node_of(pod)?;
    holds_resources(pod).then(|| (Arc::from(node), pod_requests(pod)))
}

/// Starts filling `charges` from a watch on `api` with `config` (to be spawned); each
/// event also signals `changed`.
pub fn watch(
    api: Api<Pod>,
    config: watcher::Config,
    charges: Charges,
    changed: Arc<Notify>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let stream = watcher(api, config).default_backoff();
    async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    charges.apply(&event);
                    changed.notify_one();
                }
                // The watcher retries on its own with back-off; the error is only news.
                Err(error) => tracing::warn!(%error, "watch failed; retrying with back-off"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, host_port: Option<u16>, phase: &str) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": uid, "namespace": "kube-system", "uid": uid},
            "spec": {"nodeName": "n1", "containers": [{"name": "c",
                "ports": host_port.map(|p| vec![json!({"containerPort": p, "hostPort": p})])}]},
            "status": {"phase": phase}}),
        )
        .unwrap()
    }

    #[test]
    fn another_scheduler_s_host_ports_are_kept_while_its_pod_holds_its_node() {
        let charges = Charges::default();
        charges.apply(&watcher::Event::Init);
        charges.apply(&watcher::Event::InitApply(pod("dns", Some(53), "Running")));
        charges.apply(&watcher::Event::InitApply(pod("web", None, "Running")));
        charges.apply(&watcher::Event::InitDone);
        let ports = charges.host_ports();
        assert_eq!(ports.len(), 1);
        assert_eq!((&*ports[0].0, ports[0].1.port), ("n1", 53));
        charges.apply(&watcher::Event::Apply(pod("dns", Some(53), "Succeeded")));
        assert!(
            charges.host_ports().is_empty(),
            "a finished pod frees its port"
        );
    }
}
