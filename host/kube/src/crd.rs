//! The `TrainingJob` custom resource (`switchyard.dev/v1alpha1`): what a user submits
//! (roles with pod templates, priority, how progress is read, how to checkpoint) and the
//! status the controller keeps (placements, migrations, rescales, loss samples,
//! conditions). The CRD YAML in `deploy/crd.yaml` is generated from these types by
//! `switchyard crd`; this module must not talk to the API server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::CustomResource;
use kube::core::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use switchyard_core::{JobMove, MOVE_HISTORY, MoveKind};

/// A deep-learning training job scheduled by switchyard's active policy.
///
/// The API server checks what the controller relies on (CEL rules, so a bad job is
/// refused at `kubectl apply` with the rule's message rather than failing later): the
/// name is a DNS label of at most 63 characters (it names the job's headless Service and
/// is a label value on its pods), role names are unique, at most one role is scalable,
/// `minReplicas <= replicas <= maxReplicas`, the success policy names existing roles,
/// `managedBy` never changes, and the roles (templates, replica counts and bounds) never
/// change once the job has started (its phase is past `Waiting`).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "switchyard.dev",
    version = "v1alpha1",
    kind = "TrainingJob",
    namespaced,
    status = "TrainingJobStatus",
    shortname = "tj",
    validation = kube::core::Rule::new(NAME_RULE).message(NAME_MESSAGE),
    validation = kube::core::Rule::new(MANAGED_BY_RULE).message(MANAGED_BY_MESSAGE),
    validation = kube::core::Rule::new(STARTED_ROLES_RULE).message(STARTED_ROLES_MESSAGE),
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Migrations","type":"integer","jsonPath":".status.migrations"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.roles.all(r, self.roles.filter(s, s.name == r.name).size() == 1)",
        "message": "role names must be unique"},
    {"rule": "self.roles.filter(r, has(r.scalable) && r.scalable).size() <= 1",
        "message": "at most one role may be scalable"},
    {"rule": "!has(self.successPolicy) || self.successPolicy.roles.all(n, self.roles.exists(r, r.name == n))",
        "message": "successPolicy.roles must name roles of the job"}
]))]
pub struct TrainingJobSpec {
    /// The processes of the job, one entry per role (`ps`, `worker`, or a single `main`).
    /// At most one role is `scalable`; without one, the first role is the job's replica
    /// count as the policy sees it, with min = max = replicas.
    #[schemars(length(min = 1, max = 16))]
    pub roles: Vec<Role>,
    /// Higher runs first where the policy orders by priority.
    #[serde(default)]
    pub priority: i32,
    /// Utility of finishing the job (the utility-priority queue orders by it).
    #[serde(default = "default_utility")]
    pub utility: f64,
    /// How the controller learns the job's training progress.
    #[serde(default)]
    pub progress: Progress,
    /// How the training process saves a checkpoint; absent: the job never moves or scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// True when the reported metric improves by rising (accuracy) rather than falling.
    #[serde(default)]
    pub metric_rises: bool,
    /// How many times the job's pods may fail before the job fails, as in a Kubernetes
    /// Job. A failed pod sends the whole gang back to the queue, after a back-off of
    /// 10 s doubling with each failure (at most 6 min). Pods evicted, deleted or shut
    /// down with their node are disruptions: the gang goes back to the queue at once and
    /// nothing is counted. Pods the node refused (the kubelet's `OutOfcpu`,
    /// `OutOfnvidia.com/gpu`, ...) are a refused placement: nothing is counted, and the
    /// gang goes back after the refusal's back-off (`status.refusal`).
    #[serde(default = "default_backoff_limit")]
    pub backoff_limit: u32,
    /// When the job has succeeded. Absent: once every task of every role has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<SuccessPolicy>,
    /// Which installation of switchyard acts on the job, as a Job's `spec.managedBy`:
    /// a controller acts only on the jobs of its class (`--controller-class`, by default
    /// `switchyard.dev/controller`, which a job without this field belongs to) and
    /// leaves every other job alone, so two installations never act on one job. It
    /// cannot change once the job exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub managed_by: Option<String>,
}

