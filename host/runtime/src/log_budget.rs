//! What a policy may log over time ([`PolicyLog`]): a token bucket of lines and bytes,
//! one per caller of a policy (a [`crate::Session`]), refilled with the cluster's clock,
//! and the tally of what it dropped, reported in one line per minute of cluster time
//! and once more, for what is left, when the last clone of the account goes.
//!
//! The per-call cap ([`crate::ResultBudget::log_lines`]) bounds one call; a policy
//! called every second could still log that much every second. The bucket bounds the
//! sum. It is refilled by cluster time, the clock the policy itself sees (the snapshot's
//! time): the same run then logs the same lines however fast the machine is, which makes
//! a replay's log and a test's count exact; on Kubernetes, and at `--speed 1`, cluster
//! time is wall time; an offline run that simulates a day may log a day's budget, in
//! however little wall time it takes. This module only keeps the account; the sandbox's
//! `log` import consults it.

use std::sync::{Arc, Mutex};

use crate::limits::LogRate;
use crate::printable::printable;

/// Cluster seconds the bucket takes to refill from empty, and between two reports of
/// what was dropped.
const MINUTE: f64 = 60.0;

/// One caller's log account of a policy. Clones share it.
#[derive(Clone, Debug, Default)]
pub(crate) struct PolicyLog {
    bucket: Arc<Mutex<Bucket>>,
}

#[derive(Debug, Default)]
struct Bucket {
    /// Lines and bytes that may still be logged; `None` until the first call, which
    /// starts with a full bucket.
    tokens: Option<(f64, f64)>,
    /// The cluster time of the last refill.
    refilled_at: f64,
    /// Lines and bytes dropped since the last report.
    dropped_lines: u64,
    dropped_bytes: u64,
    /// The earliest time the next report may be made.
    next_report: f64,
    /// Who and which limits the reports name, from the latest call: what was dropped
    /// after the last report is reported when the account goes.
    reporter: Option<Reporter>,
}

/// What a report of dropped lines names.
#[derive(Debug)]
struct Reporter {
    policy: String,
    rate: LogRate,
    per_call: (usize, usize),
}

impl Reporter {
    fn warn(&self, dropped_lines: u64, dropped_bytes: u64) {
        tracing::warn!(
            policy = %printable(&self.policy),
            dropped_lines,
            dropped_bytes,
            "the policy logged past its budget of {} lines and {} bytes per minute of cluster time ({} lines and {} bytes per call); the rest of its log since the last report was dropped",
            self.rate.lines_per_minute,
            self.rate.bytes_per_minute,
            self.per_call.0,
            self.per_call.1,
        );
    }
}

impl Drop for Bucket {
    /// The last tally, dropped after the last report, is reported with the account, so
    /// every dropped line is counted in some report.
    fn drop(&mut self) {
        if let Some(reporter) = &self.reporter
            && self.dropped_lines > 0
        {
            reporter.warn(self.dropped_lines, self.dropped_bytes);
        }
    }
}

impl PolicyLog {
    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Refills the bucket at `rate` for the time since the last call, up to one
    /// minute's worth; a call at an earlier time (another run's clock) refills nothing.
    pub(crate) fn refill(&self, now: f64, rate: LogRate) {
        let mut bucket = self.bucket();
        let (full_lines, full_bytes) = (rate.lines_per_minute as f64, rate.bytes_per_minute as f64);
        let (lines, bytes) = match bucket.tokens {
            None => (full_lines, full_bytes),
            Some((lines, bytes)) => {
                let minutes = ((now - bucket.refilled_at) / MINUTE).max(0.0);
                (
                    (lines + minutes * full_lines).min(full_lines),
                    (bytes + minutes * full_bytes).min(full_bytes),
                )
            }
        };
        bucket.tokens = Some((lines, bytes));
        bucket.refilled_at = bucket.refilled_at.max(now);
    }

    /// Whether a line of `len` bytes fits what is left; takes it from the bucket if so,
    /// counts it as dropped if not.
    pub(crate) fn admit(&self, len: usize) -> bool {
        let mut bucket = self.bucket();
        let (lines, bytes) = bucket.tokens.unwrap_or_default();
        if lines >= 1.0 && bytes >= len as f64 {
            bucket.tokens = Some((lines - 1.0, bytes - len as f64));
            true
        } else {
            bucket.dropped_lines += 1;
            bucket.dropped_bytes += len as u64;
            false
        }
    }

    /// Counts lines the per-call cap dropped, to be reported with the bucket's.
    pub(crate) fn count_dropped(&self, lines: u64, bytes: u64) {
        let mut bucket = self.bucket();
        bucket.dropped_lines += lines;
        bucket.dropped_bytes += bytes;
    }

    /// Reports what was dropped since the last report, in one line, when a minute of
    /// cluster time has passed since it (the first drop is reported at once).
    pub(crate) fn report(&self, policy: &str, now: f64, rate: LogRate, per_call: (usize, usize)) {
        let mut bucket = self.bucket();
        match &mut bucket.reporter {
            Some(reporter) if reporter.policy == policy => {
                reporter.rate = rate;
                reporter.per_call = per_call;
            }
            slot => {
                *slot = Some(Reporter {
                    policy: policy.to_string(),
                    rate,
                    per_call,
                })
            }
        }
        if bucket.dropped_lines == 0 || now < bucket.next_report {
            return;
        }
        if let Some(reporter) = &bucket.reporter {
            reporter.warn(bucket.dropped_lines, bucket.dropped_bytes);
        }
        bucket.dropped_lines = 0;
        bucket.dropped_bytes = 0;
        bucket.next_report = now + MINUTE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: LogRate = LogRate {
        lines_per_minute: 10,
        bytes_per_minute: 1000,
    };

    /// How many lines of `len` bytes the account admits of `tries`.
    fn admitted(log: &PolicyLog, tries: usize, len: usize) -> usize {
        (0..tries).filter(|_| log.admit(len)).count()
    }

    #[test]
    fn a_new_account_holds_one_minute_and_refills_at_the_rate_by_cluster_time() {
        let log = PolicyLog::default();
        log.refill(100.0, RATE);
        assert_eq!(admitted(&log, 50, 10), 10, "a minute's lines");
        log.refill(130.0, RATE);
        assert_eq!(
            admitted(&log, 50, 10),
            5,
            "half a minute later, half of them"
        );
        log.refill(1000.0, RATE);
        assert_eq!(
            admitted(&log, 50, 10),
            10,
            "never more than a minute's worth"
        );
    }

    #[test]
    fn bytes_bind_as_well_as_lines() {
        let log = PolicyLog::default();
        log.refill(0.0, RATE);
        assert_eq!(admitted(&log, 10, 300), 3);
        assert_eq!(admitted(&log, 1, 100), 1, "a shorter line still fits");
    }

    #[test]
    fn a_clock_that_goes_back_refills_nothing() {
        let log = PolicyLog::default();
        log.refill(600.0, RATE);
        assert_eq!(admitted(&log, 10, 1), 10);
        log.refill(0.0, RATE);
        log.refill(30.0, RATE);
        assert_eq!(admitted(&log, 10, 1), 0);
    }
}
