//! Which jobs a kept instance's call changed, and values kept per job that follow them.
//!
//! A policy whose instance the host keeps gets only what changed ([`crate::incremental`]
//! applies it), yet sees a whole snapshot: a queue of thousands of jobs, of which a
//! round changes a few. [`with_applied`] notes which jobs the host's change named before
//! the policy decides; [`Follow`] keeps a value per job in the snapshot's order and
//! brings it to the next call's snapshot from those names alone, telling the policy
//! which jobs are new or changed. What a policy derives from a job (the resources its
//! pending tasks ask for, whether it may share a node) then costs a round only for the
//! jobs that changed. This module only observes the change; applying it is
//! [`crate::incremental`]'s business.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::shown::{id_hash, match_previous};
use crate::{Job, Snapshot, SnapshotDelta};

/// The jobs one call's change named, in the order the host's change gives them.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// Hashes ([`id_hash`]) of the ids of the jobs that left, in the previous
    /// snapshot's order.
    left: Vec<u64>,
    /// Hashes of the ids of the jobs that are new or changed (in anything but their
    /// loss series): held ones in held order, then new ones.
    upserted: Vec<u64>,
    /// The nodes or their eligibility sets changed.
    pub nodes_changed: bool,
}

thread_local! {
    /// The changes of the call being decided.
    static NOTED: RefCell<Option<Rc<Changes>>> = const { RefCell::new(None) };
    /// Calls of this instance so far.
    static CALLS: Cell<u64> = const { Cell::new(0) };
    /// The number of the call being decided.
    static DECIDING: Cell<Option<u64>> = const { Cell::new(None) };
}

/// [`crate::incremental::with_applied`], with the jobs `change` names noted for
/// [`current`] while `decide` runs. A reset names no jobs: everything is new.
pub fn with_applied<R>(
    change: SnapshotDelta,
    decide: impl FnOnce(&Snapshot) -> R,
) -> Result<R, String> {
    let call = CALLS.with(|calls| {
        calls.set(calls.get() + 1);
        calls.get()
    });
    let noted = (!change.reset).then(|| {
        Rc::new(Changes {
            left: change.removed_jobs.iter().map(|id| id_hash(id)).collect(),
            upserted: change.jobs.iter().map(|j| id_hash(&j.id)).collect(),
            nodes_changed: !change.nodes.is_empty()
                || !change.removed_nodes.is_empty()
                || change.node_sets.is_some(),
        })
    });
    crate::incremental::with_applied(change, |snapshot| {
        NOTED.with(|n| *n.borrow_mut() = noted);
        DECIDING.with(|d| d.set(Some(call)));
        let decided = decide(snapshot);
        DECIDING.with(|d| d.set(None));
        NOTED.with(|n| *n.borrow_mut() = None);
        decided
    })
}

/// The changes of the call being decided; `None` outside such a call, for a reset, and
/// for a policy handed a whole snapshot, where nothing is known of what changed.
pub fn current() -> Option<Rc<Changes>> {
    NOTED.with(|n| n.borrow().clone())
}

/// True while a call made through [`with_applied`] is being decided: values a policy
/// follows now ([`Follow`]) can be brought to the next call's snapshot from its changes.
/// False for a policy called directly on a whole snapshot (a native build, a unit
/// test), where a [`Follow`] would match every job by its id at every call.
pub fn deciding_kept_call() -> bool {
    DECIDING.with(Cell::get).is_some()
}

/// What [`Follow::follow`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Followed {
    /// Positions, ascending, of the jobs that are new or changed, whose value was handed
    /// to the update: everything a policy derived from any other job still holds.
    pub touched: Vec<usize>,
    /// Every job was matched anew by its id (no changes known, or they did not fit
    /// what was kept): every position is in `touched`.
    pub whole: bool,
}

/// A value per job of the snapshot, in its order, carried from call to call.
///
/// On a kept instance's next call, [`Follow::follow`] applies the call's [`Changes`] as
/// the SDK applies the host's change to the snapshot: the jobs that left are dropped,
/// and the new and changed ones are handed to the caller, which never looks at the
/// others. Without changes it matches every job by its id, as a fresh instance does.
#[derive(Clone, Debug)]
pub struct Follow<T> {
    /// [`id_hash`] of each job's id.
    hashes: Vec<u64>,
    values: Vec<T>,
    /// The call that last followed, when it was one of this instance.
    call: Option<u64>,
}

impl<T> Default for Follow<T> {
    fn default() -> Self {
        Self {
            hashes: Vec::new(),
            values: Vec::new(),
            call: None,
        }
    }
}

