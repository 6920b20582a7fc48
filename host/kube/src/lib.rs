//! The Kubernetes backend: the `TrainingJob` resource, observing the cluster through
//! reflectors, carrying out the policy's decisions through the API, and running safely
//! (leader election, retries, graceful shutdown). The policy decides which node each
//! task runs on; kube-scheduler binds: the controller creates each pod held by a
//! scheduling gate, pins it to the policy's node and lifts the gate, and a placement the
//! scheduler refuses comes back to the policy. Modules, bottom up:
//!
//! - `pods`: plain accessors over the controller's pods and jobs (the crate's leaf).
//! - `crd`: the `TrainingJob` custom resource and the generated CRD YAML.
//! - `quantity`: Kubernetes resource quantities to the host's resources.
//! - `template`: a task's pod, the job's Service and PodDisruptionBudget, from the
//!   job's spec; the pin to a node.
//! - `gang`: what became of a gang's members (lost, refused, succeeded).
//! - `progress`, `loss`: a job's log pattern, and its loss series.
//! - `changes`, `pod_index`, `charges`, `trim`, `usage`: what changed since the last
//!   look, the controller's pods by job, other schedulers' pods as charges, what the
//!   caches keep, measured usage.
//! - `rules`, `spread`, `volumes`: where a pod may run (taints, selectors, affinity,
//!   one task per node, volume topology), the policy's hints; kube-scheduler is the
//!   final word.
//! - `observe`: the reflectors and the caches; `views` and `snapshot`: the snapshot
//!   handed to the policy, built from the caches, visiting what changed.
//! - `retry`: back-off, and every call under a deadline and a leadership check.
//! - `act`: carrying out accepted actions (place, restart, resize) and the status.
//! - `cluster`: [`switchyard_control::Cluster`] and [`switchyard_control::LiveCluster`]
//!   over all of the above, so the live controller runs on a real cluster exactly as
//!   it runs on the simulator; its leader pass drives gangs and restarts and follows
//!   logs.
//! - `lease`, `leader_label`, `state`, `events`: leader election, the leader's pod
//!   label, policies' state in ConfigMaps, Events about the controller itself.
//!
//! The `switchyard` command wires these pieces to the live controller and the HTTP API
//! (`switchyard run --cluster kube`); this crate knows neither.
//!
//! It must not decide anything: decisions come from the policy through the control loop.

mod act;
mod changes;
mod charges;
mod cluster;
mod crd;
mod events;
mod gang;
mod leader_label;
mod lease;
mod loss;
mod observe;
mod pod_index;
mod pods;
mod progress;
mod quantity;
mod retry;
mod rules;
mod snapshot;
mod spread;
mod state;
mod template;
mod trim;
mod usage;
mod views;
mod volumes;

pub use act::{
    Actor, CPU_WEIGHT_CONDITION, FAILED_CONDITION, Migration, PODS_CREATED_CONDITION,
    PODS_SCHEDULED_CONDITION, RestartProgress,
};
pub use charges::{Charges, watch as watch_charges};
pub use cluster::{Clock, KubeCluster, LOSS_WRITE_EVERY, follow_log};
pub use crd::{
    Checkpoint, CheckpointMethod, Condition, DEFAULT_CONTROLLER_CLASS, LogProgress, LossSample,
    MoveKindRecord, MoveRecord, PendingRestart, Phase, Placement, Progress, Refusal, RestartAction,
    Role, SuccessPolicy, TaskTarget, TrainingJob, TrainingJobSpec, TrainingJobStatus, crd_yaml,
};
pub use events::refusal_events;
pub use gang::REFUSAL_GRACE;
pub use leader_label::{LEADER_LABEL, LEADER_LABEL_VALUE, LeaderLabel, keep_marked};
pub use lease::{LeaderTerm, Leadership, LeadershipLost, LeaseLock, keep_leading};
pub use loss::LossBook;
pub use observe::{Assumed, Caches, OTHERS_HOLDING_RESOURCES, reflect};
pub use progress::{LogPattern, ParsedSample};
pub use retry::CALL_TIMEOUT;
pub use state::{CONFIGMAP_BYTES, ConfigMapStateStore, STATE_CONFIGMAP};
use switchyard_control::{ActionFailure, FailureReason};
pub use trim::{
    claim as trim_claim, class as trim_class, job as trim_job, node as trim_node, pod as trim_pod,
    volume as trim_volume,
};
pub use usage::{Usage, fetch_usage};
pub use volumes::VolumeCaches;

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
/// The scheduling gate every pod of the controller is created with: the scheduler
/// leaves the pod alone until the controller pins it to the policy's node and lifts it.
pub const PLACEMENT_GATE: &str = "switchyard.dev/placement";
/// Annotation the controller sets when it lifts the placement gate (RFC 3339): the
/// scheduler's refusal is counted from then ([`REFUSAL_GRACE`]).
pub const RELEASED_ANNOTATION: &str = "switchyard.dev/released-at";
/// The job label the policy sees on a job whose last placement the scheduler refused,
/// until it runs: the refused nodes, comma-separated. A policy may avoid them; the job
/// is offered again only after a back-off that grows with each refusal in a row.
pub const PLACEMENT_REFUSED_LABEL: &str = "switchyard.dev/placement-refused";
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
