//! Acknowledged checkpoints, as the live controller speaks of them with any cluster: a
//! checkpoint asked of a job's running tasks ([`CheckpointRequest`]), a task's word that
//! its checkpoint is completely written ([`CheckpointAck`], answered by
//! [`Acknowledged`] or refused with [`AckRefused`]), and how the last one ended
//! ([`LastCheckpoint`]: acknowledged, or timed out at the grace period). A cluster keeps
//! these per job; this module only names them, and decides nothing about when a job is
//! stopped (the simulator and the Kubernetes backend do).
//!
//! Times are cluster seconds: seconds since the Unix epoch on a real cluster, virtual
//! seconds from 0 in the simulator.

use serde::Serialize;

/// The job label a policy sees on a job whose last stop asked for a checkpoint: `"true"`
/// when every asked task acknowledged it (the job resumes where it stopped), `"false"`
/// when the grace period ended first (the work since its previous complete checkpoint is
/// lost).
pub const CHECKPOINT_KEPT_LABEL: &str = "switchyard.dev/checkpoint-kept";

/// Most bytes of a checkpoint path an acknowledgement may carry: a path, not a payload.
pub const CHECKPOINT_PATH_MAX_BYTES: usize = 4096;

/// Most bytes of a task name an acknowledgement may give: a Kubernetes name's limit.
pub const TASK_NAME_MAX_BYTES: usize = 253;

/// The checkpoint asked of a job now, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckpointRequest {
    /// A checkpoint is asked and not yet complete.
    pub requested: bool,
    /// When it was asked, cluster seconds.
    pub requested_at: Option<f64>,
    /// When the job is stopped whether or not it acknowledged, cluster seconds.
    pub deadline: Option<f64>,
    /// The asked tasks that acknowledged so far.
    pub acknowledged: Vec<String>,
}

/// A training process's word that its checkpoint is completely written.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointAck {
    /// Where the checkpoint is.
    pub path: String,
    /// The training step it holds, when the process says.
    pub step: Option<u64>,
    /// The task acknowledging; none acknowledges for every asked task of the job.
    pub task: Option<String>,
}

/// An acknowledgement taken.
#[derive(Clone, Debug, PartialEq)]
pub struct Acknowledged {
    /// Seconds from the request to this acknowledgement.
    pub after_seconds: f64,
    /// Asked tasks that have not acknowledged yet; empty: the checkpoint is complete and
    /// the job is stopped now.
    pub waiting_for: Vec<String>,
}

/// Why an acknowledgement was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AckRefused {
    /// No checkpoint is asked of the job: the acknowledgement comes late (the job was
    /// stopped at its grace period, or every task acknowledged already) or unasked.
    #[error(
        "no checkpoint is requested of job `{job}` now: the acknowledgement is late (the \
         grace period ended, or every task already acknowledged) or was never asked for; \
         acknowledge only after `GET /v1/jobs/{{id}}/checkpoint` says `requested: true`"
    )]
    NotRequested {
        /// The job.
        job: String,
    },
    /// The job finishes its checkpoints by itself (a simulated job whose template does
    /// not say `acknowledge: api`).
    #[error(
        "job `{job}` completes its checkpoints by itself and takes no acknowledgement; a \
         simulated job waits for one only when its template says `acknowledge: api`"
    )]
    NotAwaited {
        /// The job.
        job: String,
    },
    /// The task named is not one the checkpoint was asked of.
    #[error(
        "task `{task}` of job `{job}` was not asked to checkpoint; the asked tasks are: {asked}"
    )]
    UnknownTask {
        /// The job.
        job: String,
        /// The task named.
        task: String,
        /// The asked tasks, comma-separated.
        asked: String,
    },
    /// The task name is longer than any task's.
    #[error("the task name is {bytes} bytes; a task's name is at most {TASK_NAME_MAX_BYTES}")]
    BadTask {
        /// Its length in bytes.
        bytes: usize,
    },
    /// The path is empty or too long.
    #[error("the checkpoint path must be 1 to {CHECKPOINT_PATH_MAX_BYTES} bytes, got {bytes}")]
    BadPath {
        /// Its length in bytes.
        bytes: usize,
    },
}

impl AckRefused {
    /// No checkpoint is asked of `job` now: the one refusal every cluster gives a late,
    /// repeated or unasked acknowledgement.
    pub fn not_requested(job: &str) -> Self {
        AckRefused::NotRequested {
            job: job.to_string(),
        }
    }

    /// `task` of `job` is not among `asked`, the tasks the checkpoint was asked of,
    /// which the message lists.
    pub fn unknown_task<'a>(
        job: &str,
        task: String,
        asked: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        AckRefused::UnknownTask {
            job: job.to_string(),
            task,
            asked: asked.into_iter().collect::<Vec<_>>().join(", "),
        }
    }

    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            AckRefused::NotRequested { .. } => "not-requested",
            AckRefused::NotAwaited { .. } => "not-awaited",
            AckRefused::UnknownTask { .. } => "unknown-task",
            AckRefused::BadPath { .. } => "bad-path",
            AckRefused::BadTask { .. } => "bad-task",
        }
    }
}

impl CheckpointAck {
    /// Refuses a path that is empty or longer than [`CHECKPOINT_PATH_MAX_BYTES`], and a
    /// task name longer than [`TASK_NAME_MAX_BYTES`].
    pub fn check_path(&self) -> Result<(), AckRefused> {
        let bytes = self.path.len();
        if bytes == 0 || bytes > CHECKPOINT_PATH_MAX_BYTES {
            return Err(AckRefused::BadPath { bytes });
        }
        match self.task.as_deref().map(str::len) {
            Some(bytes) if bytes > TASK_NAME_MAX_BYTES => Err(AckRefused::BadTask { bytes }),
            _ => Ok(()),
        }
    }
}

/// How a checkpoint ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointOutcome {
    /// Every asked task acknowledged: the job was stopped then, its progress kept.
    Acknowledged,
    /// The grace period ended first: the job was stopped anyway, and the work since its
    /// previous complete checkpoint is lost.
    TimedOut,
}

impl CheckpointOutcome {
    /// The value of [`CHECKPOINT_KEPT_LABEL`] after a stop that ended so.
    pub fn kept_label(self) -> &'static str {
        match self {
            CheckpointOutcome::Acknowledged => "true",
            CheckpointOutcome::TimedOut => "false",
        }
    }
}

/// How a job's last checkpoint ended.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LastCheckpoint {
    /// `acknowledged` or `timed_out`.
    pub outcome: CheckpointOutcome,
    /// Seconds from the request to the acknowledgement, or to the grace period's end.
    pub seconds: f64,
    /// Where the checkpoint is, as the last acknowledgement said.
    pub path: Option<String>,
    /// When it ended, cluster seconds.
    pub at: f64,
}
