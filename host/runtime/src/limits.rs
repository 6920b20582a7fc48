//! The limits every policy call runs under: its deadlines, its memory, the state it may
//! hand back ([`SandboxLimits`]), what else one answer may hold ([`ResultBudget`]) and
//! what a policy may log over time ([`LogRate`]).
//! This module only describes the limits; the engine and the sandbox enforce them.

use std::time::Duration;

/// Sandbox limits applied to every policy call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SandboxLimits {
    /// Wall time a single call may take before it is stopped.
    pub deadline: Duration,
    /// Wall time the first call of a kept instance (an `incremental-policy` component
    /// called through a [`crate::Session`]) may take: instantiation and the whole cluster as a
    /// reset. It is paid once per instance and grows with the cluster, while later calls
    /// grow with what changed, so it gets more room than [`SandboxLimits::deadline`]
    /// (never less). Under the round's deadline, a busy machine that made one round
    /// overrun would make every fresh instance's first call overrun too, and the
    /// policy would never decide again.
    pub priming_deadline: Duration,
    /// Linear memory a policy instance may grow to.
    pub memory_bytes: usize,
    /// Largest state blob a policy may hand back.
    pub state_bytes: usize,
    /// What else one answer may hold, and what one call may log.
    pub budget: ResultBudget,
    /// The soonest a policy may ask to be called again, seconds of cluster time: a
    /// shorter `next-call-after` is raised to it, so no policy can make the loop spin.
    pub min_call_interval: f64,
    /// What a policy may log over time, through one [`crate::Session`], beside what
    /// one call may ([`ResultBudget::log_lines`], [`ResultBudget::log_bytes`]).
    pub log_rate: LogRate,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(100),
            priming_deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            state_bytes: 16 << 20,
            budget: ResultBudget::default(),
            min_call_interval: 1.0,
            log_rate: LogRate::default(),
        }
    }
}

/// A policy's log budget over time: a token bucket that holds one minute's worth of
/// lines and bytes and refills at that rate per minute of cluster time (the snapshot's
/// clock, so a run logs the same lines however fast it runs). Lines past it are
/// dropped, and what was dropped is reported in one warning per minute. The defaults
/// bound a policy that logs without end to 64 KiB a minute, 90 MiB a day.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRate {
    /// Log lines per minute.
    pub lines_per_minute: usize,
    /// Bytes of log per minute.
    pub bytes_per_minute: usize,
}

impl Default for LogRate {
    fn default() -> Self {
        Self {
            lines_per_minute: 600,
            bytes_per_minute: 64 << 10,
        }
    }
}

/// How much a policy may hand the host in one call. The host counts while it reads the
/// answer out of the policy's memory and stops at the first item over budget, so a
/// hostile answer costs the host at most the budget; the call then fails with
/// [`crate::PolicyError::InvalidResult`] naming the budget, and the fallback decides. The
/// defaults leave room for a 5,000-node cluster placing a burst of 10,000 gangs in one
/// round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultBudget {
    /// Actions in one decision, plus the entries of their lists (a placement's
    /// assignments, a scale's target nodes), plus a description's parameters or a
    /// configure answer's settings.
    pub actions: usize,
    /// Labels in one decision.
    pub labels: usize,
    /// Bytes of all the strings of one answer together (ids, reasons, labels).
    pub string_bytes: usize,
    /// Log lines one call may write; the rest are counted and summarised in one line.
    pub log_lines: usize,
    /// Bytes of log one call may write.
    pub log_bytes: usize,
}

impl Default for ResultBudget {
    fn default() -> Self {
        Self {
            actions: 200_000,
            labels: 100_000,
            string_bytes: 32 << 20,
            log_lines: 1_000,
            log_bytes: 256 << 10,
        }
    }
}
