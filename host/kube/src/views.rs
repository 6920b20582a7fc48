//! What the snapshot is made of, kept between rounds: each node's and each job's view as
//! the policy sees it, the node list in snapshot order, the jobs in snapshot order, and
//! the eligibility sets. A round visits only what changed ([`crate::changes`]): a view
//! is rebuilt only when what it is made of changed (an object's resourceVersion, a
//! node's requested resources, a new usage reading, a job's pods or loss series), as the
//! simulator keeps its views; otherwise the last round's `Arc` is handed out again, so a
//! round on a large cluster costs what changed, and the control loop's delta sees the
//! same pointer and skips the comparison. An object without a resourceVersion (only
//! hand-made ones in tests have none) is never taken from the cache.
//!
//! Some jobs depend on more than their own object and pods, and are visited every round
//! while they do ([`Views::watched`]): a job mounting claims (the claims and volumes
//! change apart from it), and a job with a restart under way (what it reserves on its
//! target nodes).
//!
//! The adopted jobs' views are kept likewise, apart ([`adopted`]).
//!
//! It owns no cluster state of its own: everything here can be rebuilt from the
//! caches, and it is, entry by entry, when it is out of date.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::runtime::reflector::{ObjectRef, Store};
use switchyard_core::{EligibilitySets, PlacementRules, Resources, RuledNode};
// The core types are named `model::X` here, apart from the Kubernetes types of the same names.
use switchyard_core as model;

use crate::rules::RuledKubeNode;

pub(crate) mod adopted;

use self::adopted::AdoptedViews;

/// Views kept from one round to the next.
#[derive(Default)]
pub struct Views {
    /// Which round this is, to drop entries a whole pass did not see.
    round: u64,
    /// Node names in snapshot order (by name).
    node_names: Vec<String>,
    /// Where each node is in `node_names`.
    node_positions: HashMap<String, usize>,
    /// The views handed out, in `node_names` order.
    node_list: Vec<Arc<model::Node>>,
    nodes: HashMap<String, NodeView>,
    /// Each node's labels and taints, in `node_names` order, for new eligibility sets.
    ruled: Vec<RuledKubeNode>,
    eligibility: EligibilitySets,
    /// How many distinct sets the jobs' views use.
    sets_in_use: usize,
    /// Whether a job's view was built or dropped this round (so `sets_in_use` is
    /// counted again).
    jobs_changed: bool,
    /// The identity of the last usage reading; `None` before the first round.
    usage: Option<Option<usize>>,
    jobs: HashMap<String, JobView>,
    /// The jobs handed out, in snapshot order (submitted, then id).
    job_list: BTreeMap<JobOrder, Arc<model::Job>>,
    /// Jobs visited every round (see the module docs).
    watched: HashSet<String>,
    /// Jobs with a restart under way.
    restarting: HashSet<String>,
    /// Nodes that carried reservations or assumed pods last round.
    charged_apart: HashSet<String>,
    /// How many times the eligibility sets were computed afresh: a set id is valid
    /// within one epoch.
    sets_epoch: u64,
    /// The adopted jobs' views.
    pub(crate) adopted: AdoptedViews,
}

struct NodeView {
    version: Option<String>,
    requested: Resources,
    usage: Option<Resources>,
    node: Arc<model::Node>,
}

/// What a job's view is made of; the view is rebuilt when any of it differs.
#[derive(Clone, PartialEq)]
pub struct JobKey {
    /// The TrainingJob's resourceVersion.
    pub version: String,
    /// Every pod labelled with the job: (UID, resourceVersion), by name.
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

impl JobKey {
    /// The same job, pods, sets, hold and usage reading, and another loss version: the
    /// view differs from the kept one in its loss series alone.
    fn differs_in_loss_alone(&self, other: &JobKey) -> bool {
        let JobKey {
            version,
            pods,
            eligible,
            held,
            usage,
            loss,
        } = self;
        *loss != other.loss
            && *version == other.version
            && *usage == other.usage
            && *eligible == other.eligible
            && *held == other.held
            && *pods == other.pods
    }
}

/// What else a visit found out about a job, for [`Views::watched`].
#[derive(Clone, Copy, Default)]
pub struct JobTraits {
    /// It mounts PersistentVolumeClaims.
    pub mounts_claims: bool,
    /// A restart is under way.
    pub restarting: bool,
}

struct JobView {
    key: JobKey,
    /// Each role's placement rules, for the job's resourceVersion in `key`.
    rules: Vec<(String, Arc<PlacementRules>)>,
    built: Option<(f64, Arc<model::Job>)>,
    round: u64,
}

/// A job's place in the snapshot: by submission time, then by id.
#[derive(Clone, Debug)]
struct JobOrder(f64, String);

impl PartialEq for JobOrder {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}
impl Eq for JobOrder {}
impl PartialOrd for JobOrder {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for JobOrder {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| self.1.cmp(&other.1))
    }
}

/// A resourceVersion that can stand for the object's content.
fn version_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<&str> {
    meta.resource_version.as_deref().filter(|v| !v.is_empty())
}

