//! What the snapshot is made of, kept between rounds: each pod's requests, each node's
//! and each job's view as the policy sees it, and the eligibility sets. A view is
//! rebuilt only when what it is made of changed (an object's resourceVersion, a node's
//! requested resources, a new usage reading, a job's loss series), as the simulator
//! keeps its views; otherwise the last round's `Arc` is handed out again, so a round on
//! a large cluster costs what changed, and the control loop's delta sees the same
//! pointer and skips the comparison. An object without a resourceVersion (only
//! hand-made ones in tests have none) is never taken from the cache.
//!
//! It owns no cluster state of its own: everything here can be rebuilt from the
//! caches, and it is, entry by entry, when it is out of date.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use switchyard_core::eligibility::{EligibilitySets, PlacementRules};
use switchyard_core::model::{self, Resources};

use crate::rules::RuledKubeNode;

/// Views kept from one round to the next.
#[derive(Default)]
pub struct Views {
    /// Which round this is, to drop entries not seen in it.
    round: u64,
    /// Pod UID to (resourceVersion, requests, round last seen).
    pod_requests: HashMap<String, (String, Resources, u64)>,
    nodes: HashMap<String, NodeView>,
    /// Each node's labels and taints, in snapshot order, for new eligibility sets.
    ruled: Vec<RuledKubeNode>,
    /// The node list (names and versions, in order) the sets were computed for.
    ruled_for: Vec<(String, Option<String>)>,
    eligibility: EligibilitySets,
    /// How many distinct sets the last round's jobs used.
    sets_in_use: usize,
    jobs: HashMap<String, JobView>,
}

struct NodeView {
    version: Option<String>,
    requested: Resources,
    usage: Option<Resources>,
    node: Arc<model::Node>,
    round: u64,
}

/// What a job's view is made of; the view is rebuilt when any of it differs.
#[derive(Clone, PartialEq)]
pub struct JobKey {
    /// The TrainingJob's resourceVersion.
    pub version: String,
    /// Every pod labelled with the job: (UID, resourceVersion), in cache order.
    pub pods: Vec<(String, String)>,
    /// Each role's eligibility set.
    pub eligible: Vec<Option<u32>>,
    /// Why the job's claims hold it, if they do.
    pub held: Option<crate::volumes::Held>,
    /// The usage reading, by identity (a new reading is a new `Arc`).
    pub usage: Option<usize>,
    /// The version of the loss series the controller keeps for it.
    pub loss: Option<u64>,
}

struct JobView {
    key: JobKey,
    /// Each role's placement rules, for the job's resourceVersion in `key`.
    rules: Vec<(String, Arc<PlacementRules>)>,
    built: Option<(f64, Arc<model::Job>)>,
    round: u64,
}

/// A resourceVersion that can stand for the object's content.
fn version_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<&str> {
    meta.resource_version.as_deref().filter(|v| !v.is_empty())
}

impl Views {
    /// Starts a round.
    pub fn begin(&mut self) {
        self.round += 1;
    }

    /// Drops what the round did not see (pods, nodes and jobs that are gone), so the
    /// views never outgrow the cluster.
    pub fn end(&mut self) {
        let round = self.round;
        self.pod_requests.retain(|_, (_, _, seen)| *seen == round);
        self.nodes.retain(|_, view| view.round == round);
        self.jobs.retain(|_, view| view.round == round);
    }

    /// `pod`'s requests, computed again only when its resourceVersion changed.
    pub fn pod_requests(
        &mut self,
        pod: &Pod,
        compute: impl FnOnce(&Pod) -> Resources,
    ) -> Resources {
        let (Some(uid), Some(version)) = (pod.metadata.uid.as_deref(), version_of(&pod.metadata))
        else {
            return compute(pod);
        };
        let round = self.round;
        if let Some((kept, requests, seen)) = self.pod_requests.get_mut(uid)
            && kept == version
        {
            *seen = round;
            return *requests;
        }
        let requests = compute(pod);
        self.pod_requests
            .insert(uid.to_string(), (version.to_string(), requests, round));
        requests
    }

