//! The workload file's schema, as serde types. Every struct refuses unknown fields so a
//! typo is an error naming the field, not a silently ignored line.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use switchyard_core::{Resources, SelectorTerm, Taint, Toleration};

/// A whole workload file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Seed for generated arrivals and evaluation noise (`--seed` overrides it).
    #[serde(default)]
    pub seed: u64,
    /// The machines.
    pub cluster: ClusterFile,
    /// Simulator knobs.
    #[serde(default)]
    pub simulator: SimulatorFile,
    /// Job templates by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub templates: BTreeMap<String, JobTemplate>,
    /// Jobs to submit: a template, a count and how they arrive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<JobEntry>,
    /// Jobs imported from real traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportFile>,
}

/// The cluster's shape.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Node groups.
    pub nodes: Vec<NodeGroup>,
}

/// `count` identical nodes, named `name-0`, `name-1`, ... (just `name` when one).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    /// Name, or prefix of the names.
    pub name: String,
    /// How many.
    #[serde(default = "one")]
    pub count: u32,
    /// CPU cores each.
    pub cpus: f64,
    /// Memory each, GiB.
    pub memory_gib: f64,
    /// GPUs each.
    #[serde(default)]
    pub gpus: u32,
    /// Node labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Node taints (`{key, value, effect: NoSchedule|PreferNoSchedule|NoExecute}`):
    /// only jobs whose template tolerates them are placed there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// Simulator knobs.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SimulatorFile {
    /// Seconds of checkpoint/restore per migration (SpeCon measured under 5 s).
    #[serde(default = "migration_cost")]
    pub migration_cost: f64,
    /// Seconds of checkpoint/restart per re-scale (DRAGON measured 40-60 s).
    #[serde(default = "rescale_cost")]
    pub rescale_cost: f64,
    /// Seconds a preempted job saves its checkpoint, still holding its nodes.
    #[serde(default = "checkpoint_cost")]
    pub checkpoint_cost: f64,
    /// Seconds a job asked to checkpoint has before it is stopped anyway, losing the
    /// work since its last complete checkpoint; absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_grace: Option<f64>,
    /// Seconds a preempted job restores its checkpoint once placed again.
    #[serde(default = "restore_cost")]
    pub restore_cost: f64,
    /// Virtual seconds after which a run stops; unfinished jobs holding resources are
    /// reported as deadlocked.
    #[serde(default = "max_time")]
    pub max_time: f64,
    /// Co-location interference of CPU jobs: with `n` CPU-active tasks on a node, each
    /// works at `1 / (1 + interference (n - 1))` of its cores' speed (0 = ideal sharing).
    #[serde(default)]
    pub interference: f64,
    /// Seconds of no progress after a job is first placed whole (the Pollux artifact:
    /// 30 s); 0 = none.
    #[serde(default)]
    pub start_delay: f64,
    /// The share of each operation's actions that fail, as a real cluster's API calls
    /// can (none by default).
    #[serde(default)]
    pub faults: FaultsFile,
}

/// Failure rates per operation, each in [0, 1].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultsFile {
    /// Placements (the binds of a gang, all or none).
    #[serde(default)]
    pub place: f64,
    /// Migrations.
    #[serde(default)]
    pub migrate: f64,
    /// CPU weight changes (in-place resizes).
    #[serde(default)]
    pub set_cpu_weight: f64,
    /// Rescales.
    #[serde(default)]
    pub scale: f64,
    /// Preemptions.
    #[serde(default)]
    pub preempt: f64,
}

impl Default for SimulatorFile {
    fn default() -> Self {
        Self {
            migration_cost: migration_cost(),
            rescale_cost: rescale_cost(),
            checkpoint_cost: checkpoint_cost(),
            checkpoint_grace: None,
            restore_cost: restore_cost(),
            max_time: max_time(),
            interference: 0.0,
            start_delay: 0.0,
            faults: FaultsFile::default(),
        }
    }
}

/// One role of a distributed job.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoleFile {
    /// Role name (`ps`, `worker`, `scheduler`, `server`).
    pub name: String,
    /// Tasks of this role at submission.
    #[serde(default = "one")]
    pub count: u32,
    /// CPU cores each task requests.
    pub cpus: f64,
    /// Memory each task requests, GiB.
    pub memory_gib: f64,
    /// GPUs each task requests.
    #[serde(default)]
    pub gpus: u32,
    /// Most cores one task can use (default: its request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cores: Option<f64>,
    /// Seconds after the job's submission at which this role's tasks are created
    /// (default 0: with the job).
    #[serde(default)]
    pub create_after: f64,
}

