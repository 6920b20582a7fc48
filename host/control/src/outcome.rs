//! What became of an action the validator accepted: the cluster carried it out, or it
//! failed, and why. A cluster reports one outcome per action ([`crate::Cluster::apply`]);
//! the loop records failures in the decision record, tallies them per experiment arm
//! and asks for a round soon after, so the policy can try again. This module only names
//! the outcomes; mapping a backend's errors to a [`FailureReason`] is the backend's job.

use serde::{Deserialize, Serialize};

/// Why an accepted action did not happen. One label per reason, used in decision
/// records, metrics and experiment reports; the kinds follow the API server's answers
/// so the simulator's injected faults and a real cluster's failures read alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureReason {
    /// The object changed under the write (409 after the retries).
    Conflict,
    /// Not allowed: RBAC, a resource quota, Pod Security admission (403).
    Forbidden,
    /// The job, task, pod or node is gone (404).
    NotFound,
    /// The API server kept throttling the call (429 after the retries).
    Throttled,
    /// An admission webhook denied the request.
    AdmissionRefused,
    /// The API server refused the object as invalid (400, 422): a bad template.
    Invalid,
    /// No answer within the call's deadline; the call may still have happened.
    Timeout,
    /// The API server failed or could not be reached (5xx, connection errors).
    Unavailable,
    /// This replica stopped leading, so nothing was sent.
    NotLeading,
    /// The job moved on since the decision was taken (another restart, a new
    /// generation); nothing was done.
    Stale,
    /// The job's pods carry scheduling gates that someone else must lift first.
    Gated,
    /// The job's claims are not ready for it: a volume is being provisioned for the
    /// node chosen (the job is placed again once it is bound), or a claim is missing,
    /// lost or unbound.
    WaitingForVolume,
    /// The backend does not carry this operation out.
    Unsupported,
    /// A fault the simulator injected (the workload's `faults` rates).
    Injected,
    /// Anything else.
    Other,
}

impl FailureReason {
    /// The label in records and metrics (`not-found`, `admission-refused`, ...).
    pub fn label(self) -> &'static str {
        match self {
            FailureReason::Conflict => "conflict",
            FailureReason::Forbidden => "forbidden",
            FailureReason::NotFound => "not-found",
            FailureReason::Throttled => "throttled",
            FailureReason::AdmissionRefused => "admission-refused",
            FailureReason::Invalid => "invalid",
            FailureReason::Timeout => "timeout",
            FailureReason::Unavailable => "unavailable",
            FailureReason::NotLeading => "not-leading",
            FailureReason::Stale => "stale",
            FailureReason::Gated => "gated",
            FailureReason::WaitingForVolume => "waiting-for-volume",
            FailureReason::Unsupported => "unsupported",
            FailureReason::Injected => "injected",
            FailureReason::Other => "other",
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// An accepted action that failed: the kind, and the backend's message (naming the
/// call and the object, e.g. `binding pod a-main-0-0 to node n1: ... denied the
/// request`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ActionFailure {
    /// The kind of failure.
    pub reason: FailureReason,
    /// What failed, in words.
    pub message: String,
}

impl ActionFailure {
    /// A failure of kind `reason`, described by `message`.
    pub fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ActionFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// What became of one accepted action.
pub type ActionOutcome = Result<(), ActionFailure>;