/// The class of a controller that names none, and of a job without `spec.managedBy`.
pub const DEFAULT_CONTROLLER_CLASS: &str = "switchyard.dev/controller";

impl TrainingJob {
    /// Whether a controller of `class` acts on this job ([`TrainingJobSpec::managed_by`]).
    pub fn managed_by(&self, class: &str) -> bool {
        self.spec
            .managed_by
            .as_deref()
            .unwrap_or(DEFAULT_CONTROLLER_CLASS)
            == class
    }
}

/// `spec.managedBy` is set at creation or never, and never changes.
const MANAGED_BY_RULE: &str = "has(self.spec.managedBy) == has(oldSelf.spec.managedBy) && (!has(self.spec.managedBy) || self.spec.managedBy == oldSelf.spec.managedBy)";

/// Why a change of `spec.managedBy` is refused.
const MANAGED_BY_MESSAGE: &str =
    "spec.managedBy is immutable: another installation would act on a job this one started";

/// A job that has started (its phase past `Waiting`) keeps its roles: its pods were
/// made from them, and a gang restarted from a checkpoint must be the gang that wrote
/// it. A job still waiting may be changed.
const STARTED_ROLES_RULE: &str = "!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase == 'Waiting' || self.spec.roles == oldSelf.spec.roles";

/// Why a change to a started job's roles is refused.
const STARTED_ROLES_MESSAGE: &str = "spec.roles (templates, replicas, minReplicas, maxReplicas) cannot change once the job has started; delete the job and submit it again";

/// The rule on the job's name (see [`TrainingJob`]).
const NAME_RULE: &str =
    "self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')";

/// Why a job's name is refused.
const NAME_MESSAGE: &str = "the name must be a DNS label (lowercase letters, digits and '-', starting with a letter) of at most 63 characters: it names the job's Service and is a label value on its pods";

fn default_utility() -> f64 {
    1.0
}

fn default_backoff_limit() -> u32 {
    3
}

/// When a job has succeeded, as JobSet's `successPolicy` says it for replicated jobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessPolicy {
    /// The job has succeeded once every task of these roles has (`[worker]`: a
    /// parameter server never exits on its own). The pods of the other roles are then
    /// deleted.
    #[schemars(length(min = 1))]
    pub roles: Vec<String>,
}

/// One role of a job: `replicas` identical pods made from `template`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.minReplicas) || self.minReplicas <= self.replicas",
        "message": "minReplicas must not exceed replicas"},
    {"rule": "!has(self.maxReplicas) || self.replicas <= self.maxReplicas",
        "message": "replicas must not exceed maxReplicas"}
]))]
pub struct Role {
    /// Role name, a DNS label (`worker`); tasks are named `<role>-<index>`.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 40))]
    pub name: String,
    /// Replicas at submission.
    #[schemars(range(min = 1))]
    pub replicas: u32,
    /// Fewest replicas a rescale may leave (scalable role only; default `replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    /// Most replicas a rescale may start (scalable role only; default `replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    /// This is the role whose replica count the policy may change.
    #[serde(default)]
    pub scalable: bool,
    /// The pod each replica runs. The controller adds its labels, an owner reference
    /// and its placement scheduling gate, and once the policy chose a node, pins the
    /// pod there (required node affinity on `metadata.name`) and lifts the gate for
    /// kube-scheduler (or the scheduler the template names) to bind it. The first
    /// container is the training container unless `progress.log.container` names
    /// another.
    // The full PodTemplateSpec schema would make the CRD several thousand lines long and
    // too large for client-side apply; the API server checks the template when the
    // controller creates the pod, and a refusal becomes the `PodsCreated=False`
    // condition (reason `TemplateRejected`) with the API server's message.
    #[schemars(schema_with = "preserve_unknown_object")]
    pub template: PodTemplateSpec,
}

fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Where the job's progress comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Read samples from the training container's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogProgress>,
    /// Accept samples pushed to the controller's HTTP API
    /// (`POST /v1/jobs/<namespace>%2F<name>/loss`).
    #[serde(default)]
    pub push: bool,
}

/// A regular expression over the training container's log lines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogProgress {
    /// Regular expression (Rust `regex` syntax). The value is the group named `value`,
    /// or else the first group; the step is the group named `step` when there is one,
    /// otherwise steps count the matching lines. Example: `loss=(?P<value>[0-9.eE+-]+)`.
    #[schemars(length(min = 1))]
    pub pattern: String,
    /// The container whose log is read (default: the first container of the pod's role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// How to make the training process save a checkpoint before it is stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// How the request reaches the process.
    pub method: CheckpointMethod,
    /// Seconds the process has to save before its pod is deleted (annotation) or
    /// killed (signal).
    #[schemars(range(min = 1, max = 3600))]
    pub grace_period_seconds: u32,
}

/// How a checkpoint is requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CheckpointMethod {
    /// The pod is deleted with the grace period: the kubelet sends the container's stop
    /// signal (SIGTERM unless the image says otherwise) and the process saves on it.
    Signal,
    /// The controller sets the pod annotation `switchyard.dev/checkpoint-requested`
    /// (visible in the pod through a downward-API volume) and deletes the pod once the
    /// grace period has passed; other jobs are scheduled meanwhile.
    Annotation,
}

/// Lifecycle of a training job, as the controller reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Submitted, no pod placed yet.
    Waiting,
    /// Pods placed and running.
    Running,
    /// Checkpointing and restoring after a migration or a rescale.
    Restarting,
    /// Every pod of the job finished successfully.
    Succeeded,
    /// The job's pods failed more often than its `backoffLimit` allows.
    Failed,
}

/// One move of a job, as the status keeps it (the contract's `job-move`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MoveRecord {
    /// Seconds since the Unix epoch when it was applied.
    pub time: f64,
    /// What happened.
    pub kind: MoveKindRecord,
    /// A migration's purpose as the policy gave it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub purpose: String,
    /// Nodes the moved tasks were on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_nodes: Vec<String>,
    /// Nodes they are on after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to_nodes: Vec<String>,
}

/// What kind of move a job made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MoveKindRecord {
    /// Bound to nodes from waiting.
    Placed,
    /// Tasks moved, or marked in place.
    Migrated,
    /// Restarted with another replica count.
    Rescaled,
    /// Stopped at a checkpoint; waits again.
    Preempted,
}

impl From<&MoveRecord> for JobMove {
    fn from(m: &MoveRecord) -> Self {
        JobMove {
            time: m.time,
            kind: match m.kind {
                MoveKindRecord::Placed => MoveKind::Placed,
                MoveKindRecord::Migrated => MoveKind::Migrated,
                MoveKindRecord::Rescaled => MoveKind::Rescaled,
                MoveKindRecord::Preempted => MoveKind::Preempted,
            },
            purpose: m.purpose.clone(),
            from_nodes: m.from_nodes.clone(),
            to_nodes: m.to_nodes.clone(),
        }
    }
}

impl TrainingJobStatus {
    /// Adds a move to the history, keeping the most recent [`MOVE_HISTORY`].
    pub fn record_move(
        &mut self,
        kind: MoveKindRecord,
        purpose: &str,
        from: Vec<String>,
        to: Vec<String>,
        time: f64,
    ) {
        if self.moves.len() >= MOVE_HISTORY {
            self.moves.drain(..=self.moves.len() - MOVE_HISTORY);
        }
        self.moves.push(MoveRecord {
            time,
            kind,
            purpose: purpose.to_string(),
            from_nodes: from,
            to_nodes: to,
        });
    }
}

