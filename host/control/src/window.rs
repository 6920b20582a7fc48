//! The queue window: how the loop keeps deciding when the queue is too long for a
//! policy to decide on within its deadline.
//!
//! A policy's cost grows with what it is shown, and a burst of arrivals (thousands of
//! jobs in one round) can make a call overrun its deadline; the fallback, shown the
//! same queue, can overrun too, and then nothing is placed, round after round. So after
//! a deadline overrun the loop shows policies only the oldest waiting jobs:
//!
//! - the fallback standing in for a policy that overran sees at most
//!   [`FALLBACK_WINDOW`] waiting jobs, so the round still places something;
//! - the overrunning policy sees half of what it overran on in its next round (at least
//!   [`MIN_WINDOW`] jobs), and twice as many after a call that took less than
//!   [`GROW_BELOW`] of the time the overrun took (so a window that fits is not doubled
//!   into one that overruns again), until it sees the whole queue again.
//!
//! Jobs that hold nodes (running or restarting) are always shown, so nothing a policy
//! sees over-commits a node; only waiting jobs beyond the window are left out, with the
//! triggers about them. The record of such a round says how many waiting jobs the
//! policy saw and how many there were ([`QueueWindowRecord`]), and the loop calls again
//! at once while jobs were left out. This module decides what is shown; calling the
//! policies stays in the loop.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::decision_record::QueueWindowRecord;
use switchyard_core::{Job, JobPhase, Snapshot, Trigger};

/// Waiting jobs the fallback sees when it stands in for a policy that overran its
/// deadline: few enough that a call cannot overrun on them, enough to fill a cluster's
/// free room in a few rounds.
pub(crate) const FALLBACK_WINDOW: usize = 64;

/// The fewest waiting jobs a policy that overran is shown in its next rounds.
const MIN_WINDOW: usize = 64;

/// A window grows only after a call that took less than this share of the time the
/// overrunning call took (its deadline): twice the jobs cost about twice the time.
const GROW_BELOW: f64 = 0.4;

/// How many waiting jobs the active policy is shown (none: all of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QueueWindow {
    limit: Option<usize>,
    /// How long the call that overran took: the deadline, as the loop sees it.
    overran_after: Duration,
}

impl QueueWindow {
    /// The most waiting jobs the active policy is shown now.
    pub(crate) fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The active policy overran its deadline, after `took`, on a view with `shown`
    /// waiting jobs: it sees half as many next time.
    pub(crate) fn overran(&mut self, shown: usize, took: Duration) {
        self.limit = Some((shown / 2).max(MIN_WINDOW));
        self.overran_after = took;
    }

    /// The active policy decided in `took` with `waiting` jobs in the queue: when that
    /// leaves room, it sees twice as many next time, and the whole queue once that
    /// covers it.
    pub(crate) fn succeeded(&mut self, waiting: usize, took: Duration) {
        let Some(limit) = self.limit else {
            return;
        };
        if limit >= waiting {
            self.limit = None;
        } else if took.as_secs_f64() < GROW_BELOW * self.overran_after.as_secs_f64() {
            let grown = limit.saturating_mul(2);
            self.limit = (grown < waiting).then_some(grown);
        }
    }
}

/// Waiting jobs in `snapshot`.
pub(crate) fn waiting(snapshot: &Snapshot) -> usize {
    snapshot.jobs.iter().filter(|j| is_waiting(j)).count()
}

fn is_waiting(job: &Job) -> bool {
    job.phase == JobPhase::Waiting
}

