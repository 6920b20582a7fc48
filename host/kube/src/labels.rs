//! The names the controller writes on the cluster's objects and reads back: its pods'
//! labels and annotations, its scheduling gate, the job label it shows the policy, and
//! its field manager. Names only; it must not read or write anything.

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
/// scheduler's refusal is counted from then ([`crate::REFUSAL_GRACE`]).
pub const RELEASED_ANNOTATION: &str = "switchyard.dev/released-at";
/// The job label the policy sees on a job whose last placement the scheduler (or a
/// node's kubelet) refused, until it runs: the refused nodes, comma-separated. A policy
/// may avoid them; the job is offered again only after a back-off that grows with each
/// refusal in a row.
pub const PLACEMENT_REFUSED_LABEL: &str = "switchyard.dev/placement-refused";
/// The field manager named on the controller's writes.
pub const FIELD_MANAGER: &str = "switchyard";
/// Label a team puts on the pod template of a job it hands to switchyard (a batch Job,
/// a JobSet, a PyTorchJob), next to the [`PLACEMENT_GATE`]: the queue, that is the
/// switchyard instance (`--queue`), that places its pods. Pods of another queue belong
/// to another instance and are left alone.
pub const QUEUE_LABEL: &str = "switchyard.dev/queue";
/// The queue an instance adopts from when none is given.
pub const DEFAULT_QUEUE: &str = "default";
/// Pod-template annotation of an adopted job: the regular expression its loss is read
/// from in its logs, with `step` and `value` groups (absent: [`crate::DEFAULT_LOG_PATTERN`], the training library's line).
pub const LOSS_PATTERN_ANNOTATION: &str = "switchyard.dev/loss-pattern";
/// Pod-template annotation of an adopted job: the container whose log carries the loss
/// (absent: the first container).
pub const LOSS_CONTAINER_ANNOTATION: &str = "switchyard.dev/loss-container";
/// Pod-template annotation of an adopted job: how long its pods have to save a
/// checkpoint between the controller asking ([`CHECKPOINT_ANNOTATION`]) and evicting
/// them, seconds (absent: [`DEFAULT_CHECKPOINT_GRACE_SECONDS`]).
pub const CHECKPOINT_GRACE_ANNOTATION: &str = "switchyard.dev/checkpoint-grace-seconds";
/// The checkpoint grace of an adopted job's pods when their template names none.
pub const DEFAULT_CHECKPOINT_GRACE_SECONDS: u32 = 30;
/// Reason of the one Event a gated pod of this queue gets when the kind that owns it is
/// not among `--integrations` (or it has no owner), so it does not wait in silence.
pub const INTEGRATION_NOT_ENABLED_REASON: &str = "IntegrationNotEnabled";
/// Reason of the one Event on an owner whose pods are labelled with this queue but some
/// of which run without ever having waited behind the placement gate: the job is not
/// adopted (a Warning when others of its pods wait behind the gate).
pub const NOT_ADOPTED_REASON: &str = "NotAdopted";
/// Reason of the Warning Event, once per stop, on an adopted job's owner whose pod's
/// eviction a PodDisruptionBudget refused.
pub const EVICTION_REFUSED_REASON: &str = "EvictionRefused";
