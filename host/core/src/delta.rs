//! What an incremental policy's instance holds, and the change that brings it to now.
//!
//! The host keeps a copy of the snapshot the instance reached on its last successful
//! call, diffs the next snapshot against it and sends only the difference
//! (`snapshot-delta` in `wit/policy.wit`). The delta's order rule is the guest's: held
//! items keep their places, new ones follow them. A snapshot that puts a new item before
//! held ones, or reorders held ones, cannot be said that way and goes as a reset.
//!
//! Held items are the snapshot's own `Arc`s: holding costs no copy, and an item the
//! source handed out again unchanged is told apart by its pointer alone.
//!
//! A policy that does not read loss series (`description.reads-loss`) holds every job
//! with an empty series. The held `Arc`s still carry the series, which the diff then
//! leaves out of every comparison, so such a policy costs no second copy of the jobs
//! either: it is the same held snapshot, read without its loss.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::model::{Job, LossSample, Node, NodeSet, Snapshot};

/// How to bring an instance from what it holds to the current snapshot.
#[derive(Debug)]
pub enum Change {
    /// Send the whole snapshot; the instance drops what it holds.
    Reset,
    /// Send only what differs.
    Delta(Delta),
}

/// The difference between the held snapshot and the current one.
#[derive(Debug)]
pub struct Delta {
    /// Nodes added, changed and removed.
    pub nodes: ListDelta,
    /// Jobs added, changed (other than their loss) and removed.
    pub jobs: ListDelta,
    /// Jobs whose only change is a loss series that moved on.
    pub loss_updates: Vec<LossUpdate>,
    /// The eligibility sets must go whole: they changed, or nodes came or went (the
    /// sets name nodes by position).
    pub node_sets_changed: bool,
}

/// The difference between two lists of keyed items (nodes by name, jobs by id).
#[derive(Debug, Default)]
pub struct ListDelta {
    /// Keys of the held items that are gone, in held order.
    pub removed: Vec<String>,
    /// Indices in the current list of the changed items.
    changed: Vec<usize>,
    /// Index in the current list from which every item is new.
    first_new: usize,
}

impl ListDelta {
    /// Whether items left, so the positions of the held ones after them moved (new
    /// items only ever follow the held ones).
    pub fn moves_positions(&self) -> bool {
        !self.removed.is_empty()
    }

    /// The current items the instance must receive whole: the changed ones in order,
    /// then the new ones.
    pub fn upserted<'a, T>(&self, now: &'a [T]) -> impl Iterator<Item = &'a T> {
        self.changed
            .iter()
            .map(|&index| &now[index])
            .chain(&now[self.first_new..])
    }
}

/// A job's loss series moved on: the instance drops its `dropped` oldest samples and
/// appends the current series from `kept` on.
#[derive(Debug)]
pub struct LossUpdate {
    /// Index of the job in the current snapshot.
    pub job: usize,
    /// Position of the job in the held list once removals are applied.
    pub held_at: usize,
    /// Oldest held samples that left the window.
    pub dropped: u32,
    /// Samples of the current series the instance already holds (its prefix).
    pub kept: usize,
}

/// What an incremental instance holds: the `Arc`s of the snapshot it last applied.
/// `default()` is an instance that reads loss series.
#[derive(Debug)]
pub struct HeldSnapshot {
    nodes: Vec<Arc<Node>>,
    jobs: Vec<Arc<Job>>,
    node_sets: Arc<Vec<NodeSet>>,
    /// No two held nodes or jobs share a key; otherwise every change goes as a reset.
    keys_unique: bool,
    /// The instance is sent loss series: false leaves them out of the diff.
    reads_loss: bool,
}

impl Default for HeldSnapshot {
    fn default() -> Self {
        Self::for_policy(true)
    }
}

impl HeldSnapshot {
    /// Nothing held yet, for a policy whose description says whether it `reads_loss`.
    /// When it does not, the instance holds every job with an empty loss series: a job
    /// whose only change is its loss series is unchanged, and no [`LossUpdate`] is made.
    pub fn for_policy(reads_loss: bool) -> Self {
        Self {
            nodes: Vec::new(),
            jobs: Vec::new(),
            node_sets: Arc::default(),
            keys_unique: false,
            reads_loss,
        }
    }

    /// Whether the instance is sent loss series.
    pub fn reads_loss(&self) -> bool {
        self.reads_loss
    }

    /// What to send so the instance reaches `now`.
    pub fn change_to(&self, now: &Snapshot) -> Change {
        if !self.keys_unique {
            return Change::Reset;
        }
        let nodes = diff(
            &self.nodes,
            &now.nodes,
            |n| &n.name,
            |old, new, _| old != new,
        );
        let mut loss_updates = Vec::new();
        let jobs = diff(
            &self.jobs,
            &now.jobs,
            |j| &j.id,
            |old, new, at| match self.reads_loss {
                true => job_changed(old, new, at, &mut loss_updates),
                false => !same_but_loss(old, new),
            },
        );
        let (Some(nodes), Some(jobs)) = (nodes, jobs) else {
            return Change::Reset;
        };
        let sets_differ =
            !Arc::ptr_eq(&self.node_sets, &now.node_sets) && self.node_sets != now.node_sets;
        let positions_moved = !now.node_sets.is_empty() && nodes.moves_positions();
        Change::Delta(Delta {
            nodes,
            jobs,
            loss_updates,
            node_sets_changed: sets_differ || positions_moved,
        })
    }

