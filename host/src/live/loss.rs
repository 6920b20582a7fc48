//! Where loss samples pushed over the API go. A training job reports its evaluation
//! values to the controller; a real cluster backend keeps them with the job so the next
//! snapshot carries them. The simulator computes each job's loss from its workload curve
//! and cannot take outside samples without losing its determinism, so its sink checks
//! and counts them and says plainly that they are not used.

use serde::Serialize;

use crate::model::LossSample;

/// What happened to a pushed sample.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum LossAck {
    /// Kept: the job's next snapshot carries it.
    Accepted,
    /// Checked but not used, with the reason.
    Ignored {
        /// Why, for the operator.
        note: String,
    },
}

impl LossAck {
    /// `accepted` or `ignored`, for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LossAck::Accepted => "accepted",
            LossAck::Ignored { .. } => "ignored",
        }
    }
}

/// Receives loss samples for running jobs; one per cluster backend.
pub trait LossSink: Send {
    /// Takes a sample for `job` (known to be active).
    fn push(&mut self, job: &str, sample: LossSample) -> LossAck;
}

/// The simulator's sink: the simulator generates every job's loss itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimulatorLossSink;

impl LossSink for SimulatorLossSink {
    fn push(&mut self, job: &str, _: LossSample) -> LossAck {
        LossAck::Ignored {
            note: format!(
                "the simulator generates job `{job}`'s loss from its workload curve; the \
                 sample was checked and counted but is not fed to it (a real cluster \
                 backend keeps it)"
            ),
        }
    }
}
