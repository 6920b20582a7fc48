//! Normalised evaluation series: what SpeCon's gain and FlowCon's progress are computed
//! from.
//!
//! The papers compare the change of a job's evaluation function with a threshold
//! described as a percentage, so the value is divided by a per-job scale first. The
//! snapshot only carries the most recent samples, so the scale is remembered in the
//! policy's state ([`Scale`] is serde-ready). This module owns the arithmetic only; when
//! to evaluate is the policy's business.

use serde::{Deserialize, Serialize};

use crate::LossSeries;

/// What a job's evaluation values are divided by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Normalisation {
    /// The first evaluation value the policy saw for the job (its first non-zero one
    /// when the first is zero, as an accuracy curve starting at 0 would be).
    Initial,
    /// The largest |value| seen so far for the job.
    Max,
}

impl Normalisation {
    /// The words an operator writes for the parameter.
    pub const CHOICES: &'static [&'static str] = &["initial", "max"];

    /// Parses one of [`Normalisation::CHOICES`].
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "initial" => Some(Self::Initial),
            "max" => Some(Self::Max),
            _ => None,
        }
    }
}

/// The per-job divisor, kept in the policy's state between calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    base: Option<f64>,
}

impl Scale {
    /// Takes the job's current samples into account (idempotent for repeated samples).
    pub fn observe(&mut self, mode: Normalisation, samples: &LossSeries) {
        // An initial base never changes: policies call this for every job every round,
        // and walking the samples again would only confirm it.
        if mode == Normalisation::Initial && self.base.is_some() {
            return;
        }
        for value in &samples.values {
            let magnitude = value.abs();
            if !magnitude.is_finite() || magnitude == 0.0 {
                continue;
            }
            self.base = match (mode, self.base) {
                (Normalisation::Initial, Some(base)) => Some(base),
                (Normalisation::Initial, None) => Some(magnitude),
                (Normalisation::Max, base) => Some(base.map_or(magnitude, |b| b.max(magnitude))),
            };
        }
    }

    /// `value / base`, or `None` until a non-zero value has been seen.
    pub fn normalise(&self, value: f64) -> Option<f64> {
        self.base.map(|b| value / b)
    }
}

/// The evaluation value as of `time`: the latest sample taken at or before it (the papers:
/// "when queried in the middle of an iteration, the previous value is returned").
pub fn value_at(samples: &LossSeries, time: f64) -> Option<f64> {
    samples
        .times
        .iter()
        .zip(&samples.values)
        .rev()
        .find(|&(&taken, _)| taken <= time + 1e-9)
        .map(|(_, &value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::loss_series as samples;

    #[test]
    fn initial_normalisation_keeps_the_first_value_for_ever() {
        let mut scale = Scale::default();
        scale.observe(Normalisation::Initial, &samples(&[(1.0, 4.0), (2.0, 8.0)]));
        scale.observe(Normalisation::Initial, &samples(&[(3.0, 16.0)]));
        assert_eq!(scale.normalise(2.0), Some(0.5));
    }

    #[test]
    fn max_normalisation_follows_the_largest_magnitude() {
        let mut scale = Scale::default();
        scale.observe(
            Normalisation::Max,
            &samples(&[(1.0, 0.0), (2.0, -5.0), (3.0, 2.0)]),
        );
        assert_eq!(scale.normalise(1.0), Some(0.2));
    }

    #[test]
    fn an_all_zero_series_has_no_scale_yet() {
        let mut scale = Scale::default();
        scale.observe(Normalisation::Initial, &samples(&[(1.0, 0.0)]));
        assert_eq!(scale.normalise(1.0), None);
    }

    #[test]
    fn the_value_between_two_samples_is_the_earlier_one() {
        let s = samples(&[(10.0, 3.0), (20.0, 2.0)]);
        assert_eq!(value_at(&s, 15.0), Some(3.0));
        assert_eq!(value_at(&s, 20.0), Some(2.0));
        assert_eq!(value_at(&s, 5.0), None);
    }
}