    /// Records that the instance applied `change` and now holds `now`.
    ///
    /// Either way the instance now holds what `now` says, in `now`'s order, so the held
    /// copy becomes `now`'s `Arc`s. Taking them (rather than keeping a held item equal
    /// to the current one by value) matters: an item the source rebuilt unchanged would
    /// otherwise be compared field by field in every later round.
    pub fn commit(&mut self, now: &Snapshot, change: &Change) {
        self.nodes.clone_from(&now.nodes);
        self.jobs.clone_from(&now.jobs);
        self.node_sets = Arc::clone(&now.node_sets);
        if let Change::Reset = change {
            self.keys_unique = unique(&self.nodes, |n| &n.name) && unique(&self.jobs, |j| &j.id);
        }
    }
}

/// True when `new` must go whole; a job whose only change is its loss series moving on
/// gets a [`LossUpdate`] instead.
fn job_changed(old: &Job, new: &Job, at: Place, loss_updates: &mut Vec<LossUpdate>) -> bool {
    // Each field once: most jobs of a busy round differ in their loss series alone.
    if !same_but_loss(old, new) {
        return true;
    }
    if old.loss == new.loss {
        return false;
    }
    let (dropped, kept) = loss_shift(&old.loss, &new.loss);
    loss_updates.push(LossUpdate {
        job: at.index,
        held_at: at.held_at,
        dropped,
        kept,
    });
    false
}

/// Every field but the loss series is equal. Destructured, so a field added to
/// [`Job`] cannot be forgotten here.
fn same_but_loss(a: &Job, b: &Job) -> bool {
    let Job {
        id,
        phase,
        submit_time,
        start_time,
        priority,
        utility,
        tasks,
        replicas,
        loss: _,
        metric_rises,
        moves,
        checkpointable,
        labels,
    } = a;
    *id == b.id
        && *phase == b.phase
        && *submit_time == b.submit_time
        && *start_time == b.start_time
        && *priority == b.priority
        && *utility == b.utility
        && *tasks == b.tasks
        && *replicas == b.replicas
        && *metric_rises == b.metric_rises
        && *moves == b.moves
        && *checkpointable == b.checkpointable
        && *labels == b.labels
}

/// The fewest oldest samples to drop from `old` so that what is left starts `new`, and
/// how many of `new` that leaves in place. Dropping everything always works.
fn loss_shift(old: &[LossSample], new: &[LossSample]) -> (u32, usize) {
    let dropped = (0..=old.len())
        .find(|&d| {
            let rest = &old[d..];
            rest.len() <= new.len() && rest == &new[..rest.len()]
        })
        .unwrap_or(old.len());
    (dropped as u32, old.len() - dropped)
}

/// The appended items' keys are distinct and none is held (few arrive per round, so the
/// set is small).
fn appended_keys_are_new<T>(held: &[T], appended: &[T], key: impl Fn(&T) -> &str) -> bool {
    if appended.is_empty() {
        return true;
    }
    let new: FxHashSet<&str> = appended.iter().map(&key).collect();
    new.len() == appended.len() && !held.iter().any(|item| new.contains(key(item)))
}

fn unique<T>(items: &[T], key: impl Fn(&T) -> &str) -> bool {
    items.iter().map(key).collect::<FxHashSet<_>>().len() == items.len()
}

/// Where an item present in both lists sits in each.
#[derive(Clone, Copy)]
struct Place {
    /// Position in the held list once removals are applied.
    held_at: usize,
    /// Index in the current list.
    index: usize,
}

/// Walks the held and current lists side by side. `changed(old, new, place)` says
/// whether an item present in both must go whole; it is asked only when the two are
/// different `Arc`s. `None` when the order rule cannot
/// express `now`.
fn diff<T>(
    held: &[Arc<T>],
    now: &[Arc<T>],
    key: impl Fn(&Arc<T>) -> &str,
    mut changed: impl FnMut(&Arc<T>, &Arc<T>, Place) -> bool,
) -> Option<ListDelta> {
    // The same `Arc` is the same item, unchanged: most of a big snapshot is, and
    // comparing its key and fields would cost string comparisons per item and round.
    let same_key = |a: &Arc<T>, b: &Arc<T>| Arc::ptr_eq(a, b) || key(a) == key(b);
    let mut changed = |a: &Arc<T>, b: &Arc<T>, place| !Arc::ptr_eq(a, b) && changed(a, b, place);
    let mut delta = ListDelta {
        first_new: now.len(),
        ..ListDelta::default()
    };
    if held.len() <= now.len()
        && held.iter().zip(now).all(|(a, b)| same_key(a, b))
        && appended_keys_are_new(held, &now[held.len()..], &key)
    {
        // The common rounds: nothing left and whatever arrived came last, so no set of
        // keys is needed.
        delta.first_new = held.len();
        for (index, (old, item)) in held.iter().zip(now).enumerate() {
            let place = Place {
                held_at: index,
                index,
            };
            if changed(old, item, place) {
                delta.changed.push(index);
            }
        }
        return Some(delta);
    }
    let present: FxHashSet<&str> = now.iter().map(&key).collect();
    if present.len() != now.len() {
        // Two items under one key: the guest could not tell which one a change means.
        return None;
    }
    let mut cursor = 0;
    let mut position = 0;
    for (index, item) in now.iter().enumerate() {
        while cursor < held.len() && !present.contains(key(&held[cursor])) {
            delta.removed.push(key(&held[cursor]).to_string());
            cursor += 1;
        }
        match held.get(cursor) {
            Some(old) if same_key(old, item) => {
                let place = Place {
                    held_at: position,
                    index,
                };
                if changed(old, item, place) {
                    delta.changed.push(index);
                }
                cursor += 1;
                position += 1;
            }
            Some(_) => return None,
            None => {
                delta.first_new = index;
                break;
            }
        }
    }
    for old in &held[cursor..] {
        if present.contains(key(old)) {
            return None;
        }
        delta.removed.push(key(old).to_string());
    }
    Some(delta)
}
