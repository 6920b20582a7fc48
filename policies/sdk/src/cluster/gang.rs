//! The shape of a gang of identical tasks ([`GangShape`]), and the shapes a ledger
//! remembers as not fitting, or fitting, until its room changes (`Misses`). It compares
//! shapes only; packing them is the ledger's.

use super::resources::{ResourcesExt as _, same};
use crate::{Job, Resources, Task, TaskPhase};

/// Gangs of identical tasks that did not fit since the ledger last gained room.
///
/// For a gang of `count` tasks that all ask for the same `requests` and may run on the
/// same set, the greedy packing of [`Ledger::pack_gang`](super::Ledger::pack_gang) fills each node with as many as
/// fit there, so it succeeds exactly when the nodes' counts add up to `count`. Each
/// node's count only falls as the ledger is charged, and falls for a larger request, so
/// once such a gang failed, a gang of at least as many tasks, each asking at least as
/// much of the same set, fails too until something is released: the answer without the
/// search is the search's answer. Gangs whose tasks differ are not remembered (the
/// greedy packing is not monotone for them).
///
/// The converse holds for gangs that did fit ([`Ledger::could_pack`](super::Ledger::could_pack) asks without
/// charging): a gang needing at most what a fitting one needs fits too, until the
/// ledger is charged.
#[derive(Clone, Debug, Default)]
pub(super) struct Misses {
    shapes: Vec<GangShape>,
    pub(super) fits: Vec<GangShape>,
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
    /// The shape of `job`'s pending tasks ([`pending_tasks`](super::pending_tasks)) when they are all alike
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
    pub(super) fn of(tasks: &[&Task]) -> Option<Self> {
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
    pub(super) fn known(&self, shape: &GangShape) -> bool {
        self.shapes
            .iter()
            .any(|missed| shape.needs_at_least(missed))
    }

    pub(super) fn note(&mut self, shape: GangShape) {
        // A shape that needs at least what a kept one needs adds nothing; keeping the
        // list to shapes no other covers bounds it by the distinct requests in a round.
        if !self.known(&shape) {
            self.shapes.retain(|kept| !kept.needs_at_least(&shape));
            self.shapes.push(shape);
        }
    }

    pub(super) fn forget(&mut self) {
        self.shapes.clear();
    }

    pub(super) fn known_to_fit(&self, shape: &GangShape) -> bool {
        self.fits.iter().any(|kept| kept.needs_at_least(shape))
    }

    pub(super) fn note_fit(&mut self, shape: GangShape) {
        if !self.known_to_fit(&shape) {
            self.fits.retain(|kept| !shape.needs_at_least(kept));
            self.fits.push(shape);
        }
    }

    /// The ledger lost room: what fitted may not any more.
    pub(super) fn charged(&mut self) {
        self.fits.clear();
    }
}
