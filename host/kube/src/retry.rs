//! Retrying API calls that failed for reasons that pass: optimistic-concurrency conflicts
//! (409 `Conflict`) and throttling (429), with exponential back-off. It owns the
//! classification and the schedule; callers decide whether their call may be repeated
//! (a merge patch or a resourceVersion-guarded update may; a create that may have
//! happened must check first).

use std::future::Future;
use std::time::Duration;

/// Attempts before giving up.
pub const ATTEMPTS: u32 = 5;
/// Wait before the second attempt; doubles after each failure.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// Whether `error` is worth retrying: a 409 conflict (not `AlreadyExists`) or a 429.
pub fn is_transient(error: &kube::Error) -> bool {
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
pub fn is_throttled(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 429)
}

/// Runs `call` until it succeeds, fails for good, or [`ATTEMPTS`] are spent, sleeping
/// [`FIRST_BACKOFF`], then twice that, and so on between attempts.
pub async fn with_backoff<T, F, Fut>(what: &str, call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry_when(what, is_transient, call).await
}

/// Like [`with_backoff`], but repeats only throttled calls ([`is_throttled`]).
pub async fn on_throttle<T, F, Fut>(what: &str, call: F) -> Result<T, kube::Error>
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
