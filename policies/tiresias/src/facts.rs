//! What a round reads of a job: whether it holds nodes, whether the host would accept
//! its preemption, what its tasks ask for and how fast its service grows. Read from the
//! job's tasks when the job changes; [`crate::blob::Slot`] keeps them with the job.
//! Nothing here ranks or admits.

use switchyard_policy_sdk::{
    Job, JobPhase, Resources,
    cluster::{ResourcesExt, total_requests},
};

/// What a round needs of a job, read from its tasks when it changes.
#[derive(Clone, Debug)]
pub struct Facts {
    /// It has tasks on nodes ([`holds_resources`]).
    pub(crate) holds: bool,
    /// The host would accept its preemption now ([`preemptible`]).
    pub(crate) preemptible: bool,
    /// The sum of its tasks' requests.
    pub(crate) demand: Resources,
    /// What one second of its running counts as ([`width_of`]).
    pub(crate) width: f64,
}

impl Default for Facts {
    fn default() -> Self {
        Self {
            holds: false,
            preemptible: false,
            demand: Resources::zero(),
            width: 0.0,
        }
    }
}

impl Facts {
    /// `job`'s facts.
    pub(crate) fn of(job: &Job) -> Self {
        let demand = total_requests(&job.tasks);
        Self {
            holds: holds_resources(job),
            preemptible: preemptible(job),
            demand,
            width: width_of(&demand),
        }
    }
}

/// The job has tasks on nodes (running, or saving or restoring a checkpoint).
fn holds_resources(job: &Job) -> bool {
    job.phase != JobPhase::Waiting && job.tasks.iter().any(|t| t.node.is_some())
}

/// The host would accept a preemption now: running (not mid-restart) and able to save
/// a checkpoint.
fn preemptible(job: &Job) -> bool {
    job.checkpointable && job.phase == JobPhase::Running
}

/// What one second of running counts as for a job asking `total`: its GPUs, or its
/// cores when it has no GPU (at least a thousandth of a core, so a job asking nothing
/// still ages).
fn width_of(total: &Resources) -> f64 {
    if total.gpus > 0 {
        f64::from(total.gpus)
    } else {
        (total.cpu_millis as f64 / 1000.0).max(0.001)
    }
}