impl<T: Default> Follow<T> {
    /// Values for `jobs`, which a fresh instance matched to the ones it read (so no
    /// change is applied to them: the next call matches by id).
    pub fn from_values(jobs: &[Job], values: Vec<T>) -> Self {
        assert_eq!(jobs.len(), values.len(), "one value per job");
        Self {
            hashes: jobs.iter().map(|j| id_hash(&j.id)).collect(),
            values,
            call: None,
        }
    }

    /// Values kept under the hashes ([`id_hash`]) of the ids they belong to, matched by
    /// id at the next follow (a state read from a blob).
    pub fn unmatched(values: Vec<(u64, T)>) -> Self {
        let (hashes, values) = values.into_iter().unzip();
        Self {
            hashes,
            values,
            call: None,
        }
    }

    /// The values, in the snapshot's order.
    pub fn values(&self) -> &[T] {
        &self.values
    }

    /// The values, in the snapshot's order, to change in place.
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
    }

    /// How many jobs are followed.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no job is followed.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Brings the values to `snapshot`. With the changes of the call right after the
    /// one that last followed, only the named jobs are looked at: the ones that left
    /// go to `leave`, and each new or changed one gets `update(position, job, its
    /// value if it had one)`. Otherwise (a fresh start, a reset, a call missed) every
    /// job is matched by its id and updated, and the unmatched values leave.
    pub fn follow(
        &mut self,
        snapshot: &Snapshot,
        mut update: impl FnMut(usize, &Job, Option<T>) -> T,
        mut leave: impl FnMut(T),
    ) -> Followed {
        let call = DECIDING.with(Cell::get);
        let next = matches!((self.call, call), (Some(last), Some(now)) if now == last + 1);
        self.call = call;
        if let Some(changes) = current().filter(|_| next)
            && let Some(touched) = self.apply(&changes, snapshot, &mut update, &mut leave)
        {
            return Followed {
                touched,
                whole: false,
            };
        }
        self.rematch(snapshot, &mut update, &mut leave);
        Followed {
            touched: (0..self.values.len()).collect(),
            whole: true,
        }
    }

    /// Applies `changes` as [`crate::incremental`] applies the host's change: removals
    /// in held order, then each upsert replacing the next held job with its id, or
    /// appended when none follows. `None` when they do not fit what is kept; the values
    /// are then left to a rematch, which redoes whatever was done.
    fn apply(
        &mut self,
        changes: &Changes,
        snapshot: &Snapshot,
        update: &mut impl FnMut(usize, &Job, Option<T>) -> T,
        leave: &mut impl FnMut(T),
    ) -> Option<Vec<usize>> {
        if !changes.left.is_empty() {
            let mut gone = changes.left.iter().peekable();
            let keep: Vec<bool> = self
                .hashes
                .iter()
                .map(|h| {
                    let leaves = gone.peek() == Some(&h);
                    if leaves {
                        gone.next();
                    }
                    !leaves
                })
                .collect();
            if gone.next().is_some() {
                return None;
            }
            let mut flags = keep.iter();
            self.hashes
                .retain(|_| *flags.next().expect("one flag each"));
            let values = std::mem::take(&mut self.values);
            for (value, kept) in values.into_iter().zip(&keep) {
                if *kept {
                    self.values.push(value);
                } else {
                    leave(value);
                }
            }
        }
        let mut touched = Vec::with_capacity(changes.upserted.len());
        let mut cursor = 0;
        for &hash in &changes.upserted {
            while cursor < self.hashes.len() && self.hashes[cursor] != hash {
                cursor += 1;
            }
            let job = snapshot.jobs.get(cursor)?;
            if id_hash(&job.id) != hash {
                return None;
            }
            if cursor < self.hashes.len() {
                let old = std::mem::take(&mut self.values[cursor]);
                self.values[cursor] = update(cursor, job, Some(old));
            } else {
                let value = update(cursor, job, None);
                self.hashes.push(hash);
                self.values.push(value);
            }
            touched.push(cursor);
            cursor += 1;
        }
        let last_matches = match (self.hashes.last(), snapshot.jobs.last()) {
            (Some(&h), Some(job)) => h == id_hash(&job.id),
            (None, None) => true,
            _ => false,
        };
        (self.hashes.len() == snapshot.jobs.len() && last_matches).then_some(touched)
    }

    /// Matches every job of `snapshot` by its id to the kept values.
    fn rematch(
        &mut self,
        snapshot: &Snapshot,
        update: &mut impl FnMut(usize, &Job, Option<T>) -> T,
        leave: &mut impl FnMut(T),
    ) {
        let hashes = crate::shown::id_hashes(snapshot).to_vec();
        let keys: Vec<&u64> = hashes.iter().collect();
        let previous = match_previous(&self.hashes, &keys, |h| h);
        let mut old: Vec<Option<T>> = std::mem::take(&mut self.values)
            .into_iter()
            .map(Some)
            .collect();
        self.values = snapshot
            .jobs
            .iter()
            .zip(&previous)
            .enumerate()
            .map(|(at, (job, found))| update(at, job, found.and_then(|i| old[i].take())))
            .collect();
        old.into_iter().flatten().for_each(leave);
        self.hashes = hashes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{JobBuilder, change_between, job, node, snapshot, tick_delta};

    /// Each value remembers its job's id and how many times it was updated.
    type Seen = (String, u32);

    /// Follows `follow` to `snapshot` through a kept instance's call with the change
    /// from `before`; returns what it did and the ids that left.
    fn step(
        follow: &mut Follow<Seen>,
        before: &Snapshot,
        after: &Snapshot,
    ) -> (Followed, Vec<String>) {
        let mut left = Vec::new();
        let followed = with_applied(change_between(before, after), |s| {
            follow.follow(
                s,
                |_, j, old| {
                    let updates = old.map_or(0, |(_, n)| n);
                    (j.id.clone(), updates + 1)
                },
                |(id, _)| left.push(id),
            )
        })
        .unwrap();
        (followed, left)
    }

    fn ids(follow: &Follow<Seen>) -> Vec<(&str, u32)> {
        follow
            .values()
            .iter()
            .map(|(id, n)| (id.as_str(), *n))
            .collect()
    }

    fn start(jobs: Vec<Job>) -> (Follow<Seen>, Snapshot) {
        let first = snapshot(0.0, vec![node("n", 1000)], jobs);
        let mut follow = Follow::default();
        let followed = with_applied(tick_delta(0.0, true, &first.nodes, &first.jobs), |s| {
            follow.follow(s, |_, j, _| (j.id.clone(), 1), |_| {})
        })
        .unwrap();
        assert!(followed.whole, "a reset names nothing: every job is new");
        (follow, first)
    }

    #[test]
    fn only_the_jobs_a_change_names_are_updated_and_the_ones_that_left_are_dropped() {
        let (mut follow, first) = start(vec![job("a"), job("b"), job("c"), job("d")]);
        let mut then = first.clone();
        then.jobs.remove(1);
        then.jobs[1] = job("c").running_on("n");
        then.jobs.push(job("e"));
        let (followed, left) = step(&mut follow, &first, &then);
        assert_eq!(followed.touched, [1, 3]);
        assert!(!followed.whole);
        assert_eq!(left, ["b"]);
        assert_eq!(ids(&follow), [("a", 1), ("c", 2), ("d", 1), ("e", 1)]);
        // A tick names nothing.
        let (followed, left) = step(&mut follow, &then, &then.clone());
        assert_eq!((followed.touched.len(), left.len()), (0, 0));
    }

    #[test]
    fn a_call_the_follower_missed_or_a_whole_snapshot_matches_every_job_by_id() {
        let (mut follow, first) = start(vec![job("a"), job("b")]);
        let mut then = first.clone();
        then.jobs.remove(0);
        // A call in between that did not follow: its change is not the follower's.
        with_applied(change_between(&first, &then), |_| ()).unwrap();
        let mut later = then.clone();
        later.jobs.push(job("c"));
        let (followed, left) = step(&mut follow, &then, &later);
        assert!(followed.whole);
        assert_eq!(followed.touched, [0, 1]);
        assert_eq!(left, ["a"]);
        assert_eq!(ids(&follow), [("b", 2), ("c", 1)]);
        // Outside a kept instance's call nothing is known of what changed.
        let followed = follow.follow(&later, |_, j, old| old.unwrap_or((j.id.clone(), 0)), |_| {});
        assert!(followed.whole);
        assert_eq!(ids(&follow), [("b", 2), ("c", 1)]);
    }

    #[test]
    fn changes_that_do_not_fit_what_is_kept_fall_back_to_matching_by_id() {
        let (mut follow, first) = start(vec![job("a"), job("b"), job("c")]);
        // The follower is told of a job leaving that it never held.
        follow.hashes[1] = id_hash("zz");
        let mut then = first.clone();
        then.jobs.remove(1);
        let (followed, left) = step(&mut follow, &first, &then);
        assert!(followed.whole);
        assert_eq!(ids(&follow), [("a", 2), ("c", 2)]);
        assert_eq!(left, ["b"], "the value held under the wrong id leaves");
    }
}
