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

/// A job's index in the simulator, as an event holds it: a queue of a few events per
/// active job is one of the simulator's largest tables, and four bytes index any job
/// list that fits in memory.
type JobIndex = u32;

#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    seq: u64,
    version: u64,
    job: JobIndex,
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

/// Queue length below which stale events are never looked for.
const STALE_FLOOR: usize = 1024;

/// Min-heap of future events.
#[derive(Debug)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Reverse<Event>>,
    seq: u64,
    /// Length above which [`EventQueue::drop_stale`] looks for stale events: half as
    /// much again as were valid when it last did.
    limit: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
            limit: STALE_FLOOR,
        }
    }
}

impl EventQueue {
    /// Queues `kind` for `job` (at `version`) at `time`.
    pub(crate) fn push(&mut self, time: f64, job: usize, version: u64, kind: EventKind) {
        self.seq += 1;
        self.heap.push(Reverse(Event {
            time,
            seq: self.seq,
            version,
            job: JobIndex::try_from(job).expect("fewer than 2^32 jobs"),
            kind,
        }));
    }

    /// Drops the events of jobs that moved on, once they are a third of the queue.
    /// A long job's completion lies far ahead, so without this every re-share of its
    /// node (and every evaluation it reports) would leave a stale event in the heap
    /// until then, and the heap would grow with history. Called after pushes. The bound
    /// follows what the last pass found valid, so the queue stays within half again the
    /// events that matter, and a pass comes only after that many pushes: amortised, a
    /// push costs a few more comparisons. Pop order is unchanged: `(time, seq)` orders
    /// events totally.
    pub(crate) fn drop_stale(&mut self, valid: impl Fn(usize, u64) -> bool) {
        if self.heap.len() <= self.limit {
            return;
        }
        self.heap
            .retain(|Reverse(e)| valid(e.job as usize, e.version));
        let live = self.heap.len();
        self.limit = (live + live / 2).max(STALE_FLOOR);
        self.heap.shrink_to(self.limit + 1);
    }

    /// Time of the earliest event still valid, dropping stale ones on the way.
    pub(crate) fn peek_valid(&mut self, valid: impl Fn(usize, u64) -> bool) -> Option<f64> {
        while let Some(Reverse(e)) = self.heap.peek() {
            if valid(e.job as usize, e.version) {
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
            if !valid(e.job as usize, e.version) {
                self.heap.pop();
                continue;
            }
            if e.time > now {
                return None;
            }
            self.heap.pop();
            return Some((e.job as usize, e.kind));
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
        queue.drop_stale(valid);
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
        queue.drop_stale(|_, version| version == 1);
        assert_eq!(
            queue.heap.len(),
            200,
            "below the threshold nothing is dropped"
        );
    }

    #[test]
    fn the_queue_never_holds_more_than_half_again_the_valid_events_once_they_are_many() {
        let mut queue = EventQueue::default();
        let jobs = 4_000;
        // Every job's current event, then each job re-shared over and over: every
        // re-share leaves its previous event stale, as an evaluation does.
        let mut version = vec![0u64; jobs];
        for job in 0..jobs {
            queue.push(1e6, job, 0, EventKind::Completion);
        }
        for round in 0..20 {
            for job in 0..jobs {
                version[job] += 1;
                queue.push(1e6 + round as f64, job, version[job], EventKind::Completion);
                queue.drop_stale(|j, v| version[j] == v);
                assert!(
                    queue.heap.len() <= jobs + jobs / 2 + 1,
                    "{} events queued for {jobs} valid ones",
                    queue.heap.len()
                );
            }
        }
        assert!(queue.heap.capacity() <= 2 * (jobs + jobs / 2 + 1));
        let mut popped = 0;
        while queue
            .pop_due(f64::INFINITY, |j, v| version[j] == v)
            .is_some()
        {
            popped += 1;
        }
        assert_eq!(popped, jobs, "every job's current event, once");
    }
}
