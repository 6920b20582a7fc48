//! Retrying API calls that failed for reasons that pass: optimistic-concurrency conflicts
//! (409 `Conflict`) and throttling (429), with exponential back-off; and bounding every
//! call ([`Guard`]): a deadline, so a hung API server cannot hold the decision thread,
//! and a leadership check before each attempt, so a replica that stopped leading writes
//! nothing more. It owns the classification and the schedule; callers decide whether
//! their call may be repeated (a merge patch or a resourceVersion-guarded update may; a
//! create that may have happened must check first).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchyard_control::Leader;

/// Attempts before giving up.
pub(crate) const ATTEMPTS: u32 = 5;
/// Wait before the second attempt; doubles after each failure.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// Whether `error` is worth retrying: a 409 conflict (not `AlreadyExists`) or a 429.
pub(crate) fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.code == 429 || (status.code == 409 && status.reason != "AlreadyExists")
        }
        _ => false,
    }
}

/// Whether `error` is throttling (429), the one failure worth repeating for a call whose
/// 409 is an answer (a binding to a pod already bound, a delete whose precondition
/// failed).
pub(crate) fn is_throttled(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 429)
}

/// Runs `call` until it succeeds, fails for good, or [`ATTEMPTS`] are spent, sleeping
/// [`FIRST_BACKOFF`], then twice that, and so on between attempts.
pub(crate) async fn with_backoff<T, F, Fut>(what: &str, call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry_when(what, is_transient, call).await
}

/// Like [`with_backoff`], but repeats only throttled calls ([`is_throttled`]).
pub(crate) async fn on_throttle<T, F, Fut>(what: &str, call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry_when(what, is_throttled, call).await
}

async fn retry_when<T, F, Fut>(
    what: &str,
    worth_repeating: fn(&kube::Error) -> bool,
    mut call: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut wait = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match call().await {
            Err(error) if attempt < ATTEMPTS && worth_repeating(&error) => {
                tracing::debug!(%error, attempt, what, "transient API error; retrying");
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The Lease term this replica leads under: the Lease's `leaseTransitions` when it last
/// acquired or renewed it; none before it has. Shared by the election, which sets it, and
/// the calls that fence their writes with it (the call guard).
#[derive(Clone, Debug, Default)]
pub struct LeaderTerm(Arc<AtomicU64>);

impl LeaderTerm {
    /// The term, once this replica has held the Lease.
    pub fn get(&self) -> Option<u64> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            stored => Some(stored - 1),
        }
    }

    /// Sets the term (the Lease's `leaseTransitions` as written).
    pub fn set(&self, term: u64) {
        self.0.store(term.saturating_add(1), Ordering::SeqCst);
    }
}

/// How long one API call may take by default.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call was cut short. It travels inside `kube::Error::Service`, so a caller's
/// matches on the client's error stay as they are; [`crate::Error`] turns it back into
/// its own variants.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Cut {
    /// No answer within the deadline. The call may still have happened.
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// This replica no longer leads; the call was not made.
    #[error("this replica no longer leads; nothing was sent")]
    NotLeading,
}

/// The [`Cut`] inside `error`, if it is one.
pub(crate) fn cut_of(error: &kube::Error) -> Option<&Cut> {
    match error {
        kube::Error::Service(inner) => inner.downcast_ref::<Cut>(),
        _ => None,
    }
}

/// Bounds calls: each under a deadline, and, when fenced by a [`Leader`], made only
/// while that replica leads.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    leader: Option<Arc<Leader>>,
    term: Option<LeaderTerm>,
    timeout: Duration,
}

impl Default for Guard {
    fn default() -> Self {
        Self {
            leader: None,
            term: None,
            timeout: CALL_TIMEOUT,
        }
    }
}

impl Guard {
    /// Makes calls only while `leader` leads.
    pub(crate) fn fenced_by(mut self, leader: Arc<Leader>) -> Self {
        self.leader = Some(leader);
        self
    }

    /// Fences status writes with `term` (see [`LeaderTerm`]).
    pub(crate) fn with_term(mut self, term: LeaderTerm) -> Self {
        self.term = Some(term);
        self
    }

    /// The term this replica's writes carry, once it has one.
    pub(crate) fn term(&self) -> Option<u64> {
        self.term.as_ref().and_then(LeaderTerm::get)
    }

    /// Gives each call `timeout` instead of [`CALL_TIMEOUT`].
    pub(crate) fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs `call` if this replica may, and for at most the deadline.
    pub(crate) async fn call<T>(
        &self,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        if self.leader.as_ref().is_some_and(|l| !l.is_leading()) {
            return Err(kube::Error::Service(Box::new(Cut::NotLeading)));
        }
        match tokio::time::timeout(self.timeout, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(kube::Error::Service(Box::new(Cut::TimedOut(self.timeout)))),
        }
    }
}