/// Which role scales, and between which bounds.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleFile {
    /// The scalable role.
    pub role: String,
    /// Fewest replicas (default: the role's count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    /// Most replicas (default: the role's count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
}

/// A real evaluation curve to replay.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayedCurveFile {
    /// A Pollux `validation-<batch>.csv` (relative to the workload file).
    pub path: PathBuf,
    /// The metric improves by rising (accuracy).
    #[serde(default)]
    pub metric_rises: bool,
}

/// What a kind of job is.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JobTemplate {
    /// Work to do (steps, samples: the unit of `speed` or `throughput`).
    pub work: f64,
    /// CPU job: work per second on one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// Serial fraction of the CPU speed-up curve `c / (1 + s (c - 1))`.
    #[serde(default = "serial_fraction")]
    pub serial_fraction: f64,
    /// GPU job: work per second with 1, 2, ... replicas of the scalable role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<Vec<f64>>,
    /// GPU job: a DRAGON Fig. 2 table by model (`inceptionv3`, `resnet50`, `alexnet`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Single-container job: CPU cores requested.
    #[serde(default = "one_f")]
    pub cpus: f64,
    /// Single-container job: memory requested, GiB.
    #[serde(default = "one_f")]
    pub memory_gib: f64,
    /// Single-container job: GPUs requested.
    #[serde(default)]
    pub gpus: u32,
    /// Most cores a task can use (default: its request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cores: Option<f64>,
    /// Distributed job: its roles (replaces cpus/memory_gib/gpus).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleFile>,
    /// Elastic replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<ScaleFile>,
    /// Parametric evaluation curve: a preset (`vae`, `birnn`, `gru`, or `none`) or a
    /// shape of its own (`{first, last, share_at_20}`, what `replay --export-workload`
    /// fits to a recorded job's loss samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<CurveFile>,
    /// Replayed evaluation curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayedCurveFile>,
    /// Relative noise of each evaluation (standard deviation / value).
    #[serde(default = "noise")]
    pub noise: f64,
    /// Work between evaluation reports (default: work / 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_every: Option<f64>,
    /// Throughput multiplier when tasks span nodes.
    #[serde(default = "comm_penalty")]
    pub comm_penalty: f64,
    /// Can checkpoint and restore.
    #[serde(default = "yes")]
    pub checkpointable: bool,
    /// Seconds saving its checkpoint takes (default: `simulator.checkpoint_cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_cost: Option<f64>,
    /// Seconds it has to save its checkpoint once asked before it is stopped anyway,
    /// losing the work since its last complete checkpoint (default:
    /// `simulator.checkpoint_grace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_grace: Option<f64>,
    /// Who says its checkpoint is complete: `simulator` (after `checkpoint_cost`) or
    /// `api` (a training script's `POST /v1/jobs/{id}/checkpoint` in the live
    /// simulator, or the grace period's end).
    #[serde(default, skip_serializing_if = "Acknowledge::is_simulator")]
    pub acknowledge: Acknowledge,
    /// Priority.
    #[serde(default)]
    pub priority: i32,
    /// Utility.
    #[serde(default = "one_f")]
    pub utility: f64,
    /// Submission labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Node labels its tasks require (Kubernetes' `nodeSelector`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Taints its tasks tolerate (Kubernetes' `tolerations`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Node selector terms, one of which a node must match (Kubernetes'
    /// `requiredDuringSchedulingIgnoredDuringExecution` node affinity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_node_affinity: Vec<SelectorTerm>,
}

/// Who says a simulated job's checkpoint is complete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Acknowledge {
    /// The simulator, once the checkpoint cost is spent.
    #[default]
    Simulator,
    /// A client of the live controller's API (`POST /v1/jobs/{id}/checkpoint`).
    Api,
}

impl Acknowledge {
    fn is_simulator(&self) -> bool {
        *self == Acknowledge::Simulator
    }
}

