//! [`Ledger`]: free capacity per node, charged as a policy places tasks within one
//! round, and the searches over it (which nodes fit a task, packing a gang onto the
//! fewest nodes). What one node offers and whether a task may run there is `nodes`'s;
//! remembering gangs that did not fit is `gang`'s.

use std::sync::Arc;

use super::gang::{GangShape, Misses};
use super::jobs::{nodes_of, one_task_per_node};
use super::nodes::{Capacity, Eligibility, Headroom, NodeNames, NodeOrder, Room};
use super::resources::{MinEach as _, ResourcesExt as _};
use crate::{Assignment, Job, Node, Resources, Snapshot, Task};

/// Free capacity per node, charged as the policy places tasks within one round.
///
/// Node names are indexed once per ledger and shared by its clones, and a node's
/// capacity is a plain copyable record, so lookups by name are constant time and a
/// trial copy (all-or-nothing gang packing) costs one memcpy: a round on thousands of
/// nodes stays linear in the nodes per placement.
///
/// A long queue behind a full cluster would cost a pass over every node per waiting gang
/// per round, so the ledger remembers the gangs of identical tasks that found no room
/// ([`Ledger::pack_gang`]); see `Misses`.
#[derive(Clone, Debug)]
pub struct Ledger {
    names: Arc<NodeNames>,
    capacity: Vec<Capacity>,
    eligibility: Arc<Eligibility>,
    misses: Misses,
}

impl Ledger {
    /// Free capacity as the snapshot reports it (allocatable minus requested), and the
    /// snapshot's eligibility sets.
    pub fn new(snapshot: &Snapshot) -> Self {
        let mut ledger = Self::from_nodes(&snapshot.nodes);
        if !snapshot.node_sets.is_empty() {
            ledger.eligibility = Arc::new(Eligibility::from_snapshot(snapshot));
        }
        ledger
    }

    /// Same as [`Ledger::new`] from a node list, where every task may run anywhere.
    pub fn from_nodes(nodes: &[Node]) -> Self {
        let capacity = nodes
            .iter()
            .map(|n| Capacity {
                allocatable: n.allocatable,
                free: n.allocatable.saturating_minus(&n.requested),
                schedulable: n.schedulable,
            })
            .collect();
        Self {
            names: NodeNames::of(nodes),
            capacity,
            eligibility: Arc::default(),
            misses: Misses::default(),
        }
    }

    /// The same nodes with nothing charged to them (and the same eligibility): whether a
    /// job could ever fit, were the cluster empty.
    pub fn emptied(&self) -> Ledger {
        let mut empty = self.clone();
        for c in &mut empty.capacity {
            c.free = c.allocatable;
        }
        empty.misses = Misses::default();
        empty
    }

    /// True when `tasks` are known not to fit as a gang without a search: a gang of
    /// identical tasks needing at least as much as one that [`Ledger::pack_gang`] could
    /// not place since the ledger last gained room. False says nothing.
    pub fn known_not_to_fit(&self, tasks: &[&Task]) -> bool {
        GangShape::of(tasks).is_some_and(|shape| self.misses.known(&shape))
    }

    /// [`Ledger::known_not_to_fit`] for the tasks of `shape`.
    pub fn known_not_to_fit_shape(&self, shape: &GangShape) -> bool {
        self.misses.known(shape)
    }

    /// What the ledger offers now, for a later ledger to be compared with
    /// ([`Ledger::offers_no_more_than`]).
    pub fn headroom(&self) -> Headroom {
        Headroom {
            names: Arc::clone(&self.names),
            capacity: self.capacity.clone(),
            eligibility: Arc::clone(&self.eligibility),
        }
    }