    /// The node's view with `requested` and `usage`; `build` makes it afresh when the
    /// node, its requested resources or its usage changed.
    pub fn node(
        &mut self,
        node: &KubeNode,
        name: &str,
        requested: Resources,
        usage: Option<Resources>,
        build: impl FnOnce() -> model::Node,
    ) -> Arc<model::Node> {
        let version = version_of(&node.metadata);
        let round = self.round;
        if let Some(view) = self.nodes.get_mut(name)
            && version.is_some()
            && view.version.as_deref() == version
            && view.requested == requested
            && view.usage == usage
        {
            view.round = round;
            return Arc::clone(&view.node);
        }
        let built = Arc::new(build());
        self.nodes.insert(
            name.to_string(),
            NodeView {
                version: version.map(str::to_string),
                requested,
                usage,
                node: Arc::clone(&built),
                round,
            },
        );
        built
    }

    /// Brings the eligibility sets in step with `nodes` (in snapshot order): kept while
    /// no node came, went or changed; computed afresh otherwise. Sets of rules nobody
    /// uses any more are dropped at the next change, or once they outnumber twice those
    /// the last round used ([`Views::sets_used`]).
    pub fn eligibility_for(&mut self, nodes: &[Arc<KubeNode>]) {
        let in_use = self.sets_in_use;
        let same = self.ruled_for.len() == nodes.len()
            && self
                .ruled_for
                .iter()
                .zip(nodes)
                .all(|((name, version), node)| {
                    node.metadata.name.as_deref() == Some(name.as_str())
                        && version.is_some()
                        && version.as_deref() == version_of(&node.metadata)
                });
        if !same {
            self.ruled = nodes.iter().map(|n| RuledKubeNode::of(n)).collect();
            self.ruled_for = nodes
                .iter()
                .map(|n| {
                    (
                        n.metadata.name.clone().unwrap_or_default(),
                        version_of(&n.metadata).map(str::to_string),
                    )
                })
                .collect();
            self.eligibility.reset();
        } else if self.eligibility.sets().len() > 2 * in_use + 16 {
            self.eligibility.reset();
        }
    }

    /// Notes how many distinct sets this round's jobs used.
    pub fn sets_used(&mut self, n: usize) {
        self.sets_in_use = n;
    }

    /// The eligibility set of `rules` over the nodes of [`Views::eligibility_for`].
    pub fn eligible(&mut self, rules: &Arc<PlacementRules>) -> Option<u32> {
        self.eligibility.id_for(rules, &self.ruled)
    }

    /// The eligibility sets handed to the policy (the same `Arc` while none is added).
    pub fn node_sets(&self) -> Arc<Vec<model::NodeSet>> {
        Arc::clone(self.eligibility.sets())
    }

    /// Job `id`'s role rules, kept while its resourceVersion is `version`.
    pub fn job_rules(
        &mut self,
        id: &str,
        version: Option<&str>,
        compute: impl FnOnce() -> Vec<(String, Arc<PlacementRules>)>,
    ) -> Vec<(String, Arc<PlacementRules>)> {
        match (self.jobs.get(id), version) {
            (Some(view), Some(version)) if view.key.version == version => view.rules.clone(),
            _ => compute(),
        }
    }

    /// Job `id`'s view for `key`: the kept one when the key is the same (and it has a
    /// resourceVersion), else `build`'s, kept for the next round.
    pub fn job(
        &mut self,
        id: &str,
        key: JobKey,
        rules: Vec<(String, Arc<PlacementRules>)>,
        build: impl FnOnce() -> Option<(f64, model::Job)>,
    ) -> Option<(f64, Arc<model::Job>)> {
        let round = self.round;
        if let Some(view) = self.jobs.get_mut(id)
            && !key.version.is_empty()
            && view.key == key
        {
            view.round = round;
            return view.built.clone();
        }
        let built = build().map(|(submit, job)| (submit, Arc::new(job)));
        self.jobs.insert(
            id.to_string(),
            JobView {
                key,
                rules,
                built: built.clone(),
                round,
            },
        );
        built
    }

    /// How many entries are kept (pods, nodes, jobs), for tests of the bound.
    pub fn kept(&self) -> (usize, usize, usize) {
        (self.pod_requests.len(), self.nodes.len(), self.jobs.len())
    }
}
