//! The Kubernetes backend: the `TrainingJob` resource, observing the cluster through
//! reflectors, acting on the policy's decisions through the API, and running safely
//! (leader election, retries, graceful shutdown). Submodules:
//!
//! - [`crd`]: the `TrainingJob` custom resource and the generated CRD YAML.
//! - [`progress`]: the job's log pattern and parsing log lines into loss samples.
//! - [`quantity`]: Kubernetes resource quantities to the host's [`switchyard_core::Resources`].
//! - [`changes`]: what changed since the pass and the snapshot last looked, marked by
//!   the watch events, so that a round visits only that.
//! - [`pod_index`]: the controller's pods grouped by job, kept in step by the watch
//!   events.
//! - [`pods`]: building a task's pod from its role's template (names, labels, owner).
//! - [`retry`]: back-off on conflicts (409) and throttling (429); every call under a
//!   deadline and a leadership check.
//! - [`act`]: carrying out accepted actions (bind, migrate, resize, scale) and status.
//! - [`observe`]: reflectors on Nodes, Pods, TrainingJobs and storage, metrics, log followers, and
//!   the [`switchyard_core::Snapshot`] built from those caches.
//! - [`snapshot`]: the snapshot handed to the policy, built from the caches, visiting
//!   what changed.
//! - [`views`]: the snapshot's node and job views, kept until what they are made of
//!   changes.
//! - [`trim`]: what the caches keep of each object.
//! - [`charges`]: other schedulers' pods, kept as what they take from their nodes.
//! - [`rules`]: where a pod may run (taints, node selectors, required affinity), as the
//!   contract's eligibility sets.
//! - [`spread`]: one task per node for a job whose template asks for it (required
//!   anti-affinity against its own pods, host ports), and nodes whose host ports are taken.
//! - [`volumes`]: where a job's PersistentVolumeClaims let it run, and which claims wait
//!   for a node to be chosen (kube-scheduler's volume binding).
//! - [`ephemeral`]: the claims of generic ephemeral volumes, made with their pod for its
//!   node.
//! - [`lease`]: leader election over a `coordination.k8s.io` Lease.
//! - [`leader_label`]: the label on the leader's own pod that the Service selects on.
//! - [`cluster`]: [`switchyard_control::Cluster`] and [`switchyard_control::LiveCluster`] over all
//!   of the above, so the live controller (HTTP API, policy loading, hot swap, A/B) runs
//!   on a real cluster exactly as it runs on the simulator.
//! - [`state`]: the policies' state blobs and the active policy, kept in a ConfigMap.
//! - [`events`]: Events about the controller itself (a refused policy).
//!
//! The `switchyard` command wires these pieces to the live controller and the HTTP API
//! (`switchyard run --cluster kube`); this crate knows neither.
//!
//! It must not decide anything: decisions come from the policy through the control loop.

pub mod act;
pub mod changes;
pub mod charges;
pub mod cluster;
pub mod crd;
pub mod ephemeral;
pub mod events;
pub mod leader_label;
pub mod lease;
pub mod observe;
pub mod pod_index;
pub mod pods;
pub mod progress;
pub mod quantity;
pub mod retry;
pub mod rules;
pub mod snapshot;
pub mod spread;
pub mod state;
pub mod trim;
pub mod views;
pub mod volumes;

pub use crd::{TrainingJob, TrainingJobSpec, TrainingJobStatus};
use switchyard_control::{ActionFailure, FailureReason};

/// Label on every pod the controller creates: the job's name.
pub const JOB_LABEL: &str = "switchyard.dev/job";
/// Label on every pod the controller creates: the task's name (`worker-1`).
pub const TASK_LABEL: &str = "switchyard.dev/task";
/// Label on every pod the controller creates: the task's role.
pub const ROLE_LABEL: &str = "switchyard.dev/role";
/// Label on every pod the controller creates: the UID of the job that owns it (as a
/// Job's `batch.kubernetes.io/controller-uid`), so a job deleted and created again under
/// the same name never takes the old one's pods for its own.
pub const JOB_UID_LABEL: &str = "switchyard.dev/job-uid";
/// Label on every pod the controller creates: the job's generation it was made for.
pub const GENERATION_LABEL: &str = "switchyard.dev/generation";
/// Annotation set on a pod to ask its training process to save a checkpoint.
pub const CHECKPOINT_ANNOTATION: &str = "switchyard.dev/checkpoint-requested";
/// The `schedulerName` of the controller's pods: the default scheduler leaves them alone.
pub const SCHEDULER_NAME: &str = "switchyard";
/// The field manager named on the controller's writes.
pub const FIELD_MANAGER: &str = "switchyard";

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
    /// Pods of a placement came back with scheduling gates; they stay unbound until
    /// whoever put the gates there lifts them.
    #[error(
        "TrainingJob `{job}`: pods {pods:?} have scheduling gates; they are bound once the gates are lifted"
    )]
    Gated {
        /// Job name.
        job: String,
        /// The gated pods.
        pods: Vec<String>,
    },
    /// The job's claims keep it from being bound now: a volume is being provisioned for
    /// the node chosen, or a claim is missing, lost or unbound ([`volumes`]).
    #[error("TrainingJob `{job}`: {message}")]
    WaitingForVolumes {
        /// Job name.
        job: String,
        /// Which claims, and what they wait for.
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
    /// Publishing an Event failed.
    #[error("publishing event on TrainingJob `{job}`: {source}")]
    Event {
        /// Job name.
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
            Error::Gated { .. } => "gated",
            Error::WaitingForVolumes { .. } => "waiting_for_volumes",
            Error::Event { .. } => "event",
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
            Error::Gated { .. } => FailureReason::Gated,
            Error::WaitingForVolumes { .. } => FailureReason::WaitingForVolume,
            Error::Stale { .. } => FailureReason::Stale,
            Error::BadPattern { .. }
            | Error::PatternWithoutValue { .. }
            | Error::Log { .. }
            | Error::Config(_)
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

/// Connects with the kubeconfig, or the in-cluster service account.
pub async fn connect() -> Result<kube::Client> {
    kube::Client::try_default().await.map_err(Error::Config)
}
