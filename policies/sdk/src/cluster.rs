//! Views of the snapshot that placement decisions need: free resources per node, which
//! nodes fit a task, and packing a gang onto the fewest nodes.
//!
//! A [`Ledger`] starts from the snapshot and is charged as the policy decides, so two
//! placements in one round never count the same free capacity twice (the host would
//! reject the second). It also knows where each task may run (`task.eligible`, the
//! host's eligibility sets): the helpers that take a task ([`Ledger::fits_task`],
//! [`Ledger::rooms_for`], [`Ledger::charge_task`], [`Ledger::pack_gang`]) never offer a
//! node outside the task's set, so a policy built on them honours taints, node
//! selectors and affinity without knowing they exist.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::{Assignment, Job, Node, Resources, Snapshot, Task, TaskPhase};

/// Resource arithmetic on the WIT record.
pub trait ResourcesExt {
    /// All zero.
    fn zero() -> Resources;
    /// `self + other`.
    fn plus(&self, other: &Resources) -> Resources;
    /// `self - other`, floored at zero.
    fn saturating_minus(&self, other: &Resources) -> Resources;
    /// Every component of `other` is at most `self`'s.
    fn covers(&self, other: &Resources) -> bool;
}

impl ResourcesExt for Resources {
    fn zero() -> Resources {
        Resources {
            cpu_millis: 0,
            memory_bytes: 0,
            gpus: 0,
        }
    }
    fn plus(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis + other.cpu_millis,
            memory_bytes: self.memory_bytes + other.memory_bytes,
            gpus: self.gpus + other.gpus,
        }
    }
    fn saturating_minus(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
            gpus: self.gpus.saturating_sub(other.gpus),
        }
    }
    fn covers(&self, other: &Resources) -> bool {
        self.cpu_millis >= other.cpu_millis
            && self.memory_bytes >= other.memory_bytes
            && self.gpus >= other.gpus
    }
}

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

/// Gangs of identical tasks that did not fit since the ledger last gained room.
///
/// For a gang of `count` tasks that all ask for the same `requests` and may run on the
/// same set, the greedy packing of [`Ledger::pack_gang`] fills each node with as many as
/// fit there, so it succeeds exactly when the nodes' counts add up to `count`. Each
/// node's count only falls as the ledger is charged, and falls for a larger request, so
/// once such a gang failed, a gang of at least as many tasks, each asking at least as
/// much of the same set, fails too until something is released: the answer without the
/// search is the search's answer. Gangs whose tasks differ are not remembered (the
/// greedy packing is not monotone for them).
///
/// The converse holds for gangs that did fit ([`Ledger::could_pack`] asks without
/// charging): a gang needing at most what a fitting one needs fits too, until the
/// ledger is charged.
#[derive(Clone, Debug, Default)]
struct Misses {
    shapes: Vec<GangShape>,
    fits: Vec<GangShape>,
}

/// What a gang of identical tasks asks for: how many, what each asks for, and where
/// they may run.
#[derive(Clone, Copy, Debug)]
pub struct GangShape {
    count: usize,
    requests: Resources,
    eligible: Option<u32>,
}

impl GangShape {
    /// The shape of `job`'s pending tasks ([`pending_tasks`]) when they are all alike
    /// (and there is at least one), read without collecting them.
    pub fn of_pending(job: &Job) -> Option<Self> {
        let mut pending = job
            .tasks
            .iter()
            .filter(|t| t.phase == TaskPhase::Pending && t.node.is_none());
        let first = pending.next()?;
        let mut count = 1;
        for t in pending {
            if !same(&t.requests, &first.requests) || t.eligible != first.eligible {
                return None;
            }
            count += 1;
        }
        Some(Self {
            count,
            requests: first.requests,
            eligible: first.eligible,
        })
    }

    /// The shape of `tasks` when they are all alike (and there is at least one).
    fn of(tasks: &[&Task]) -> Option<Self> {
        let first = tasks.first()?;
        tasks
            .iter()
            .all(|t| same(&t.requests, &first.requests) && t.eligible == first.eligible)
            .then_some(Self {
                count: tasks.len(),
                requests: first.requests,
                eligible: first.eligible,
            })
    }

