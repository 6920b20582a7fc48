//! Loss samples pushed over the API, and the bounded series a job's samples are kept in.
//! A training job reports its evaluation values to the controller; the cluster keeps
//! them with the job so the next snapshot carries them. [`LossSeries`] is the one place
//! that decides what a series holds: the most recent [`LOSS_WINDOW`] samples, each step
//! once (a log line read twice, or a step replayed after a restore from a checkpoint, is
//! not taken again).

use std::collections::VecDeque;

use serde::Serialize;

use switchyard_core::LossSample;

/// Most recent loss samples kept per job.
pub const LOSS_WINDOW: usize = 64;

/// The largest magnitude a loss sample may have. Losses, accuracies and error rates
/// are far below it; a larger value is a broken or hostile reporter, and would overflow
/// the normalisations policies compute from a series.
pub const LOSS_MAGNITUDE_MAX: f64 = 1e9;

/// Whether `value` can be a loss sample: finite and at most [`LOSS_MAGNITUDE_MAX`] in
/// magnitude.
pub fn is_loss_value(value: f64) -> bool {
    value.is_finite() && value.abs() <= LOSS_MAGNITUDE_MAX
}

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

/// One job's most recent samples, oldest first, each step at most once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LossSeries {
    samples: VecDeque<LossSample>,
}

impl LossSeries {
    /// A series holding the last [`LOSS_WINDOW`] of `samples` (what a restarted
    /// controller reads back).
    pub fn from_samples(samples: impl IntoIterator<Item = LossSample>) -> Self {
        let mut series = Self::default();
        for s in samples {
            series.record(s.time, Some(s.step), s.value);
        }
        series
    }

    /// Adds a sample taken at `time`. `step: None` (a log pattern without a step group)
    /// means the step after the last one. Returns false, keeping nothing, when the step
    /// is already in the series or the value cannot be a loss ([`is_loss_value`]).
    pub fn record(&mut self, time: f64, step: Option<u64>, value: f64) -> bool {
        if !is_loss_value(value) {
            return false;
        }
        let step = match step {
            Some(step) => step,
            None => self.samples.back().map_or(1, |s| s.step + 1),
        };
        if self.samples.iter().any(|s| s.step == step) {
            return false;
        }
        if self.samples.len() == LOSS_WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(LossSample { time, step, value });
        true
    }

    /// The samples, oldest first.
    pub fn to_vec(&self) -> Vec<LossSample> {
        self.samples.iter().copied().collect()
    }

    /// Whether the series is exactly `samples`, oldest first.
    pub fn matches(&self, samples: &[LossSample]) -> bool {
        self.samples.iter().eq(samples)
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_already_in_the_series_is_not_taken_twice() {
        let mut series = LossSeries::default();
        assert!(series.record(1.0, Some(100), 2.9));
        assert!(series.record(2.0, Some(200), 2.7));
        assert!(!series.record(3.0, Some(100), 2.9), "a re-read line");
        let steps: Vec<u64> = series.to_vec().iter().map(|s| s.step).collect();
        assert_eq!(steps, vec![100, 200]);
    }

    #[test]
    fn samples_without_a_step_continue_after_the_last_one() {
        let mut series = LossSeries::from_samples([LossSample {
            time: 0.0,
            step: 7,
            value: 1.0,
        }]);
        assert!(series.record(1.0, None, 0.9));
        assert_eq!(series.to_vec().last().unwrap().step, 8);
    }

    #[test]
    fn the_series_keeps_only_the_most_recent_window() {
        let mut series = LossSeries::default();
        for step in 0..(LOSS_WINDOW as u64 + 10) {
            series.record(step as f64, Some(step), 1.0);
        }
        let kept = series.to_vec();
        assert_eq!(kept.len(), LOSS_WINDOW);
        assert_eq!(kept[0].step, 10);
    }
}
