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

use crate::pods::{holds_resources, node_of, pod_requests};
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
            }
            watcher::Event::InitApply(pod) => {
                if let (Some(listing), Some(charge)) = (inner.listing.as_mut(), charge_of(pod)) {
                    listing.insert(key_of(pod), charge);
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
                    inner.changed.clear();
                    inner.looked = false;
                }
                self.listed.store(true, Ordering::SeqCst);
            }
            watcher::Event::Apply(pod) => match charge_of(pod) {
                Some(charge) => inner.charge(key_of(pod), charge),
                None => inner.discharge(&key_of(pod)),
            },
            watcher::Event::Delete(pod) => inner.discharge(&key_of(pod)),
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

    fn pod(uid: &str, node: &str, phase: &str) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": uid, "namespace": "kube-system", "uid": uid},
            "spec": {"nodeName": node, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": "500m"}}}]},
            "status": {"phase": phase}}),
        )
        .unwrap()
    }

    #[test]
    fn another_scheduler_s_pod_is_charged_to_its_node_while_it_holds_it() {
        let charges = Charges::default();
        charges.apply(&watcher::Event::Init);
        charges.apply(&watcher::Event::InitApply(pod("dns", "n1", "Running")));
        charges.apply(&watcher::Event::InitApply(pod("web", "n1", "Running")));
        charges.apply(&watcher::Event::InitDone);
        assert_eq!(charges.on_node("n1").cpu_millis, 1000);
        assert!(charges.take_changed().is_none(), "every node after a list");
        charges.apply(&watcher::Event::Apply(pod("dns", "n1", "Succeeded")));
        assert_eq!(
            charges.on_node("n1").cpu_millis,
            500,
            "a finished pod frees its room"
        );
        let changed = charges.take_changed().expect("looked since the list");
        assert!(changed.contains("n1"));
    }
}