    /// True when this gang needs at least what `missed` needed, on the same set.
    fn needs_at_least(&self, missed: &GangShape) -> bool {
        self.eligible == missed.eligible
            && self.count >= missed.count
            && self.requests.covers(&missed.requests)
    }
}

impl Misses {
    fn known(&self, shape: &GangShape) -> bool {
        self.shapes
            .iter()
            .any(|missed| shape.needs_at_least(missed))
    }

    fn note(&mut self, shape: GangShape) {
        // A shape that needs at least what a kept one needs adds nothing; keeping the
        // list to shapes no other covers bounds it by the distinct requests in a round.
        if !self.known(&shape) {
            self.shapes.retain(|kept| !kept.needs_at_least(&shape));
            self.shapes.push(shape);
        }
    }

    fn forget(&mut self) {
        self.shapes.clear();
    }

    fn known_to_fit(&self, shape: &GangShape) -> bool {
        self.fits.iter().any(|kept| kept.needs_at_least(shape))
    }

    fn note_fit(&mut self, shape: GangShape) {
        if !self.known_to_fit(&shape) {
            self.fits.retain(|kept| !shape.needs_at_least(kept));
            self.fits.push(shape);
        }
    }

    /// The ledger lost room: what fitted may not any more.
    fn charged(&mut self) {
        self.fits.clear();
    }
}

/// The host's eligibility sets as one flag per node position, by set id.
#[derive(Debug, Default, PartialEq)]
struct Eligibility {
    sets: HashMap<u32, Vec<bool>>,
}