/// What the controller knows and has done about a job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingJobStatus {
    /// The `metadata.generation` of the spec the controller last wrote this status for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Where the job is in its lifecycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Where each task runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<Placement>,
    /// Labels the policy put on the job (e.g. SpeCon's `category=CC`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub policy_labels: BTreeMap<String, String>,
    /// What happened to the job so far, oldest first (the most recent 32): the
    /// contract's move history, kept here so that policies see the same history after
    /// the controller restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<MoveRecord>,
    /// Migrations carried out.
    #[serde(default)]
    pub migrations: u32,
    /// Rescales carried out.
    #[serde(default)]
    pub rescales: u32,
    /// Current replicas of the scalable role (absent: as submitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Pod failures counted against `backoffLimit`.
    #[serde(default)]
    pub failures: u32,
    /// Pods lost to disruptions (refused by their node, evicted, shut down), not
    /// counted against `backoffLimit`.
    #[serde(default)]
    pub disruptions: u32,
    /// Pods created so far start at generation 0; every restart raises it so
    /// replacement pods get fresh names.
    #[serde(default)]
    pub generation: u32,
    /// The most recent loss samples, oldest first, each step once (from the log and
    /// from pushes); a restarted controller reads them back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loss: Vec<LossSample>,
    /// A migration, rescale or preemption under way: the pods being stopped and where their
    /// replacements go. Written before the first pod is touched, so a restarted
    /// controller finishes the restart instead of starting another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<PendingRestart>,
    /// Conditions: `PodsCreated` (the job's pods were created and released to the
    /// scheduler; `False` with reason `TemplateRejected` when the API server refused a
    /// role's template, or `PlacementFailed`), `PodsScheduled` (`False` with the
    /// scheduler's reason when it refused a member and the gang was taken back),
    /// `CpuWeightApplied` (an in-place CPU resize was applied, or refused by the
    /// cluster) and `VolumesReady`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The Lease term (`leaseTransitions`) of the leader that last wrote this status: a
    /// replica of an earlier term writes it no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_term: Option<u64>,
    /// The last placement kube-scheduler, or a node's kubelet, refused, while the job has
    /// not run since:
    /// which nodes, why, and how many placements in a row were refused (the back-off
    /// before the job is offered again grows with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
}

/// A placement the scheduler or a node's kubelet refused
/// ([`TrainingJobStatus::refusal`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// The nodes the refused members were pinned to.
    pub nodes: Vec<String>,
    /// The scheduler's reason (`Unschedulable`, `SchedulerError`), or the kubelet's
    /// (`OutOfnvidia.com/gpu`, `UnexpectedAdmissionError`).
    pub reason: String,
    /// Who refused each refused pod, with their reason and message.
    pub message: String,
    /// Placements refused in a row.
    pub count: u32,
    /// RFC 3339 time it was taken back.
    pub time: String,
}

/// A restart of some of a job's pods (a migration) or all of them (a rescale), carried
/// out in stages while the controller keeps scheduling other jobs: ask for a
/// checkpoint, delete the pods once the grace period allows, and create the replacements
/// once the old pods have terminated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingRestart {
    /// What started it.
    pub action: RestartAction,
    /// The pods being stopped.
    pub stopping: Vec<String>,
    /// Where each replacement task goes.
    pub targets: Vec<TaskTarget>,
    /// RFC 3339 time the checkpoint was requested.
    pub requested_at: String,
    /// RFC 3339 time after which the pods are deleted (`Annotation` checkpoints); absent
    /// when they were deleted at once with the grace period (`Signal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_after: Option<String>,
    /// RFC 3339 time before which the job is not queued again (`Recover`: the back-off
    /// after a failure or a refused placement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// The policy's reason, repeated in the Event when the restart completes.
    pub reason: String,
}

