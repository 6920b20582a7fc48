//! What changed in the caches since each reader last looked, recorded as the watch events
//! arrive, so that a round visits what changed instead of every object of a large
//! cluster. Two readers drain it independently: the leader's pass between rounds and the
//! snapshot, each with its own dirty set.
//!
//! A watch event on a TrainingJob marks its id; one on a node marks its name; one on a
//! controller's pod marks its job (by the job label) and its node, before and after the
//! event ([`crate::pod_index`]). A relist (the first list, or a watcher restarting after
//! the API server dropped it: `Init` .. `InitDone`) reveals deletions only by absence,
//! so it marks everything: the next look of each reader is a whole pass over the caches,
//! which drops what is gone. A new [`Changes`] starts that way too, since its caches
//! may have been filled before it.
//!
//! It records; it must not read the cluster or decide anything.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::runtime::watcher;

use crate::crd::TrainingJob;
use crate::pods::job_id;

/// Who reads the changes; each has its own dirty set.
#[derive(Clone, Copy, Debug)]
pub enum Reader {
    /// The leader's pass between rounds ([`crate::cluster`]).
    Pass,
    /// The snapshot handed to the policy ([`crate::observe::Caches::snapshot`]).
    Snapshot,
}

/// What changed since a reader's last look.
#[derive(Debug, Default)]
pub struct Dirty {
    /// Everything may have changed (a relist, or the first look): visit every object.
    pub all: bool,
    /// TrainingJobs (by id, `namespace/name`) whose object or pods changed.
    pub jobs: HashSet<String>,
    /// Nodes whose object changed, or on which a controller's pod changed.
    pub nodes: HashSet<String>,
}

impl Dirty {
    fn everything() -> Self {
        Dirty {
            all: true,
            ..Dirty::default()
        }
    }
}

/// The dirty sets of both readers, marked by the watch events.
#[derive(Clone, Debug)]
pub struct Changes {
    readers: Arc<Mutex<[Dirty; 2]>>,
}

impl Default for Changes {
    fn default() -> Self {
        Changes {
            readers: Arc::new(Mutex::new([Dirty::everything(), Dirty::everything()])),
        }
    }
}

impl Changes {
    fn mark(&self, each: impl Fn(&mut Dirty)) {
        let mut readers = self.readers.lock().expect("changes lock");
        readers.iter_mut().for_each(each);
    }

    /// Marks job `id` (`namespace/name`) changed.
    pub fn job(&self, id: &str) {
        self.mark(|d| {
            if !d.all && !d.jobs.contains(id) {
                d.jobs.insert(id.to_string());
            }
        });
    }

    /// Marks node `name` changed.
    pub fn node(&self, name: &str) {
        self.mark(|d| {
            if !d.all && !d.nodes.contains(name) {
                d.nodes.insert(name.to_string());
            }
        });
    }

    /// Marks everything changed (a relist).
    pub fn everything(&self) {
        self.mark(|d| *d = Dirty::everything());
    }

    /// What changed since `reader` last looked; its dirty set starts empty again.
    pub fn take(&self, reader: Reader) -> Dirty {
        let mut readers = self.readers.lock().expect("changes lock");
        std::mem::take(&mut readers[reader as usize])
    }

    /// Notes a watch event on the nodes, after the node store applied it.
    pub fn node_event(&self, event: &watcher::Event<KubeNode>) {
        match event {
            watcher::Event::Apply(node) | watcher::Event::Delete(node) => {
                self.node(node.metadata.name.as_deref().unwrap_or_default())
            }
            watcher::Event::InitDone => self.everything(),
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }

    /// Notes a watch event on the TrainingJobs, after the job store applied it.
    pub fn job_event(&self, event: &watcher::Event<TrainingJob>) {
        match event {
            watcher::Event::Apply(job) | watcher::Event::Delete(job) => self.job(&job_id(job)),
            watcher::Event::InitDone => self.everything(),
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> KubeNode {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap()
    }

    #[test]
    fn each_reader_sees_a_change_once_and_a_relist_marks_everything() {
        let changes = Changes::default();
        assert!(changes.take(Reader::Pass).all, "a new feed starts dirty");
        assert!(changes.take(Reader::Snapshot).all);
        changes.node_event(&watcher::Event::Apply(node("n1")));
        changes.job("ml/a");
        let pass = changes.take(Reader::Pass);
        assert!(!pass.all);
        assert_eq!(pass.nodes, HashSet::from(["n1".to_string()]));
        assert_eq!(pass.jobs, HashSet::from(["ml/a".to_string()]));
        assert!(changes.take(Reader::Pass).nodes.is_empty(), "drained");
        assert_eq!(changes.take(Reader::Snapshot).nodes.len(), 1, "its own set");
        changes.node_event(&watcher::Event::Init);
        changes.node_event(&watcher::Event::InitApply(node("n2")));
        assert!(
            !changes.take(Reader::Pass).all,
            "not before the list is complete"
        );
        changes.node_event(&watcher::Event::InitDone);
        assert!(changes.take(Reader::Pass).all);
        assert!(changes.take(Reader::Snapshot).all);
    }
}
