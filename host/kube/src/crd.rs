//! The `TrainingJob` custom resource (`switchyard.dev/v1alpha1`): what a user submits
//! (roles with pod templates, priority, how progress is read, how to checkpoint) and the
//! status the controller keeps (placements, migrations, rescales, loss samples,
//! conditions). The CRD YAML in `deploy/crd.yaml` is generated from these types by
//! `switchyard crd`; this module must not talk to the API server.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::CustomResource;
use kube::core::CustomResourceExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod status;

use crate::progress::DEFAULT_LOG_PATTERN;

pub use status::{
    CheckpointRecord, CheckpointResult, Condition, LossSample, MoveKindRecord, MoveRecord,
    PendingRestart, Phase, Placement, Refusal, RestartAction, TaskTarget, TrainingJobStatus,
};

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
    /// Absent: the line the switchyard training library prints,
    /// `switchyard: step=<step> loss=<value>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub pattern: Option<String>,
    /// The container whose log is read (default: the first container of the pod's role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

impl LogProgress {
    /// The pattern lines are read with: the job's, or [`DEFAULT_LOG_PATTERN`].
    pub fn pattern(&self) -> &str {
        self.pattern.as_deref().unwrap_or(DEFAULT_LOG_PATTERN)
    }
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
        crate::progress::LogPattern::compile("example", log.pattern())
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