/// What a restart carries out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RestartAction {
    /// Tasks move to another node. In an elastic job (its scalable role's
    /// `minReplicas` below its `maxReplicas`) the others keep running and rejoin the
    /// moved ones; in any other job every task restarts from the checkpoint with them,
    /// the others on the nodes they ran on, as a gang's processes cannot lose a member.
    Migrate,
    /// The whole job restarts with another replica count.
    Scale,
    /// A member failed, crash-looped, was evicted or deleted, or the scheduler refused
    /// it: the whole gang is stopped and the job goes back to the queue, after a
    /// back-off, for the policy to place again.
    Recover,
    /// The policy preempted the job: every pod saves a checkpoint and stops, and the
    /// job goes back to the queue; placed again, its pods restore the checkpoint.
    Preempt,
}

/// A task and the node its replacement pod is pinned to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskTarget {
    /// Task name (`worker-1`).
    pub task: String,
    /// Node.
    pub node: String,
}

/// One task bound to one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Task name (`worker-1`).
    pub task: String,
    /// Pod running it.
    pub pod: String,
    /// Node it is bound to.
    pub node: String,
}

/// One evaluation of the training objective.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LossSample {
    /// Unix seconds when the controller read it.
    pub time: f64,
    /// Training step.
    pub step: u64,
    /// Value.
    pub value: f64,
}

/// A condition in the usual Kubernetes shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `CpuWeightApplied`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// One CamelCase word.
    pub reason: String,
    /// A sentence for the operator.
    pub message: String,
    /// RFC 3339 time of the last change.
    pub last_transition_time: String,
}

impl TrainingJobSpec {
    /// Whether role `role` must finish for the job to succeed.
    pub fn success_needs(&self, role: &str) -> bool {
        self.success_policy
            .as_ref()
            .is_none_or(|p| p.roles.iter().any(|r| r == role))
    }

    /// The role whose replica count the policy may change: the one marked `scalable`,
    /// else the first.
    pub fn scalable_role(&self) -> Option<&Role> {
        self.roles
            .iter()
            .find(|r| r.scalable)
            .or_else(|| self.roles.first())
    }
}