/// `snapshot` with only the `limit` oldest waiting jobs (by submission time, then
/// position) and every job that holds nodes, in the snapshot's order, and without the
/// triggers about the jobs left out. `None` when nothing would be left out.
pub(crate) fn windowed(snapshot: &Snapshot, limit: usize) -> Option<(Snapshot, QueueWindowRecord)> {
    let mut queue: Vec<(f64, usize)> = snapshot
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| is_waiting(j))
        .map(|(i, j)| (j.submit_time, i))
        .collect();
    let waiting = queue.len();
    if waiting <= limit {
        return None;
    }
    queue.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut shown = vec![true; snapshot.jobs.len()];
    for &(_, i) in &queue[limit..] {
        shown[i] = false;
    }
    let left_out: HashSet<&str> = queue[limit..]
        .iter()
        .map(|&(_, i)| snapshot.jobs[i].id.as_str())
        .collect();
    let jobs: Vec<Arc<Job>> = snapshot
        .jobs
        .iter()
        .zip(&shown)
        .filter(|(_, s)| **s)
        .map(|(j, _)| Arc::clone(j))
        .collect();
    let mut triggers: Vec<Trigger> = snapshot
        .triggers
        .iter()
        .filter(|t| match t {
            Trigger::JobArrived(id) | Trigger::JobPreempted(id) => !left_out.contains(id.as_str()),
            Trigger::Tick | Trigger::NodeChanged(_) | Trigger::JobFinished(_) => true,
        })
        .cloned()
        .collect();
    if triggers.is_empty() {
        // Every reason for the call was about a job left out; the call is still due.
        triggers.push(Trigger::Tick);
    }
    let view = Snapshot {
        time: snapshot.time,
        triggers,
        nodes: snapshot.nodes.clone(),
        jobs,
        node_sets: Arc::clone(&snapshot.node_sets),
    };
    Some((
        view,
        QueueWindowRecord {
            shown: limit,
            waiting,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::Replicas;

    fn job(id: &str, submit_time: f64, phase: JobPhase) -> Arc<Job> {
        Arc::new(Job {
            id: id.into(),
            phase,
            submit_time,
            start_time: None,
            priority: 0,
            utility: 1.0,
            tasks: Default::default(),
            replicas: Replicas {
                role: "main".into(),
                current: 1,
                min: 1,
                max: 1,
            },
            loss: Arc::default(),
            metric_rises: false,
            moves: Arc::default(),
            checkpointable: true,
            labels: Arc::default(),
        })
    }

    #[test]
    fn a_window_keeps_the_oldest_waiting_jobs_every_running_job_and_their_order() {
        let snapshot = Snapshot {
            time: 5.0,
            triggers: vec![
                Trigger::JobArrived("late".into()),
                Trigger::JobArrived("early".into()),
            ],
            jobs: vec![
                job("running", 0.0, JobPhase::Running),
                job("late", 4.0, JobPhase::Waiting),
                job("early", 1.0, JobPhase::Waiting),
                job("restarting", 0.5, JobPhase::Restarting),
                job("middle", 2.0, JobPhase::Waiting),
            ],
            ..Snapshot::default()
        };
        let (view, record) = windowed(&snapshot, 2).expect("one waiting job is left out");
        let ids: Vec<&str> = view.jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, ["running", "early", "restarting", "middle"]);
        assert_eq!(view.triggers, [Trigger::JobArrived("early".into())]);
        assert_eq!(
            record,
            QueueWindowRecord {
                shown: 2,
                waiting: 3
            }
        );
        assert!(windowed(&snapshot, 3).is_none(), "nothing to leave out");
    }

    #[test]
    fn a_window_halves_on_an_overrun_and_grows_back_only_while_calls_leave_room() {
        let deadline = Duration::from_millis(100);
        let mut window = QueueWindow::default();
        window.overran(10_000, deadline);
        assert_eq!(window.limit(), Some(5_000));
        window.overran(100, deadline);
        assert_eq!(window.limit(), Some(MIN_WINDOW), "never below the minimum");
        window.succeeded(10_000, Duration::from_millis(60));
        assert_eq!(
            window.limit(),
            Some(MIN_WINDOW),
            "twice as many would overrun"
        );
        window.succeeded(10_000, Duration::from_millis(10));
        assert_eq!(window.limit(), Some(2 * MIN_WINDOW));
        window.succeeded(100, Duration::from_millis(10));
        assert_eq!(window.limit(), None, "the whole queue fits again");
    }
}