fn same_rules(a: &RuledKubeNode, b: &RuledKubeNode) -> bool {
    a.labels() == b.labels() && a.taints() == b.taints()
}

/// What [`Views::nodes_in_step`] found.
#[derive(Default)]
pub struct NodeStep {
    /// The node list was taken afresh from the cache (nodes came or went, or a relist):
    /// these nodes, in snapshot order, are every node whose view is to be looked at.
    pub listed: Option<Vec<Arc<KubeNode>>>,
    /// The eligibility sets were computed afresh: every job's sets are looked up again.
    pub sets_reset: bool,
}

impl Views {
    /// Starts a round with the usage reading `usage` (by identity); true when it is
    /// not the last round's, so every view that shows usage is looked at.
    pub fn begin(&mut self, usage: Option<usize>) -> bool {
        self.round += 1;
        let changed = self.usage != Some(usage);
        self.usage = Some(usage);
        changed
    }

    /// Brings the node list and the eligibility sets in step with `store`: the whole
    /// list when `all` (a relist), else the nodes in `dirty`. The sets are kept while no
    /// node came, went or changed its labels or taints.
    pub fn nodes_in_step(
        &mut self,
        store: &Store<KubeNode>,
        all: bool,
        dirty: &HashSet<String>,
    ) -> NodeStep {
        let mut list_changed = all || self.round == 1;
        let mut rules_changed = false;
        let mut listed = None;
        if !list_changed {
            for name in dirty {
                let node = store.get(&ObjectRef::new(name));
                match (node, self.node_positions.get(name)) {
                    (Some(node), Some(&at)) => {
                        let ruled = RuledKubeNode::of(&node);
                        if !same_rules(&ruled, &self.ruled[at]) {
                            self.ruled[at] = ruled;
                            rules_changed = true;
                        }
                    }
                    (None, None) => {}
                    _ => {
                        list_changed = true;
                        break;
                    }
                }
            }
        }
        if list_changed {
            let mut nodes = store.state();
            nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            let names: Vec<String> = nodes
                .iter()
                .map(|n| n.metadata.name.clone().unwrap_or_default())
                .collect();
            let ruled: Vec<RuledKubeNode> = nodes.iter().map(|n| RuledKubeNode::of(n)).collect();
            let unchanged = names == self.node_names
                && ruled.iter().zip(&self.ruled).all(|(a, b)| same_rules(a, b));
            rules_changed |= !unchanged;
            self.node_positions = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect();
            self.nodes
                .retain(|name, _| self.node_positions.contains_key(name));
            self.node_names = names;
            self.ruled = ruled;
            self.node_list.clear();
            listed = Some(nodes);
        }
        let mut sets_reset = rules_changed;
        if !sets_reset && self.eligibility.sets().len() > 2 * self.sets_in_use + 16 {
            // Sets of rules nobody uses any more are dropped once they outnumber twice
            // those the last round used.
            sets_reset = true;
        }
        if sets_reset {
            self.eligibility.reset();
            self.sets_epoch += 1;
        }
        NodeStep { listed, sets_reset }
    }

    /// Every node name, in snapshot order.
    pub fn node_names(&self) -> &[String] {
        &self.node_names
    }

    /// Nodes charged apart (reservations, assumed pods) last round; `now` are this
    /// round's. Both are looked at: a charge that went frees its node.
    pub fn charged_apart(&mut self, now: HashSet<String>) -> HashSet<String> {
        let before = std::mem::replace(&mut self.charged_apart, now);
        before.union(&self.charged_apart).cloned().collect()
    }

    /// Node `name`'s view with `requested` and `usage`; `build` makes it afresh when the
    /// node, its requested resources or its usage changed. A node not in the list
    /// ([`Views::nodes_in_step`]) is skipped.
    pub fn node(
        &mut self,
        node: &KubeNode,
        name: &str,
        requested: Resources,
        usage: Option<Resources>,
        build: impl FnOnce() -> model::Node,
    ) {
        let Some(&at) = self.node_positions.get(name) else {
            return;
        };
        let version = version_of(&node.metadata);
        let view = match self.nodes.get(name) {
            Some(view)
                if version.is_some()
                    && view.version.as_deref() == version
                    && view.requested == requested
                    && view.usage == usage =>
            {
                Arc::clone(&view.node)
            }
            _ => {
                let built = Arc::new(build());
                self.nodes.insert(
                    name.to_string(),
                    NodeView {
                        version: version.map(str::to_string),
                        requested,
                        usage,
                        node: Arc::clone(&built),
                    },
                );
                built
            }
        };
        if self.node_list.len() != self.node_names.len() {
            // The list was rebuilt; the caller visits every node in order.
            self.node_list.push(view);
        } else {
            self.node_list[at] = view;
        }
    }

    /// The node views, in snapshot order.
    pub fn node_list(&self) -> Vec<Arc<model::Node>> {
        self.node_list.clone()
    }

