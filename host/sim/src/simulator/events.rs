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
    /// The job's rate changes by itself (a measured job's epoch ends).
    RateChange,
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

    /// Drops the events of jobs that moved on, once they could be most of the queue.
    /// A long job's completion lies far ahead, so without this every re-share of its
    /// node would leave a stale pair of events in the heap until then, and the heap
    /// would grow with history. Called after pushes; amortised, a push costs a few more
    /// comparisons. Pop order is unchanged: `(time, seq)` orders events totally.
    pub(crate) fn drop_stale(&mut self, live_jobs: usize, valid: impl Fn(usize, u64) -> bool) {
        // At most four valid events per job (completion, evaluation, restart end, rate
        // change).
        if self.heap.len() <= 5 * live_jobs + 1024 {
            return;
        }
        self.heap.retain(|Reverse(e)| valid(e.job, e.version));
        self.heap.shrink_to(2 * self.heap.len());
    }

    /// Time of the earliest event still valid, dropping stale ones on the way.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_events_go_once_they_outnumber_the_live_ones_and_the_rest_keep_their_order() {
        let mut queue = EventQueue::default();
        // Job 0 re-shared 2,000 times: only its last pair of events is current.
        for version in 0..2_000 {
            queue.push(1e6 + version as f64, 0, version, EventKind::Completion);
            queue.push(10.0 + version as f64, 0, version, EventKind::Evaluation);
        }
        queue.push(5.0, 1, 0, EventKind::Completion);
        let valid = |job: usize, version: u64| job == 1 || version == 1_999;
        queue.drop_stale(2, valid);
        assert_eq!(queue.heap.len(), 3);
        assert_eq!(
            queue.pop_due(f64::INFINITY, valid),
            Some((1, EventKind::Completion))
        );
        assert_eq!(
            queue.pop_due(f64::INFINITY, valid),
            Some((0, EventKind::Evaluation))
        );
        assert_eq!(
            queue.pop_due(f64::INFINITY, valid),
            Some((0, EventKind::Completion))
        );
        assert_eq!(queue.pop_due(f64::INFINITY, valid), None);
    }

    #[test]
    fn a_queue_of_mostly_live_events_is_left_alone() {
        let mut queue = EventQueue::default();
        for job in 0..100 {
            queue.push(job as f64, job, 0, EventKind::Completion);
            queue.push(job as f64, job, 1, EventKind::Completion);
        }
        queue.drop_stale(100, |_, version| version == 1);
        assert_eq!(
            queue.heap.len(),
            200,
            "below the threshold nothing is dropped"
        );
    }
}