    /// True when no task could fit anywhere here that did not fit in `earlier`: the
    /// same nodes in the same order with the same eligibility sets, each node
    /// schedulable here schedulable there too, with at least as much free of every
    /// resource. Placing is then monotone for the packings that only fill nodes (a
    /// single node's room, or a gang of identical tasks): what failed there fails here.
    pub fn offers_no_more_than(&self, earlier: &Headroom) -> bool {
        let same_nodes = Arc::ptr_eq(&self.names, &earlier.names)
            || self.names.in_order == earlier.names.in_order;
        let same_sets = Arc::ptr_eq(&self.eligibility, &earlier.eligibility)
            || self.eligibility == earlier.eligibility;
        same_nodes
            && same_sets
            && self.capacity.len() == earlier.capacity.len()
            && self
                .capacity
                .iter()
                .zip(&earlier.capacity)
                .all(|(now, then)| {
                    !now.schedulable || (then.schedulable && then.free.covers(&now.free))
                })
    }

    /// Node names in snapshot order.
    pub fn node_names(&self) -> impl Iterator<Item = &str> {
        self.names.in_order.iter().map(String::as_str)
    }

    /// What is still free on `node`, or `None` for an unknown node.
    pub fn free(&self, node: &str) -> Option<Resources> {
        self.capacity_of(node).map(|c| c.free)
    }

    /// True when `node` is schedulable and has room for `request`. Knows nothing of
    /// where a task may run: for a task, [`Ledger::fits_task`].
    pub fn fits(&self, node: &str, request: &Resources) -> bool {
        self.capacity_of(node).is_some_and(|c| c.fits(request))
    }

    /// True when `task` may run on `node` and the node is schedulable with room for
    /// its requests.
    pub fn fits_task(&self, node: &str, task: &Task) -> bool {
        self.position(node).is_some_and(|at| {
            self.eligibility.allows(task, at) && self.capacity[at].fits(&task.requests)
        })
    }

    /// True when `task` may run on `node` (its eligibility set has it), whatever is
    /// free there.
    pub fn may_run(&self, node: &str, task: &Task) -> bool {
        task.eligible.is_none()
            || self
                .position(node)
                .is_some_and(|at| self.eligibility.allows(task, at))
    }

    /// Nodes `task` may run on with room for it, in snapshot order.
    pub fn nodes_for(&self, task: &Task) -> Vec<&str> {
        self.rooms_for(task).map(|r| r.name).collect()
    }