/// The CRD as YAML, exactly as committed in `deploy/crd.yaml`.
pub fn crd_yaml() -> String {
    let body = serde_norway::to_string(&TrainingJob::crd())
        .expect("a CustomResourceDefinition always serialises to YAML");
    format!("# Generated by `switchyard crd`; do not edit. CI fails when this drifts.\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMITTED: &str = include_str!("../../../deploy/crd.yaml");
    const EXAMPLE: &str = include_str!("../../../examples/trainingjob.yaml");

    #[test]
    fn the_committed_crd_is_the_one_generated_from_the_types() {
        assert!(
            COMMITTED == crd_yaml(),
            "deploy/crd.yaml has drifted from the Rust types; regenerate it with\n    cargo run -- crd > deploy/crd.yaml"
        );
    }

    #[test]
    fn the_crd_serves_a_status_subresource_and_a_namespaced_kind() {
        let crd = TrainingJob::crd();
        assert_eq!(crd.spec.group, "switchyard.dev");
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
    }

    #[test]
    fn the_example_training_job_parses_and_its_pattern_compiles() {
        let job = example();
        let role = job.spec.scalable_role().expect("a scalable role");
        assert!(
            role.scalable
                && role.min_replicas <= Some(role.replicas)
                && role.max_replicas >= Some(role.replicas)
        );
        let log = job
            .spec
            .progress
            .log
            .as_ref()
            .expect("the example reads its log");
        crate::progress::LogPattern::compile("example", &log.pattern)
            .expect("the example's pattern compiles");
        assert!(job.spec.checkpoint.is_some());
    }

    fn example() -> TrainingJob {
        serde_norway::Deserializer::from_str(EXAMPLE)
            .map(|doc| serde_json::Value::deserialize(doc).expect("YAML"))
            .find(|doc| doc["kind"] == "TrainingJob")
            .map(|doc| serde_json::from_value(doc).expect("the example's TrainingJob parses"))
            .expect("examples/trainingjob.yaml has a TrainingJob")
    }

    /// The messages of the CEL rules `job` breaks, as the API server would answer them.
    fn refusals(job: &TrainingJob) -> String {
        match kube::core::cel::validate_cel(job) {
            Ok(()) => String::new(),
            Err(errors) => format!("{errors:?}"),
        }
    }

    #[test]
    fn the_api_server_accepts_the_example_and_refuses_jobs_the_controller_cannot_run() {
        assert_eq!(refusals(&example()), "", "the example passes every rule");
        let mut long = example();
        long.metadata.name = Some("a".repeat(64));
        assert!(refusals(&long).contains("at most 63 characters"));
        let mut upper = example();
        upper.metadata.name = Some("ResNet".into());
        assert!(refusals(&upper).contains("DNS label"));
        let mut twice = example();
        twice.spec.roles[0].name = "worker".into();
        assert!(refusals(&twice).contains("role names must be unique"));
        let mut two_scalable = example();
        two_scalable.spec.roles[0].scalable = true;
        assert!(refusals(&two_scalable).contains("at most one role may be scalable"));
        let mut inverted = example();
        inverted.spec.roles[1].min_replicas = Some(3);
        assert!(refusals(&inverted).contains("minReplicas must not exceed replicas"));
        let mut over = example();
        over.spec.roles[1].max_replicas = Some(1);
        assert!(refusals(&over).contains("replicas must not exceed maxReplicas"));
        let mut unknown = example();
        unknown.spec.success_policy = Some(SuccessPolicy {
            roles: vec!["evaluator".into()],
        });
        assert!(refusals(&unknown).contains("successPolicy.roles must name roles"));
    }

    /// The messages of the transition rules `updated` breaks against `old`.
    fn update_refusals(updated: &TrainingJob, old: &TrainingJob) -> String {
        match kube::core::cel::validate_cel_update(updated, old) {
            Ok(()) => String::new(),
            Err(errors) => format!("{errors:?}"),
        }
    }

    #[test]
    fn a_started_job_keeps_its_roles_and_no_job_changes_its_controller_class() {
        let waiting = example();
        let mut more = waiting.clone();
        more.spec.roles[1].max_replicas = Some(16);
        assert_eq!(
            update_refusals(&more, &waiting),
            "",
            "a waiting job may change"
        );
        let mut started = waiting.clone();
        started.status = Some(TrainingJobStatus {
            phase: Some(Phase::Running),
            ..TrainingJobStatus::default()
        });
        let mut grown = started.clone();
        grown.spec.roles[1].max_replicas = Some(16);
        assert!(
            update_refusals(&grown, &started).contains("cannot change once the job has started"),
            "{}",
            update_refusals(&grown, &started)
        );
        let mut priority = started.clone();
        priority.spec.priority = 9;
        assert_eq!(
            update_refusals(&priority, &started),
            "",
            "only the roles are kept"
        );
        let mut claimed = waiting.clone();
        claimed.spec.managed_by = Some("other.example/controller".into());
        assert!(update_refusals(&claimed, &waiting).contains("spec.managedBy is immutable"));
        assert!(update_refusals(&waiting, &claimed).contains("spec.managedBy is immutable"));
        assert_eq!(update_refusals(&claimed, &claimed), "");
        assert!(waiting.managed_by(DEFAULT_CONTROLLER_CLASS));
        assert!(!claimed.managed_by(DEFAULT_CONTROLLER_CLASS));
        assert!(claimed.managed_by("other.example/controller"));
    }

    #[test]
    fn a_role_without_a_scalable_mark_makes_the_first_role_the_replica_count() {
        let job: TrainingJob = serde_norway::from_str(
            "apiVersion: switchyard.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: a}\nspec:\n  roles:\n  - {name: ps, replicas: 1, template: {}}\n  - {name: worker, replicas: 3, template: {}}\n",
        )
        .unwrap();
        assert_eq!(job.spec.scalable_role().unwrap().name, "ps");
        assert_eq!(job.spec.utility, 1.0, "utility defaults to 1");
    }
}
