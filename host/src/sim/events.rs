//! The simulator's event queue: future completions, evaluations and restart ends, in
//! time order. Arrivals are not queued (jobs are sorted by submission time instead).
//!
//! An event carries the version of its job at the time it was computed; when a job's
//! rate changes its version moves on, and events with an old version are dropped when
//! they come up instead of being searched for and removed.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// What comes due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// The job's work is done.
    Completion,
    /// The job reports an evaluation sample.
    Evaluation,
    /// The job's checkpoint/restore is over.
    RestartDone,
}

#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    seq: u64,
    job: usize,
    version: u64,
    kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// By time, then by insertion order, so equal times come out deterministically.
    fn cmp(&self, other: &Self) -> Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.seq.cmp(&other.seq))
    }
}

/// Min-heap of future events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Reverse<Event>>,
    seq: u64,
}

impl EventQueue {
    /// Queues `kind` for `job` (at `version`) at `time`.
    pub(crate) fn push(&mut self, time: f64, job: usize, version: u64, kind: EventKind) {
        self.seq += 1;
        self.heap.push(Reverse(Event {
            time,
            seq: self.seq,
            job,
            version,
            kind,
        }));
    }

    /// Time of the earliest event still valid, dropping stale ones on the way.
    /// Drops the events of jobs that moved on, once they could be most of the queue.
    /// A long job's completion lies far ahead, so without this every re-share of its
    /// node would leave a stale pair of events in the heap until then (42 MB of them
    /// holding 25,000 jobs). Called after pushes; amortised, a push costs a few more
    /// comparisons. Pop order is unchanged: `(time, seq)` orders events totally.
    pub(crate) fn drop_stale(&mut self, live_jobs: usize, valid: impl Fn(usize, u64) -> bool) {
        // At most three valid events per job (completion, evaluation, restart end).
        if self.heap.len() <= 4 * live_jobs + 1024 {
            return;
        }
        self.heap.retain(|Reverse(e)| valid(e.job, e.version));
        self.heap.shrink_to(2 * self.heap.len());
    }

    pub(crate) fn peek_valid(&mut self, valid: impl Fn(usize, u64) -> bool) -> Option<f64> {
        while let Some(Reverse(e)) = self.heap.peek() {
            if valid(e.job, e.version) {
                return Some(e.time);
            }
            self.heap.pop();
        }
        None
    }

    /// The next valid event due at or before `now`.
    pub(crate) fn pop_due(
        &mut self,
        now: f64,
        valid: impl Fn(usize, u64) -> bool,
    ) -> Option<(usize, EventKind)> {
        while let Some(Reverse(e)) = self.heap.peek().copied() {
            if !valid(e.job, e.version) {
                self.heap.pop();
                continue;
            }
            if e.time > now {
                return None;
            }
            self.heap.pop();
            return Some((e.job, e.kind));
        }
        None
    }
}
