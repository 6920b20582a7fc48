//! What the simulator is asked to simulate: nodes, jobs and knobs, already resolved from
//! a workload file (or built by hand in a test). No parsing happens here.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::curve::Curve;
use super::faults::Faults;
use super::goodput::Goodput;
use switchyard_core::{PlacementRules, Resources, RuledNode, Taint};

/// One machine.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// What it offers; `cpu_millis` is also the processor-sharing capacity.
    pub allocatable: Resources,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Node taints: only tasks tolerating them are placed there.
    pub taints: Vec<Taint>,
}

impl RuledNode for NodeSpec {
    fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }
    fn taints(&self) -> &[Taint] {
        &self.taints
    }
}

/// One role of a job (`main`, `ps`, `worker`, ...), with `count` identical tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleSpec {
    /// Role name.
    pub name: String,
    /// Tasks of this role at submission.
    pub count: u32,
    /// What each task requests.
    pub requests: Resources,
    /// Most cores one task can use (its processor-sharing demand).
    pub max_cores: f64,
    /// Seconds after the job's submission at which this role's tasks are created (0:
    /// with the job). Until then they are not in the snapshot and the job cannot run,
    /// as when an operator creates a job's pods role by role.
    pub create_after: f64,
}

/// How fast a job makes progress, in work units per second.
#[derive(Clone, Debug, PartialEq)]
pub enum Speed {
    /// CPU-bound: `per_core` work/s on one core for each task of the scalable role,
    /// times the speed-up of the cores it gets (Amdahl's law with `serial_fraction`:
    /// `c / (1 + s (c - 1))` for `c >= 1` cores, `c` below one).
    Cpu {
        /// Work per second on one core.
        per_core: f64,
        /// Serial fraction of the speed-up curve.
        serial_fraction: f64,
    },
    /// Measured throughput by replica count of the scalable role: entry `i` is the
    /// work/s with `i + 1` replicas; past the end it grows by the last increment.
    /// Shared by the jobs of one template.
    Table(Arc<[f64]>),
    /// The Pollux artifact's measured job model: progress per second from the step
    /// times measured at the scalable role's actual placement (GPUs per node), with
    /// gradient accumulation and statistical efficiency, changing at each epoch's end.
    /// Work is counted in the measurements' `progress` units.
    Goodput(Goodput),
}

/// One job, as submitted.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Unique id.
    pub id: String,
    /// Submission time, seconds.
    pub submit_time: f64,
    /// Scheduling priority.
    pub priority: i32,
    /// Utility of finishing it.
    pub utility: f64,
    /// Its roles, in task order; shared by the jobs of one template.
    pub roles: Arc<[RoleSpec]>,
    /// Name of the role whose replica count may change.
    pub scalable_role: String,
    /// Fewest replicas of the scalable role.
    pub min_replicas: u32,
    /// Most replicas of the scalable role.
    pub max_replicas: u32,
    /// Work to do before it finishes.
    pub work: f64,
    /// How fast it works.
    pub speed: Speed,
    /// Throughput multiplier when its tasks span several nodes (1 = no penalty).
    pub comm_penalty: f64,
    /// Its evaluation curve, if it reports one.
    pub curve: Option<Arc<Curve>>,
    /// Relative noise added to each evaluation (standard deviation / value).
    pub noise: f64,
    /// Work between two evaluation reports.
    pub eval_every: f64,
    /// The metric improves by rising.
    pub metric_rises: bool,
    /// Can checkpoint and restore.
    pub checkpointable: bool,
    /// How it saves a checkpoint when it is stopped.
    pub checkpoint: CheckpointSpec,
    /// Submission labels, shared by the jobs of one template.
    pub labels: Arc<BTreeMap<String, String>>,
    /// Where its tasks may run (node selector, tolerations, required affinity), shared
    /// by the jobs of one template.
    pub placement: Arc<PlacementRules>,
}

/// How a job saves a checkpoint when a migration, a rescale or a preemption stops it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckpointSpec {
    /// Seconds saving it takes; none: [`SimConfig::checkpoint_cost`]. A preempted job
    /// holds its nodes that long (or until its grace period ends); a migration or a
    /// rescale is charged its own cost whatever this is, and this only decides whether
    /// its checkpoint is complete within the grace period.
    pub cost: Option<f64>,
    /// Seconds a job asked to checkpoint has before it is stopped anyway, its
    /// checkpoint incomplete; none: [`SimConfig::checkpoint_grace`].
    pub grace: Option<f64>,
    /// The job's checkpoint completes only when it is acknowledged over the API
    /// (`POST /v1/jobs/{id}/checkpoint`), or times out at its grace period: a real
    /// training script drives the job in the live simulator. Needs a grace period.
    pub acknowledged_by_api: bool,
}

/// Simulator knobs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimConfig {
    /// Seconds a migration's checkpoint and restore cost, charged once per migration.
    pub migration_cost: f64,
    /// Seconds a re-scale's checkpoint and restart cost, charged once per re-scale.
    pub rescale_cost: f64,
    /// Seconds a preempted job spends saving its checkpoint, holding its nodes and
    /// making no progress, before it releases them.
    pub checkpoint_cost: f64,
    /// Seconds a job asked to checkpoint has before it is stopped anyway, for jobs
    /// whose template gives none; none: no limit, every checkpoint completes. A
    /// checkpoint that takes longer is timed out: the job loses the work since its last
    /// complete checkpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_grace: Option<f64>,
    /// Seconds a preempted job spends restoring its checkpoint once placed again,
    /// before it makes progress (on top of `start_delay`).
    pub restore_cost: f64,
    /// Virtual time at which a run stops; jobs still holding resources then are
    /// reported as deadlocked.
    pub max_time: f64,
    /// Seed of the simulator's random numbers (evaluation noise).
    pub seed: u64,
    /// Co-location interference of CPU jobs: a CPU-speed task sharing its node with
    /// `n - 1` other CPU-active tasks works at `1 / (1 + interference (n - 1))` of the
    /// speed its cores alone would give (threads, caches and memory bandwidth contend).
    /// 0 = ideal processor sharing. Jobs with a measured throughput table are unaffected.
    pub interference: f64,
    /// Seconds of no progress after a job first has all its tasks bound (containers
    /// starting, data loading): the Pollux artifact charges 30 s on every allocation.
    /// 0 = a job works from the moment it is placed.
    pub start_delay: f64,
    /// The share of each operation's actions that fail (none by default).
    pub faults: Faults,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            migration_cost: 5.0,
            rescale_cost: 50.0,
            checkpoint_cost: 5.0,
            checkpoint_grace: None,
            restore_cost: 5.0,
            max_time: 365.0 * 86400.0,
            seed: 0,
            interference: 0.0,
            start_delay: 0.0,
            faults: Faults::default(),
        }
    }
}

/// Everything one simulation needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The machines.
    pub nodes: Vec<NodeSpec>,
    /// The jobs, in submission order.
    pub jobs: Vec<JobSpec>,
    /// Knobs.
    pub config: SimConfig,
}
