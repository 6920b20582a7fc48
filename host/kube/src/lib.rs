//! The Kubernetes backend: the `TrainingJob` resource, observing the cluster through
//! reflectors, carrying out the policy's decisions through the API, and running safely
//! (leader election, retries, graceful shutdown). The policy decides which node each
//! task runs on; kube-scheduler binds: the controller creates each pod held by a
//! scheduling gate, pins it to the policy's node and lifts the gate, and a placement the
//! scheduler refuses comes back to the policy. Modules, bottom up:
//!
//! - `labels`, `error`: the names the controller writes on objects, and the one error
//!   type.
//! - `pods`: plain accessors over the controller's pods and jobs (the leaf the modules
//!   above it share).
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
//! - `adopt`: the batch Jobs, JobSets and PyTorchJobs whose gated pods name this
//!   instance's queue, grouped into policy jobs from their owners' labels and specs.
//! - `watch`: the loop that keeps a reflector's store filled.
//! - `observe`: the reflectors and the caches; `views` and `snapshot`: the snapshot
//!   handed to the policy, built from the caches, visiting what changed.
//! - `retry`: back-off, and every call under a deadline, a leadership check and, for
//!   status writes, the Lease term.
//! - `act`: carrying out accepted actions (place, restart, advance, recover, resize) and
//!   the status.
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
mod adopt;
mod changes;
mod charges;
mod cluster;
mod crd;
mod error;
mod events;
mod gang;
mod labels;
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
mod watch;

pub use act::{
    Actor, CHECKPOINTED_CONDITION, CPU_WEIGHT_CONDITION, FAILED_CONDITION, Migration,
    PODS_CREATED_CONDITION, PODS_SCHEDULED_CONDITION, PodAck, RestartProgress,
};
pub use adopt::{
    Adoption, Integration, InvalidQueue, UnknownIntegration, trim_pod as trim_adopted_pod,
    valid_queue,
};
pub use charges::{Charges, watch as watch_charges};
pub use cluster::{Clock, KubeCluster, LOSS_WRITE_EVERY, follow_log};
pub use crd::{
    Checkpoint, CheckpointMethod, CheckpointRecord, CheckpointResult, Condition,
    DEFAULT_CONTROLLER_CLASS, LogProgress, LossSample, MoveKindRecord, MoveRecord, PendingRestart,
    Phase, Placement, Progress, Refusal, RestartAction, Role, SuccessPolicy, TaskTarget,
    TrainingJob, TrainingJobSpec, TrainingJobStatus, crd_yaml,
};
pub use error::{Error, Result};
pub use events::refusal_events;
pub use gang::REFUSAL_GRACE;
pub use labels::{
    CHECKPOINT_ANNOTATION, CHECKPOINT_GRACE_ANNOTATION, DEFAULT_CHECKPOINT_GRACE_SECONDS,
    DEFAULT_QUEUE, EVICTION_REFUSED_REASON, FIELD_MANAGER, GENERATION_LABEL,
    INTEGRATION_NOT_ENABLED_REASON, JOB_LABEL, JOB_UID_LABEL, LOSS_CONTAINER_ANNOTATION,
    LOSS_PATTERN_ANNOTATION, NOT_ADOPTED_REASON, PLACEMENT_GATE, PLACEMENT_REFUSED_LABEL,
    QUEUE_LABEL, RELEASED_ANNOTATION, ROLE_LABEL, TASK_LABEL,
};
pub use leader_label::{LEADER_LABEL, LEADER_LABEL_VALUE, LeaderLabel, keep_marked};
pub use lease::{Leadership, LeadershipLost, LeaseLock, keep_leading};
pub use loss::LossBook;
pub use observe::{Assumed, Caches, OTHERS_HOLDING_RESOURCES, reflect};
pub use progress::{CheckpointComplete, DEFAULT_LOG_PATTERN, LogPattern, ParsedSample};
pub use retry::{CALL_TIMEOUT, LeaderTerm};
pub use state::{CONFIGMAP_BYTES, ConfigMapStateStore, STATE_CONFIGMAP};
pub use trim::{
    claim as trim_claim, class as trim_class, job as trim_job, node as trim_node, pod as trim_pod,
    volume as trim_volume,
};
pub use usage::{Usage, fetch_usage};
pub use volumes::VolumeCaches;

/// Connects with the kubeconfig, or the in-cluster service account.
pub async fn connect() -> Result<kube::Client> {
    kube::Client::try_default().await.map_err(Error::Config)
}
