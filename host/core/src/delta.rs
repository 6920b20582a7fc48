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
    /// Send only what differs (boxed: a `Reset` carries nothing).
    Delta(Box<SnapshotDelta>),
}

/// The difference between the held snapshot and the current one.
#[derive(Debug)]
pub struct SnapshotDelta {
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
    /// Indices in the current list of the items equal to the held ones in what the
    /// instance is sent, but not the same `Arc` (the source rebuilt them, or only their
    /// loss series moved on): the held copy takes them, so they are not compared field
    /// by field again next round.
    rebuilt: Vec<usize>,
    /// Positions in the held list of the items that left, increasing.
    removed_at: Vec<usize>,
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
    /// The held nodes' names and jobs' ids, kept from call to call (only what left and
    /// what arrived changes them): a round's diff asks them whether a key is held
    /// instead of hashing every key of the snapshot each time jobs leave.
    node_keys: FxHashSet<String>,
    job_keys: FxHashSet<String>,
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
            node_keys: FxHashSet::default(),
            job_keys: FxHashSet::default(),
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
            &self.node_keys,
            &now.nodes,
            |n| &n.name,
            |old, new, _| old != new,
        );
        let mut loss_updates = Vec::new();
        let jobs = diff(
            &self.jobs,
            &self.job_keys,
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
        Change::Delta(Box::new(SnapshotDelta {
            nodes,
            jobs,
            loss_updates,
            node_sets_changed: sets_differ || positions_moved,
        }))
    }

    /// Records that the instance applied `change` and now holds `now`.
    ///
    /// Either way the instance now holds what `now` says, in `now`'s order, so the held
    /// copy becomes `now`'s `Arc`s. Taking them (rather than keeping a held item equal
    /// to the current one by value) matters: an item the source rebuilt unchanged would
    /// otherwise be compared field by field in every later round.
    ///
    /// After a delta only what it names is taken (a reset takes every `Arc`): cloning
    /// every `Arc` of a long queue each round, and dropping the previous ones, would
    /// make every round cost as much as the queue is long.
    pub fn commit(&mut self, now: &Snapshot, change: &Change) {
        self.node_sets = Arc::clone(&now.node_sets);
        match change {
            Change::Reset => {
                self.nodes.clone_from(&now.nodes);
                self.jobs.clone_from(&now.jobs);
                self.node_keys = keys(&self.nodes, |n| &n.name);
                self.job_keys = keys(&self.jobs, |j| &j.id);
                self.keys_unique = self.node_keys.len() == self.nodes.len()
                    && self.job_keys.len() == self.jobs.len();
            }
            Change::Delta(delta) => {
                follow(&mut self.nodes, &delta.nodes, &now.nodes);
                follow(&mut self.jobs, &delta.jobs, &now.jobs);
                follow_keys(&mut self.node_keys, &delta.nodes, &now.nodes, |n| &n.name);
                follow_keys(&mut self.job_keys, &delta.jobs, &now.jobs, |j| &j.id);
            }
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
/// [`Job`] cannot be forgotten here. The tasks are first compared by identity: a source
/// that only moved a job's loss series on shares them with the job's previous view.
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
        && (Arc::ptr_eq(tasks, &b.tasks) || *tasks == b.tasks)
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
fn appended_keys_are_new<T>(
    held_keys: &FxHashSet<String>,
    appended: &[T],
    key: impl Fn(&T) -> &str,
) -> bool {
    if appended.is_empty() {
        return true;
    }
    let new: FxHashSet<&str> = appended.iter().map(&key).collect();
    new.len() == appended.len() && !new.iter().any(|k| held_keys.contains(*k))
}

/// The keys of `items` (fewer than `items` when two share one).
fn keys<T>(items: &[T], key: impl Fn(&T) -> &str) -> FxHashSet<String> {
    items.iter().map(|item| key(item).to_string()).collect()
}

/// Brings `held` (the list `delta` was made against) to `now`: the items that left go,
/// the changed and rebuilt ones are taken, the new ones appended. Every other item is
/// the same `Arc` in both.
fn follow<T>(held: &mut Vec<Arc<T>>, delta: &ListDelta, now: &[Arc<T>]) {
    if !delta.removed_at.is_empty() {
        let mut position = 0;
        let mut gone = delta.removed_at.iter().peekable();
        held.retain(|_| {
            let leaves = gone.next_if_eq(&&position).is_some();
            position += 1;
            !leaves
        });
    }
    for &index in delta.changed.iter().chain(&delta.rebuilt) {
        held[index] = Arc::clone(&now[index]);
    }
    held.extend(now[delta.first_new..].iter().cloned());
    debug_assert_eq!(held.len(), now.len());
}

/// Brings the held keys from the list `delta` was made against to `now`'s.
fn follow_keys<T>(
    held_keys: &mut FxHashSet<String>,
    delta: &ListDelta,
    now: &[T],
    key: impl Fn(&T) -> &str,
) {
    for gone in &delta.removed {
        held_keys.remove(gone);
    }
    held_keys.extend(
        now[delta.first_new..]
            .iter()
            .map(|item| key(item).to_string()),
    );
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
/// different `Arc`s. `held_keys` are the keys of `held`, all distinct. `None` when the
/// order rule cannot express `now`.
///
/// A current item with another key than the next held one is either held further on
/// (the held items before it left) or new (it and every item after it must be new):
/// `held_keys` tells which, so a round hashes only the keys where the lists part, not
/// every key of the snapshot. An item held earlier than where the walk is (a reorder, a
/// duplicate) sends the walk off the end of the held list: `None`.
fn diff<T>(
    held: &[Arc<T>],
    held_keys: &FxHashSet<String>,
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
    let mut cursor = 0;
    for (index, item) in now.iter().enumerate() {
        if held.get(cursor).is_none_or(|old| !same_key(old, item)) {
            if !held_keys.contains(key(item)) {
                delta.first_new = index;
                break;
            }
            while cursor < held.len() && !same_key(&held[cursor], item) {
                delta.removed.push(key(&held[cursor]).to_string());
                delta.removed_at.push(cursor);
                cursor += 1;
            }
            if cursor == held.len() {
                return None;
            }
        }
        let place = Place {
            held_at: cursor - delta.removed.len(),
            index,
        };
        if changed(&held[cursor], item, place) {
            delta.changed.push(index);
        } else if !Arc::ptr_eq(&held[cursor], item) {
            delta.rebuilt.push(index);
        }
        cursor += 1;
    }
    for (at, old) in held.iter().enumerate().skip(cursor) {
        delta.removed.push(key(old).to_string());
        delta.removed_at.push(at);
    }
    appended_keys_are_new(held_keys, &now[delta.first_new..], &key).then_some(delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Item = Arc<(&'static str, u32)>;

    fn items(list: &[(&'static str, u32)]) -> Vec<Item> {
        list.iter().map(|&item| Arc::new(item)).collect()
    }

    fn diff_of(held: &[Item], now: &[Item]) -> Option<ListDelta> {
        diff(
            held,
            &keys(held, |i| i.0),
            now,
            |i| i.0,
            |a, b, _| a.1 != b.1,
        )
    }

    /// What the guest does with a delta: removals, then the upserts in order.
    fn applied(held: &[Item], now: &[Item], delta: &ListDelta) -> Vec<(&'static str, u32)> {
        let mut out: Vec<(&str, u32)> = held
            .iter()
            .filter(|i| !delta.removed.iter().any(|k| k == i.0))
            .map(|i| **i)
            .collect();
        for item in delta.upserted(now) {
            match out.iter_mut().find(|o| o.0 == item.0) {
                Some(held) => *held = **item,
                None => out.push(**item),
            }
        }
        out
    }

    /// Every held list of distinct keys from `a b c` (in any order) against every current
    /// list of up to four keys from `a b c d e` with a changed value or not: a delta comes
    /// exactly when the order rule can express the current list, and applied, it gives
    /// the current list.
    #[test]
    fn a_delta_comes_exactly_when_the_order_rule_can_say_the_change_and_applies_to_it() {
        let alphabet = ["a", "b", "c", "d", "e"];
        let mut helds: Vec<Vec<&str>> = vec![vec![]];
        for _ in 0..3 {
            let longer: Vec<Vec<&str>> = helds
                .iter()
                .flat_map(|h| {
                    alphabet[..3]
                        .iter()
                        .filter(|k| !h.contains(k))
                        .map(|k| [h.clone(), vec![*k]].concat())
                        .collect::<Vec<_>>()
                })
                .collect();
            helds.extend(longer);
        }
        helds.sort();
        helds.dedup();
        let mut nows: Vec<Vec<(&str, u32)>> = vec![vec![]];
        for _ in 0..4 {
            let longer: Vec<Vec<(&str, u32)>> = nows
                .iter()
                .filter(|n| n.len() == nows.last().unwrap().len())
                .flat_map(|n| {
                    alphabet
                        .iter()
                        .flat_map(move |k| [0, 1, 2].map(|v| [n.clone(), vec![(*k, v)]].concat()))
                })
                .collect();
            nows.extend(longer);
        }
        let mut checked = 0;
        for held_keys in &helds {
            let held = items(&held_keys.iter().map(|k| (*k, 0)).collect::<Vec<_>>());
            for now_list in &nows {
                // 0: the held `Arc` itself (a fresh one if not held); 1: changed; 2: an
                // equal item in a fresh `Arc` (rebuilt).
                let now: Vec<Item> = now_list
                    .iter()
                    .map(|&(k, v)| match held.iter().find(|h| h.0 == k) {
                        Some(h) if v == 0 => Arc::clone(h),
                        _ => Arc::new((k, v % 2)),
                    })
                    .collect();
                let now_list: &Vec<(&str, u32)> = &now.iter().map(|i| **i).collect();
                let unique = keys(&now, |i| i.0).len() == now.len();
                let kept: Vec<&str> = now_list
                    .iter()
                    .map(|i| i.0)
                    .filter(|k| held_keys.contains(k))
                    .collect();
                let held_order: Vec<&str> = held_keys
                    .iter()
                    .copied()
                    .filter(|k| kept.contains(k))
                    .collect();
                let new_last = now_list[..kept.len()]
                    .iter()
                    .all(|i| held_keys.contains(&i.0));
                let expressible = unique && kept == held_order && new_last;
                let delta = diff_of(&held, &now);
                assert_eq!(
                    delta.is_some(),
                    expressible,
                    "{held_keys:?} -> {now_list:?}"
                );
                if let Some(delta) = delta {
                    assert_eq!(&applied(&held, &now, &delta), now_list, "{held_keys:?}");
                    let mut followed = held.clone();
                    follow(&mut followed, &delta, &now);
                    assert!(
                        followed.iter().zip(&now).all(|(a, b)| Arc::ptr_eq(a, b))
                            && followed.len() == now.len(),
                        "{held_keys:?} -> {now_list:?}"
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn the_held_keys_follow_each_delta() {
        let held = items(&[("a", 0), ("b", 0), ("c", 0)]);
        let now = items(&[("a", 0), ("c", 1), ("d", 0), ("e", 0)]);
        let delta = diff_of(&held, &now).unwrap();
        assert_eq!(delta.removed, ["b"]);
        assert_eq!(delta.changed, [1]);
        assert_eq!(delta.first_new, 2);
        let mut held_keys = keys(&held, |i| i.0);
        follow_keys(&mut held_keys, &delta, &now, |i| i.0);
        assert_eq!(held_keys, keys(&now, |i| i.0));
    }
}
