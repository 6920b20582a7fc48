//! The nodes as a ledger holds them: their names and positions ([`NodeOrder`]), each
//! one's capacity, the host's eligibility sets by position, and the views a ledger hands
//! out ([`Room`], [`Headroom`]). It answers for one node at a time; choosing among nodes
//! is the ledger's.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::resources::{ResourcesExt as _, ratio};
use crate::{Node, Resources, Snapshot, Task};

/// The host's eligibility sets as one flag per node position, by set id.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Eligibility {
    sets: HashMap<u32, Vec<bool>>,
}

impl Eligibility {
    pub(super) fn from_snapshot(snapshot: &Snapshot) -> Self {
        let nodes = snapshot.nodes.len();
        let sets = snapshot
            .node_sets
            .iter()
            .map(|set| {
                let mut allowed = vec![false; nodes];
                for &at in &set.nodes {
                    if let Some(flag) = allowed.get_mut(at as usize) {
                        *flag = true;
                    }
                }
                (set.id, allowed)
            })
            .collect();
        Self { sets }
    }

    /// True when `task` may run on the node at position `at`. A set the host did not
    /// send allows nothing, as the host's validator would refuse it too.
    pub(super) fn allows(&self, task: &Task, at: usize) -> bool {
        self.allows_set(task.eligible, at)
    }

    pub(super) fn allows_set(&self, eligible: Option<u32>, at: usize) -> bool {
        match eligible {
            None => true,
            Some(id) => self
                .sets
                .get(&id)
                .is_some_and(|allowed| allowed.get(at).copied().unwrap_or(false)),
        }
    }
}

/// What a [`Ledger`](super::Ledger) offered at one moment ([`Ledger::headroom`](super::Ledger::headroom)).
#[derive(Clone, Debug)]
pub struct Headroom {
    pub(super) names: Arc<NodeNames>,
    pub(super) capacity: Vec<Capacity>,
    pub(super) eligibility: Arc<Eligibility>,
}

/// The order of a [`Ledger`](super::Ledger)'s nodes ([`Ledger::node_order`](super::Ledger::node_order)): what a node position
/// means. Two orders are equal when they name the same nodes in the same order, so a
/// position worked out under one (a task's node, kept from round to round) holds under
/// the other. Holding one keeps its names alive: a later ledger with the same names is
/// recognised by identity, without comparing them.
#[derive(Clone, Debug)]
pub struct NodeOrder(pub(super) Arc<NodeNames>);

impl PartialEq for NodeOrder {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.in_order == other.0.in_order
    }
}

/// The nodes' names in snapshot order and each name's position. Hashed with FxHash:
/// SipHash's rounds are most of a lookup in Wasm, and a lookup per task per round is
/// what a large cluster asks of it (the names are the cluster's, and a slow round is
/// bounded by the host's deadline).
#[derive(Debug, PartialEq)]
pub(super) struct NodeNames {
    pub(super) in_order: Vec<String>,
    pub(super) position: FxHashMap<String, usize>,
}

impl NodeNames {
    /// The names of `nodes`, shared with the previous ledger built in this instance
    /// when they are the same names in the same order: a round's nodes rarely change,
    /// and comparing the names costs a fraction of hashing and copying them.
    pub(super) fn of(nodes: &[Node]) -> Arc<Self> {
        thread_local! {
            static LAST: std::cell::RefCell<Option<Arc<NodeNames>>> =
                const { std::cell::RefCell::new(None) };
        }
        LAST.with(|last| {
            let mut last = last.borrow_mut();
            if let Some(names) = last.as_ref()
                && names.in_order.len() == nodes.len()
                && names.in_order.iter().zip(nodes).all(|(a, n)| *a == n.name)
            {
                return names.clone();
            }
            let in_order: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
            let mut position =
                FxHashMap::with_capacity_and_hasher(in_order.len(), Default::default());
            for (i, name) in in_order.iter().enumerate() {
                position.entry(name.clone()).or_insert(i);
            }
            let names = Arc::new(NodeNames { in_order, position });
            *last = Some(names.clone());
            names
        })
    }
}

/// One node's room: what it offers, what is free, and whether it takes new tasks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Capacity {
    pub(super) allocatable: Resources,
    pub(super) free: Resources,
    pub(super) schedulable: bool,
}

impl Capacity {
    pub(super) fn fits(&self, request: &Resources) -> bool {
        self.schedulable && self.free.covers(request)
    }

    /// How many of `tasks`, in order, fit here together (greedy), counting only those
    /// `allowed` here.
    pub(super) fn how_many_fit(&self, tasks: &[&Task], allowed: impl Fn(&Task) -> bool) -> usize {
        if !self.schedulable {
            return 0;
        }
        let mut free = self.free;
        tasks
            .iter()
            .filter(|t| {
                let fits = allowed(t) && free.covers(&t.requests);
                if fits {
                    free = free.saturating_minus(&t.requests);
                }
                fits
            })
            .count()
    }
}

/// A node as the ledger sees it now: a candidate for a task.
#[derive(Clone, Copy, Debug)]
pub struct Room<'a> {
    /// The node's name.
    pub name: &'a str,
    /// What the node offers in all.
    pub allocatable: Resources,
    /// What is still free on it.
    pub free: Resources,
}

impl Room<'_> {
    /// kube-scheduler's `LeastAllocated` score (0-100) after placing `request` here:
    /// the mean over CPU, memory (and GPUs when the node has any) of the free fraction
    /// left.
    pub fn least_allocated_score(&self, request: &Resources) -> f64 {
        let left = self.free.saturating_minus(request);
        let cpu = ratio(left.cpu_millis as f64, self.allocatable.cpu_millis as f64);
        let memory = ratio(
            left.memory_bytes as f64,
            self.allocatable.memory_bytes as f64,
        );
        if self.allocatable.gpus > 0 {
            let gpus = ratio(left.gpus as f64, self.allocatable.gpus as f64);
            100.0 * (cpu + memory + gpus) / 3.0
        } else {
            100.0 * (cpu + memory) / 2.0
        }
    }
}