    /// Nodes `task` may run on with room for it, in snapshot order, with their
    /// capacity, so scoring them needs no lookup.
    pub fn rooms_for<'a>(&'a self, task: &Task) -> impl Iterator<Item = Room<'a>> + use<'a> {
        self.rooms_for_from(task, 0).map(|(_, room)| room)
    }

    /// Like [`Ledger::rooms_for`], but walking the nodes as a ring from position
    /// `start`; each room comes with its step in that walk (0 for `start`), so a caller
    /// that stops early knows how many nodes it looked at.
    pub fn rooms_for_from<'a>(
        &'a self,
        task: &Task,
        start: usize,
    ) -> impl Iterator<Item = (usize, Room<'a>)> + use<'a> {
        let request = task.requests;
        let eligible = task.eligible;
        let nodes = self.capacity.len();
        (0..nodes)
            .map(move |step| (step, (start + step) % nodes))
            .filter(move |&(_, at)| {
                self.capacity[at].fits(&request) && self.eligibility.allows_set(eligible, at)
            })
            .map(move |(step, at)| {
                let capacity = &self.capacity[at];
                let room = Room {
                    name: &self.names.in_order[at],
                    allocatable: capacity.allocatable,
                    free: capacity.free,
                };
                (step, room)
            })
    }

    /// How many nodes the ledger tracks.
    pub fn node_count(&self) -> usize {
        self.capacity.len()
    }

    /// kube-scheduler's `LeastAllocated` score (0-100) after placing `request` on
    /// `node` ([`Room::least_allocated_score`]); 0 for an unknown node.
    pub fn least_allocated_score(&self, node: &str, request: &Resources) -> f64 {
        self.position(node).map_or(0.0, |i| {
            let c = &self.capacity[i];
            Room {
                name: node,
                allocatable: c.allocatable,
                free: c.free,
            }
            .least_allocated_score(request)
        })
    }

    /// Charges `task`'s requests to `node`. Returns false (and charges nothing) when the
    /// task may not run there or does not fit.
    pub fn charge_task(&mut self, node: &str, task: &Task) -> bool {
        self.may_run(node, task) && self.charge(node, &task.requests)
    }

    /// Charges every one of `tasks` to `node`, or nothing (returning false) when they
    /// do not all fit there together or one may not run there. No trial copy: the
    /// node's room is checked for the whole group first.
    pub fn charge_tasks(&mut self, node: &str, tasks: &[&Task]) -> bool {
        let Some(at) = self.position(node) else {
            return false;
        };
        let eligibility = &self.eligibility;
        let fit = self.capacity[at].how_many_fit(tasks, |t| eligibility.allows(t, at));
        if fit < tasks.len() {
            return false;
        }
        let c = &mut self.capacity[at];
        for task in tasks {
            c.free = c.free.saturating_minus(&task.requests);
        }
        self.misses.charged();
        true
    }

    /// Charges `request` to `node`. Returns false (and charges nothing) when it does not
    /// fit. Knows nothing of where a task may run: for a task, [`Ledger::charge_task`].
    pub fn charge(&mut self, node: &str, request: &Resources) -> bool {
        match self.position(node) {
            Some(i) if self.capacity[i].fits(request) => {
                let c = &mut self.capacity[i];
                c.free = c.free.saturating_minus(request);
                self.misses.charged();
                true
            }
            _ => false,
        }
    }

    /// Gives `request` back to `node` (a task leaving it).
    pub fn release(&mut self, node: &str, request: &Resources) {
        if let Some(i) = self.position(node) {
            let c = &mut self.capacity[i];
            c.free = c.free.plus(request).min_each(&c.allocatable);
            self.misses.forget();
        }
    }

    /// Packs `tasks` onto as few nodes as possible: repeatedly fill the node that can
    /// take the most of the remaining tasks (ties: snapshot order), each task only on a
    /// node it may run on. All or nothing: on success the ledger is charged and the
    /// assignments returned; on failure nothing changes (but a gang of identical tasks
    /// is remembered, so a like one fails at once: [`Ledger::known_not_to_fit`]).
    pub fn pack_gang(&mut self, tasks: &[&Task]) -> Option<Vec<Assignment>> {
        let shape = GangShape::of(tasks);
        if shape.is_some_and(|shape| self.misses.known(&shape)) {
            return None;
        }
        let assignments = self.pack_gang_searching(tasks);
        if let (None, Some(shape)) = (&assignments, shape) {
            self.misses.note(shape);
        }
        assignments
    }

    /// Packs the pending `tasks` of `job` as a gang, as [`Ledger::pack_gang`] does, except
    /// for a job whose tasks may not share a node ([`one_task_per_node`]): those go one
    /// to a node, each on a node none of the job's tasks is on yet (first fit, in
    /// snapshot order), since the host refuses anything else. All or nothing, as
    /// `pack_gang`.
    pub fn pack_gang_of(&mut self, job: &Job, tasks: &[&Task]) -> Option<Vec<Assignment>> {
        if !one_task_per_node(job) {
            return self.pack_gang(tasks);
        }
        let mut taken: Vec<usize> = nodes_of(job)
            .into_iter()
            .filter_map(|node| self.position(node))
            .collect();
        let mut trial = self.capacity.clone();
        let mut assignments = Vec::with_capacity(tasks.len());
        for task in tasks {
            let node = (0..trial.len()).find(|&at| {
                !taken.contains(&at)
                    && self.eligibility.allows(task, at)
                    && trial[at].fits(&task.requests)
            })?;
            trial[node].free = trial[node].free.saturating_minus(&task.requests);
            taken.push(node);
            assignments.push(Assignment {
                task: task.name.clone(),
                node: self.names.in_order[node].clone(),
            });
        }
        self.capacity = trial;
        self.misses.charged();
        Some(assignments)
    }

    /// Whether `tasks` could be packed as a gang now, charging nothing; like
    /// [`Ledger::pack_gang`], a gang of identical tasks that cannot is remembered, and
    /// so is one that can, until the ledger is next charged: asked for every waiting
    /// job of a long queue (gang's never-fits check on the empty cluster), the answer
    /// is then a comparison instead of a trial packing.
    pub fn could_pack(&mut self, tasks: &[&Task]) -> bool {
        let shape = GangShape::of(tasks);
        if shape.is_some_and(|shape| self.misses.known_to_fit(&shape)) {
            return true;
        }
        let before = self.capacity.clone();
        let fitted = self.misses.fits.clone();
        let fits = self.pack_gang(tasks).is_some();
        // The trial charged the ledger and forgot what fitted; the capacity is back as
        // it was, so what fitted before still does.
        self.capacity = before;
        self.misses.fits = fitted;
        if let (true, Some(shape)) = (fits, shape) {
            self.misses.note_fit(shape);
        }
        fits
    }

    /// Whether the pending `tasks` of `job` could be packed now, charging nothing:
    /// [`Ledger::could_pack`], except that a job whose tasks may not share a node
    /// ([`one_task_per_node`]) needs a node for each, as [`Ledger::pack_gang_of`] places
    /// them. Asked on the empty cluster, it tells a job that never fits (more such tasks
    /// than eligible nodes) from one that waits for room.
    pub fn could_pack_of(&mut self, job: &Job, tasks: &[&Task]) -> bool {
        if !one_task_per_node(job) {
            return self.could_pack(tasks);
        }
        let before = self.capacity.clone();
        let fitted = self.misses.fits.clone();
        let fits = self.pack_gang_of(job, tasks).is_some();
        self.capacity = before;
        self.misses.fits = fitted;
        fits
    }

    fn pack_gang_searching(&mut self, tasks: &[&Task]) -> Option<Vec<Assignment>> {
        let mut trial = self.capacity.clone();
        let mut remaining: Vec<&Task> = tasks.to_vec();
        let mut assignments = Vec::with_capacity(tasks.len());
        while !remaining.is_empty() {
            // The first node taking the most; the first taking all of them ends the search.
            let mut best: Option<(usize, usize)> = None;
            for (i, capacity) in trial.iter().enumerate() {
                let count = capacity.how_many_fit(&remaining, |t| self.eligibility.allows(t, i));
                if count > best.map_or(0, |b| b.1) {
                    best = Some((i, count));
                    if count == remaining.len() {
                        break;
                    }
                }
            }
            let (node, _) = best?;
            let capacity = &mut trial[node];
            let eligibility = &self.eligibility;
            remaining.retain(|task| {
                if !eligibility.allows(task, node) || !capacity.fits(&task.requests) {
                    return true;
                }
                capacity.free = capacity.free.saturating_minus(&task.requests);
                assignments.push(Assignment {
                    task: task.name.clone(),
                    node: self.names.in_order[node].clone(),
                });
                false
            });
        }
        self.capacity = trial;
        self.misses.charged();
        Some(assignments)
    }

    /// The position of `node` in the snapshot's node list, which the `*_at` methods
    /// take: a round that visits nodes in order, or looks the same node up many times,
    /// finds it once.
    pub fn position(&self, node: &str) -> Option<usize> {
        self.names.position.get(node).copied()
    }

    /// [`Ledger::fits_task`] for the node at position `at`.
    pub fn fits_task_at(&self, at: usize, task: &Task) -> bool {
        self.capacity
            .get(at)
            .is_some_and(|c| self.eligibility.allows(task, at) && c.fits(&task.requests))
    }

    /// [`Ledger::charge_task`] for the node at position `at`.
    pub fn charge_task_at(&mut self, at: usize, task: &Task) -> bool {
        if !self.fits_task_at(at, task) {
            return false;
        }
        let c = &mut self.capacity[at];
        c.free = c.free.saturating_minus(&task.requests);
        self.misses.charged();
        true
    }

    /// The order of the ledger's nodes, to tell whether positions worked out under an
    /// earlier ledger still hold.
    pub fn node_order(&self) -> NodeOrder {
        NodeOrder(Arc::clone(&self.names))
    }

    fn capacity_of(&self, node: &str) -> Option<&Capacity> {
        self.position(node).map(|i| &self.capacity[i])
    }
}

#[cfg(test)]
mod tests;