impl Eligibility {
    fn from_snapshot(snapshot: &Snapshot) -> Self {
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
    fn allows(&self, task: &Task, at: usize) -> bool {
        self.allows_set(task.eligible, at)
    }

    fn allows_set(&self, eligible: Option<u32>, at: usize) -> bool {
        match eligible {
            None => true,
            Some(id) => self
                .sets
                .get(&id)
                .is_some_and(|allowed| allowed.get(at).copied().unwrap_or(false)),
        }
    }
}

/// What a [`Ledger`] offered at one moment ([`Ledger::headroom`]).
#[derive(Clone, Debug)]
pub struct Headroom {
    names: Arc<NodeNames>,
    capacity: Vec<Capacity>,
    eligibility: Arc<Eligibility>,
}

/// The order of a [`Ledger`]'s nodes ([`Ledger::node_order`]): what a node position
/// means. Two orders are equal when they name the same nodes in the same order, so a
/// position worked out under one (a task's node, kept from round to round) holds under
/// the other. Holding one keeps its names alive: a later ledger with the same names is
/// recognised by identity, without comparing them.
#[derive(Clone, Debug)]
pub struct NodeOrder(Arc<NodeNames>);

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
struct NodeNames {
    in_order: Vec<String>,
    position: FxHashMap<String, usize>,
}

impl NodeNames {
    /// The names of `nodes`, shared with the previous ledger built in this instance
    /// when they are the same names in the same order: a round's nodes rarely change,
    /// and comparing the names costs a fraction of hashing and copying them.
    fn of(nodes: &[Node]) -> Arc<Self> {
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

#[derive(Clone, Copy, Debug)]
struct Capacity {
    allocatable: Resources,
    free: Resources,
    schedulable: bool,
}

impl Capacity {
    fn fits(&self, request: &Resources) -> bool {
        self.schedulable && self.free.covers(request)
    }

    /// How many of `tasks`, in order, fit here together (greedy), counting only those
    /// `allowed` here.
    fn how_many_fit(&self, tasks: &[&Task], allowed: impl Fn(&Task) -> bool) -> usize {
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

trait MinEach {
    fn min_each(&self, other: &Resources) -> Resources;
}

impl MinEach for Resources {
    fn min_each(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.min(other.cpu_millis),
            memory_bytes: self.memory_bytes.min(other.memory_bytes),
            gpus: self.gpus.min(other.gpus),
        }
    }
}

fn same(a: &Resources, b: &Resources) -> bool {
    a.covers(b) && b.covers(a)
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 { 0.0 } else { part / whole }
}

/// The job label the host sets (value `true`) when no two of a job's tasks may share a
/// node: its pod template asks for required anti-affinity against the job's own pods per
/// node, or for a host port. The host refuses a decision that puts two of them on one.
pub const ONE_TASK_PER_NODE_LABEL: &str = "switchyard.dev/one-task-per-node";

/// Whether no two tasks of `job` may share a node ([`ONE_TASK_PER_NODE_LABEL`]).
pub fn one_task_per_node(job: &Job) -> bool {
    job.labels
        .iter()
        .any(|l| l.key == ONE_TASK_PER_NODE_LABEL && l.value == "true")
}

/// The tasks of `job` not yet on a node.
pub fn pending_tasks(job: &Job) -> Vec<&Task> {
    job.tasks
        .iter()
        .filter(|t| t.phase == TaskPhase::Pending && t.node.is_none())
        .collect()
}

/// Whether `job` has a task not yet on a node: [`pending_tasks`] is not empty, asked
/// without collecting them (a round asks it of every job in a long queue).
pub fn has_pending_tasks(job: &Job) -> bool {
    job.tasks
        .iter()
        .any(|t| t.phase == TaskPhase::Pending && t.node.is_none())
}

/// Sum of the requests of `tasks`.
pub fn total_requests<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Resources {
    tasks
        .into_iter()
        .fold(Resources::zero(), |acc, t| acc.plus(&t.requests))
}

/// Names of the nodes `job` has tasks on, without repeats, in task order.
pub fn nodes_of(job: &Job) -> Vec<&str> {
    let mut nodes: Vec<&str> = Vec::new();
    for node in job.tasks.iter().filter_map(|t| t.node.as_deref()) {
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(cpu: u64, gpus: u32) -> Resources {
        Resources {
            cpu_millis: cpu,
            memory_bytes: 1 << 30,
            gpus,
        }
    }

    fn node(name: &str, cpu: u64, gpus: u32) -> Node {
        Node {
            name: name.into(),
            allocatable: Resources {
                cpu_millis: cpu,
                memory_bytes: 64 << 30,
                gpus,
            },
            requested: Resources::zero(),
            usage: None,
            labels: vec![],
            schedulable: true,
        }
    }

    fn task(name: &str, gpus: u32) -> Task {
        Task {
            name: name.into(),
            role: "worker".into(),
            node: None,
            phase: TaskPhase::Pending,
            requests: res(1000, gpus),
            cpu_weight: 1.0,
            usage: None,
            eligible: None,
        }
    }

    /// A snapshot of `nodes` where tasks naming set 0 may only run on `allowed`.
    fn restricted(nodes: Vec<Node>, allowed: &[&str]) -> Snapshot {
        let positions = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| allowed.contains(&n.name.as_str()))
            .map(|(i, _)| i as u32)
            .collect();
        Snapshot {
            time: 0.0,
            triggers: vec![],
            nodes,
            jobs: vec![],
            node_sets: vec![crate::NodeSet {
                id: 0,
                nodes: positions,
            }],
        }
    }

    fn only_in_set_0(mut t: Task) -> Task {
        t.eligible = Some(0);
        t
    }

    #[test]
    fn a_ledger_finds_nodes_by_the_names_of_its_own_snapshot_when_they_change() {
        let first = Ledger::from_nodes(&[node("a", 1000, 0), node("b", 2000, 0)]);
        let same = Ledger::from_nodes(&[node("a", 3000, 0), node("b", 4000, 0)]);
        assert!(
            Arc::ptr_eq(&first.names, &same.names),
            "the same names are shared"
        );
        assert_eq!(same.free("b").map(|r| r.cpu_millis), Some(4000));
        let swapped = Ledger::from_nodes(&[node("b", 5000, 0), node("a", 6000, 0)]);
        assert_eq!(swapped.position("a"), Some(1));
        assert_eq!(swapped.free("a").map(|r| r.cpu_millis), Some(6000));
        let fewer = Ledger::from_nodes(&[node("b", 7000, 0)]);
        assert_eq!(fewer.position("a"), None);
        assert_eq!(fewer.node_names().collect::<Vec<_>>(), ["b"]);
        assert_eq!(
            first.position("b"),
            Some(1),
            "an older ledger keeps its own names"
        );
        // Orders: the same names in the same order are one order, shared or not.
        assert_eq!(first.node_order(), same.node_order());
        assert_ne!(first.node_order(), swapped.node_order());
        assert_ne!(swapped.node_order(), fewer.node_order());
        let rebuilt = Ledger::from_nodes(&[node("a", 1, 0), node("b", 1, 0)]);
        assert_eq!(rebuilt.node_order(), first.node_order());
    }

    #[test]
    fn a_task_fits_and_is_charged_by_position_as_by_name() {
        let mut ledger = Ledger::from_nodes(&[node("a", 1000, 1), node("b", 4000, 1)]);
        let t = task("w0", 1);
        assert_eq!(ledger.fits_task_at(0, &t), ledger.fits_task("a", &t));
        assert!(ledger.charge_task_at(1, &t));
        assert!(!ledger.fits_task_at(1, &t), "b's one GPU is taken");
        assert!(!ledger.charge_task_at(1, &t));
        assert!(!ledger.fits_task_at(7, &t), "no node at 7");
    }

    #[test]
    fn no_helper_offers_a_node_outside_the_task_s_eligible_set() {
        // `big` would take the whole gang; the tasks may only run on the two small ones.
        let s = restricted(
            vec![
                node("big", 64000, 8),
                node("s1", 8000, 1),
                node("s2", 8000, 1),
            ],
            &["s1", "s2"],
        );
        let tasks = [only_in_set_0(task("w0", 1)), only_in_set_0(task("w1", 1))];
        let mut ledger = Ledger::new(&s);
        assert_eq!(ledger.nodes_for(&tasks[0]), ["s1", "s2"]);
        assert!(!ledger.fits_task("big", &tasks[0]));
        assert!(
            ledger.fits("big", &tasks[0].requests),
            "resources alone would fit"
        );
        assert!(!ledger.clone().charge_task("big", &tasks[0]));
        let refs: Vec<&Task> = tasks.iter().collect();
        let placed = ledger.pack_gang(&refs).unwrap();
        let mut nodes: Vec<&str> = placed.iter().map(|a| a.node.as_str()).collect();
        nodes.sort();
        assert_eq!(nodes, ["s1", "s2"]);
        // A third task has nowhere left to go, though `big` is empty.
        let third = only_in_set_0(task("w2", 1));
        assert!(ledger.pack_gang(&[&third]).is_none());
        assert_eq!(ledger.free("big").unwrap().gpus, 8);
    }

    #[test]
    fn a_set_the_host_did_not_send_allows_nothing() {
        let s = restricted(vec![node("a", 8000, 1)], &["a"]);
        let mut stray = task("w0", 1);
        stray.eligible = Some(7);
        assert!(Ledger::new(&s).nodes_for(&stray).is_empty());
    }

    #[test]
    fn a_gang_goes_onto_the_fewest_nodes() {
        let mut ledger = Ledger::from_nodes(&[node("a", 8000, 2), node("b", 8000, 4)]);
        let tasks = [task("w0", 1), task("w1", 1), task("w2", 1)];
        let refs: Vec<&Task> = tasks.iter().collect();
        let placed = ledger.pack_gang(&refs).unwrap();
        assert!(placed.iter().all(|a| a.node == "b"), "{placed:?}");
        assert_eq!(ledger.free("b").unwrap().gpus, 1);
    }

    #[test]
    fn a_gang_that_does_not_fit_changes_nothing() {
        let mut ledger = Ledger::from_nodes(&[node("a", 8000, 1), node("b", 8000, 1)]);
        let tasks = [task("w0", 1), task("w1", 1), task("w2", 1)];
        let refs: Vec<&Task> = tasks.iter().collect();
        assert!(ledger.pack_gang(&refs).is_none());
        assert_eq!(ledger.free("a").unwrap().gpus, 1);
        assert_eq!(ledger.free("b").unwrap().gpus, 1);
    }

    fn refs(tasks: &[Task]) -> Vec<&Task> {
        tasks.iter().collect()
    }

    #[test]
    fn a_gang_known_to_fit_is_asked_again_once_the_ledger_is_charged() {
        let mut ledger = Ledger::from_nodes(&[node("a", 8000, 2), node("b", 8000, 2)]);
        let gang = |n: u32| {
            (0..n)
                .map(|i| task(&format!("w{i}"), 1))
                .collect::<Vec<_>>()
        };
        let (three, four, two) = (gang(3), gang(4), gang(2));
        assert!(ledger.could_pack(&refs(&four)));
        assert!(ledger.could_pack(&refs(&three)), "a smaller gang fits too");
        assert_eq!(ledger.free("a").unwrap().gpus, 2, "asking charges nothing");
        // Two GPUs taken: four no longer fit, three no longer do either.
        assert!(ledger.pack_gang(&refs(&two)).is_some());
        assert!(!ledger.could_pack(&refs(&three)));
        assert!(ledger.could_pack(&refs(&two)));
        assert!(ledger.charge("b", &res(1000, 1)));
        assert!(
            !ledger.could_pack(&refs(&two)),
            "charged after the last answer"
        );
    }

    /// Remembering what fitted and what did not never changes an answer: every
    /// `could_pack` of many sequences of asks and packings agrees with a search on a
    /// ledger that remembers nothing. (A fixed pseudo-random walk: the vendored SDK
    /// builds without dev-dependencies.)
    #[test]
    fn remembered_answers_agree_with_a_fresh_search() {
        let mut seed: u64 = 0x5eed;
        let mut draw = |below: u32| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) % u64::from(below)) as u32
        };
        for _ in 0..300 {
            let nodes: Vec<Node> = (0..1 + draw(3))
                .map(|i| node(&format!("n{i}"), 8000, draw(5)))
                .collect();
            let mut ledger = Ledger::from_nodes(&nodes);
            for _ in 0..1 + draw(20) {
                let tasks: Vec<Task> = (0..draw(6))
                    .map(|i| task(&format!("w{i}"), draw(3)))
                    .collect();
                let alike = (0..draw(6)).map(|i| task(&format!("w{i}"), 1)).collect();
                let tasks = if draw(2) == 0 { tasks } else { alike };
                let refs: Vec<&Task> = tasks.iter().collect();
                let mut fresh = ledger.clone();
                fresh.misses = Misses::default();
                assert_eq!(
                    ledger.could_pack(&refs),
                    fresh.could_pack(&refs),
                    "{tasks:?}"
                );
                if draw(2) == 0 {
                    ledger.pack_gang(&refs);
                }
            }
        }
    }

    #[test]
    fn charging_past_the_free_capacity_is_refused() {
        let mut ledger = Ledger::from_nodes(&[node("a", 1500, 0)]);
        assert!(ledger.charge("a", &res(1000, 0)));
        assert!(!ledger.charge("a", &res(1000, 0)));
        assert_eq!(ledger.free("a").unwrap().cpu_millis, 500);
    }

    #[test]
    fn least_allocated_prefers_the_emptier_node() {
        let mut busy = node("busy", 4000, 0);
        busy.requested = res(3000, 0);
        let ledger = Ledger::from_nodes(&[busy, node("idle", 4000, 0)]);
        let r = res(500, 0);
        assert!(
            ledger.least_allocated_score("idle", &r) > ledger.least_allocated_score("busy", &r)
        );
    }
}