    /// Notes how many distinct sets the jobs (TrainingJobs and adopted) use now.
    fn count_sets_used(&mut self) {
        let used: HashSet<Option<u32>> = self
            .jobs
            .values()
            .flat_map(|j| j.key.eligible.iter().copied())
            .chain(self.adopted.sets_used())
            .collect();
        self.sets_in_use = used.len();
    }

    /// The eligibility set of `rules` over the nodes of [`Views::nodes_in_step`].
    pub fn eligible(&mut self, rules: &Arc<PlacementRules>) -> Option<u32> {
        self.eligibility.id_for(rules, &self.ruled)
    }

    /// The adopted jobs' kept views, and the eligibility set of rules over the nodes of
    /// [`Views::nodes_in_step`], borrowed together.
    pub(crate) fn adopted_and_sets(
        &mut self,
    ) -> (
        &mut AdoptedViews,
        impl FnMut(&Arc<PlacementRules>) -> Option<u32> + '_,
    ) {
        let Views {
            adopted,
            eligibility,
            ruled,
            ..
        } = self;
        let ruled: &[RuledKubeNode] = ruled;
        (adopted, move |rules| eligibility.id_for(rules, ruled))
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
    /// resourceVersion), else `build`'s, kept for the next round. `build` is handed the
    /// kept view when only its loss series moved on since (the job's training reported
    /// progress, the commonest change of a busy cluster's round): a view that keeps its
    /// tasks (the same `Arc`) and takes the new series, rather than one rebuilt from the
    /// pods, tells the host's diff by identity that nothing else changed.
    pub fn job(
        &mut self,
        id: &str,
        key: JobKey,
        rules: Vec<(String, Arc<PlacementRules>)>,
        traits: JobTraits,
        build: impl FnOnce(Option<&model::Job>) -> Option<(f64, model::Job)>,
    ) {
        let round = self.round;
        match traits.restarting {
            true if !self.restarting.contains(id) => {
                self.restarting.insert(id.to_string());
            }
            false if self.restarting.contains(id) => {
                self.restarting.remove(id);
            }
            _ => {}
        }
        let watched = traits.mounts_claims || traits.restarting;
        if watched != self.watched.contains(id) {
            match watched {
                true => self.watched.insert(id.to_string()),
                false => self.watched.remove(id),
            };
        }
        if let Some(view) = self.jobs.get_mut(id)
            && !key.version.is_empty()
            && view.key == key
        {
            view.round = round;
            return;
        }
        self.jobs_changed = true;
        let loss_moved_on = self
            .jobs
            .get(id)
            .filter(|view| !key.version.is_empty() && view.key.differs_in_loss_alone(&key))
            .and_then(|view| view.built.as_ref())
            .map(|(_, job)| job.as_ref());
        let built = build(loss_moved_on).map(|(submit, job)| (submit, Arc::new(job)));
        if let Some(old) = self.jobs.get(id).and_then(|v| v.built.as_ref()) {
            self.job_list.remove(&JobOrder(old.0, id.to_string()));
        }
        if let Some((submit, job)) = &built {
            self.job_list
                .insert(JobOrder(*submit, id.to_string()), Arc::clone(job));
        }
        self.jobs.insert(
            id.to_string(),
            JobView {
                key,
                rules,
                built,
                round,
            },
        );
    }

    /// Forgets job `id` (it is gone).
    pub fn drop_job(&mut self, id: &str) {
        if let Some(view) = self.jobs.remove(id) {
            self.jobs_changed = true;
            if let Some((submit, _)) = view.built {
                self.job_list.remove(&JobOrder(submit, id.to_string()));
            }
        }
        self.watched.remove(id);
        self.restarting.remove(id);
    }

    /// After a round that visited every job: forgets those it did not see (gone).
    pub fn drop_jobs_not_seen(&mut self) {
        let round = self.round;
        let gone: Vec<String> = self
            .jobs
            .iter()
            .filter(|(_, v)| v.round != round)
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.drop_job(&id);
        }
    }

    /// Ends the round: counts the sets in use again if a job's view changed.
    pub fn end(&mut self) {
        let adopted = std::mem::take(&mut self.adopted.changed);
        if std::mem::take(&mut self.jobs_changed) || adopted {
            self.count_sets_used();
        }
    }

    /// The eligibility sets' epoch: it moves on each time they are computed afresh.
    pub(crate) fn sets_epoch(&self) -> u64 {
        self.sets_epoch
    }

    /// Jobs visited every round (see the module docs).
    pub fn watched(&self) -> &HashSet<String> {
        &self.watched
    }

    /// Jobs with a restart under way.
    pub fn restarting(&self) -> &HashSet<String> {
        &self.restarting
    }

    /// The job views, in snapshot order.
    pub fn job_list(&self) -> Vec<Arc<model::Job>> {
        self.job_list.values().cloned().collect()
    }

    /// How many entries are kept (nodes, jobs), for tests of the bound.
    pub fn kept(&self) -> (usize, usize) {
        (self.nodes.len(), self.jobs.len())
    }
}