/// A template's evaluation curve: a named preset, or the parametric family's own
/// parameters.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum CurveFile {
    /// `vae`, `birnn`, `gru` (SpeCon Fig. 1, from 1.0 down to 0.1) or `none`.
    Preset(String),
    /// From `first` to `last`, having done `share_at_20` of the change at 20% of the
    /// work (in [0.2, 1): 0.2 is a straight line). The metric rises when `last` is
    /// above `first`.
    Shape(CurveShape),
}

/// The parametric curve's parameters ([`CurveFile::Shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CurveShape {
    /// Value at the start.
    pub first: f64,
    /// Value at the end of the work.
    pub last: f64,
    /// Share of the whole change done by 20% of the work.
    pub share_at_20: f64,
}

/// Jobs of one template and how they arrive: exactly one of `at`, `every`, `uniform`,
/// `poisson`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JobEntry {
    /// Template name.
    pub template: String,
    /// How many jobs.
    #[serde(default = "one")]
    pub count: u32,
    /// Job id (with count 1) or id prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// All at this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
    /// One every this many seconds from `start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<f64>,
    /// Uniformly random in `[start, start + uniform]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uniform: Option<f64>,
    /// Poisson arrivals at this rate (jobs per second) from `start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poisson: Option<f64>,
    /// Start of generated arrivals.
    #[serde(default)]
    pub start: f64,
}

/// Resolved arrival pattern.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arrival {
    /// All at once.
    At(f64),
    /// Fixed interval.
    Every {
        /// First arrival.
        start: f64,
        /// Gap.
        interval: f64,
    },
    /// Uniform in `[start, start + within]`.
    Uniform {
        /// Window start.
        start: f64,
        /// Window length.
        within: f64,
    },
    /// Poisson process.
    Poisson {
        /// Process start.
        start: f64,
        /// Jobs per second.
        rate: f64,
    },
}

impl JobEntry {
    /// The one arrival pattern given, or a message saying what to give.
    pub(crate) fn arrival(&self) -> Result<Arrival, String> {
        let start = self.start;
        let given: Vec<Arrival> = [
            self.at.map(Arrival::At),
            self.every
                .map(|interval| Arrival::Every { start, interval }),
            self.uniform
                .map(|within| Arrival::Uniform { start, within }),
            self.poisson.map(|rate| Arrival::Poisson { start, rate }),
        ]
        .into_iter()
        .flatten()
        .collect();
        match given.as_slice() {
            [one] => Ok(one.clone()),
            [] if self.count <= 1 => Ok(Arrival::At(start)),
            _ => Err("give exactly one of at, every, uniform, poisson".into()),
        }
    }
}

/// Real traces to import.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImportFile {
    /// The Philly trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub philly: Option<PhillyImport>,
    /// A Pollux evaluation workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pollux: Option<PolluxImport>,
}

/// `philly.csv`, filtered by virtual cluster.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PhillyImport {
    /// Path of `philly.csv` (relative to the workload file).
    pub path: PathBuf,
    /// Virtual cluster id, e.g. `6214e9`; every cluster's jobs (the whole trace) when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Take the first this many jobs (by submission time); all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<usize>,
}

/// `workloads/workload-N.csv` of the Pollux artifact.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolluxImport {
    /// Path of the workload CSV (relative to the workload file).
    pub path: PathBuf,
    /// The folder holding `<model>/scalability.csv` and `validation-*.csv` (default:
    /// the workload CSV's grandparent folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
}

/// CPU cores, GiB and GPUs as [`Resources`].
pub(crate) fn resources(cpus: f64, memory_gib: f64, gpus: u32) -> Resources {
    Resources {
        cpu_millis: (cpus * 1000.0).round() as u64,
        memory_bytes: (memory_gib * (1u64 << 30) as f64).round() as u64,
        gpus,
    }
}

fn one() -> u32 {
    1
}
fn one_f() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn migration_cost() -> f64 {
    5.0
}
fn checkpoint_cost() -> f64 {
    5.0
}
fn restore_cost() -> f64 {
    5.0
}
fn rescale_cost() -> f64 {
    50.0
}
fn max_time() -> f64 {
    30.0 * 86400.0
}
fn serial_fraction() -> f64 {
    0.1
}
fn noise() -> f64 {
    0.01
}
fn comm_penalty() -> f64 {
    0.8
}
