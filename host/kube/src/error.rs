//! The backend's one error type: what went wrong, with the object, field or value at
//! fault, a label for metrics, and the kind of failure a decision record shows. It must
//! not act on anything.

use switchyard_control::{ActionFailure, FailureReason};

use crate::retry;

/// Everything that can go wrong in the Kubernetes backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the API server failed (after retries, where retrying made sense).
    #[error("{action}: {source}")]
    Api {
        /// What the controller was doing, e.g. `binding pod tj-a-worker-0-0 to node n1`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// A call to the API server did not answer in time (it may still have happened).
    #[error("{action}: no answer within {after:?}")]
    Timeout {
        /// What the controller was doing.
        action: String,
        /// The deadline.
        after: std::time::Duration,
    },
    /// This replica stopped leading, so the call was not made.
    #[error("{action}: this replica no longer leads; nothing was sent")]
    NotLeading {
        /// What the controller was about to do.
        action: String,
    },
    /// A job's `progress.log.pattern` is not a valid regular expression.
    #[error(
        "TrainingJob `{job}`: progress.log.pattern `{pattern}` is not a valid regular expression: {source}"
    )]
    BadPattern {
        /// Job name.
        job: String,
        /// The pattern as written.
        pattern: String,
        /// The regex compiler's message.
        #[source]
        source: regex::Error,
    },
    /// A job's pattern has no capture group to take the value from.
    #[error(
        "TrainingJob `{job}`: progress.log.pattern `{pattern}` has no capture group; put the value in `(?P<value>...)` or in the first group"
    )]
    PatternWithoutValue {
        /// Job name.
        job: String,
        /// The pattern as written.
        pattern: String,
    },
    /// An action names a job, task or pod the controller does not know.
    #[error("{0}")]
    NotFound(String),
    /// An action the contract has and this backend does not carry out yet.
    #[error("{0}")]
    Unsupported(String),
    /// A job's spec cannot be turned into pods (e.g. a role template without containers).
    #[error("TrainingJob `{job}`: {message}")]
    InvalidSpec {
        /// Job name.
        job: String,
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// Reading a followed log failed mid-stream.
    #[error("reading the log of pod {pod}: {source}")]
    Log {
        /// Pod name.
        pod: String,
        /// The stream's error.
        #[source]
        source: std::io::Error,
    },
    /// Loading the kubeconfig or the in-cluster configuration failed.
    #[error("no Kubernetes configuration: {0}")]
    Config(#[source] kube::Error),
    /// The job changed since the decision was taken (another restart began, or its
    /// status moved on); nothing was done, and the next round sees the new state.
    #[error("TrainingJob `{job}`: {message}")]
    Stale {
        /// Job name.
        job: String,
        /// What changed.
        message: String,
    },
    /// An adopted gang kube-scheduler would not bind where the decision pins it: its
    /// claims are not ready for a node, or a rule between pods the policy's hints cannot
    /// say (a topology spread's skew, anti-affinity or affinity per zone) refuses a pod;
    /// nothing was released.
    #[error("adopted job {job} is not released: {message}")]
    NotBindable {
        /// The adopted job's id.
        job: String,
        /// Which pod, node and rule, or which claim, and why.
        message: String,
        /// Whether its claims are what is not ready.
        volumes: bool,
    },
    /// Publishing an Event failed.
    #[error("publishing event on {job}: {source}")]
    Event {
        /// What the Event is about (`TrainingJob a`, `pod ml/p`).
        job: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// A short label for metrics, one per variant.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Api { .. } => "api",
            Error::Timeout { .. } => "timeout",
            Error::NotLeading { .. } => "not_leading",
            Error::BadPattern { .. } => "bad_pattern",
            Error::PatternWithoutValue { .. } => "pattern_without_value",
            Error::NotFound(_) => "not_found",
            Error::Unsupported(_) => "unsupported",
            Error::InvalidSpec { .. } => "invalid_spec",
            Error::Log { .. } => "log",
            Error::Config(_) => "config",
            Error::Stale { .. } => "stale",
            Error::Event { .. } => "event",
            Error::NotBindable { .. } => "not_bindable",
        }
    }

    /// The kind of failure, as decision records and metrics name it: the API server's
    /// answer (conflict, forbidden, not found, throttled, an admission webhook's
    /// denial, invalid), or the controller's own reason for not acting.
    pub fn failure_reason(&self) -> FailureReason {
        match self {
            Error::Api { source, .. } => match source {
                kube::Error::Api(status) => {
                    if status.message.contains("admission webhook") {
                        return FailureReason::AdmissionRefused;
                    }
                    match status.code {
                        409 => FailureReason::Conflict,
                        403 => FailureReason::Forbidden,
                        404 | 410 => FailureReason::NotFound,
                        429 => FailureReason::Throttled,
                        400 | 422 => FailureReason::Invalid,
                        code if code >= 500 => FailureReason::Unavailable,
                        _ => FailureReason::Other,
                    }
                }
                kube::Error::HyperError(_) | kube::Error::Service(_) => FailureReason::Unavailable,
                _ => FailureReason::Other,
            },
            Error::Timeout { .. } => FailureReason::Timeout,
            Error::NotLeading { .. } => FailureReason::NotLeading,
            Error::NotFound(_) => FailureReason::NotFound,
            Error::Unsupported(_) => FailureReason::Unsupported,
            Error::InvalidSpec { .. } => FailureReason::Invalid,
            Error::Stale { .. } => FailureReason::Stale,
            Error::NotBindable { volumes: true, .. } => FailureReason::WaitingForVolume,
            Error::BadPattern { .. }
            | Error::PatternWithoutValue { .. }
            | Error::Log { .. }
            | Error::Config(_)
            | Error::NotBindable { .. }
            | Error::Event { .. } => FailureReason::Other,
        }
    }

    /// This error as the outcome of an action.
    pub fn to_failure(&self) -> ActionFailure {
        ActionFailure::new(self.failure_reason(), self.to_string())
    }

    /// Wraps a client error with what the controller was doing; a call cut short by
    /// [`retry::Guard`] becomes [`Error::Timeout`] or [`Error::NotLeading`].
    pub(crate) fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| match retry::cut_of(&source) {
            Some(retry::Cut::TimedOut(after)) => Error::Timeout {
                action,
                after: *after,
            },
            Some(retry::Cut::NotLeading) => Error::NotLeading { action },
            None => Error::Api { action, source },
        }
    }
}

/// Results of the Kubernetes backend.
pub type Result<T, E = Error> = std::result::Result<T, E>;
