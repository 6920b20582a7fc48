//! Statistics of completion times that stay honest when some jobs have not finished, and
//! of figures repeated over seeds.
//!
//! A job still waiting or running when a report is made has a completion time of *at
//! least* its age: it is censored, not missing. The mean over finished jobs drops those
//! jobs, and they are the slow ones, so it favours whichever arm has finished least. This
//! module counts them instead:
//!
//! - [`KaplanMeier`]: the product-limit estimate of the share of jobs not yet complete
//!   after each duration, with Greenwood's variance;
//! - [`CompletionStats`]: per arm or run, the jobs counted, finished and unfinished, the
//!   Kaplan-Meier median and the restricted mean (the mean completion time capped at a
//!   horizon that every job was observed to) with 95 % confidence intervals;
//! - [`Difference`]: arm B's restricted mean minus arm A's at a horizon common to both;
//! - [`mean_interval`] and [`paired_interval`]: a Student-t interval of a figure over
//!   seeds, and of its per-seed difference against a baseline;
//! - [`binomial_p_value`]: whether a split's arms differ in size beyond chance.
//!
//! Every interval is analytic (Greenwood's formula, the normal and Student-t quantiles
//! from `statrs`): the same jobs give the same interval, on every call and every machine.
//! `docs/statistics.md` says why these estimators. It computes and holds no state; what a
//! figure is measured on (which jobs, which clock) is the caller's.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ContinuousCDF, Discrete, Normal, StudentsT};

/// The confidence level of every interval here.
pub const CONFIDENCE: f64 = 0.95;

/// The p-value below which a split's arm sizes are reported as unbalanced.
pub const IMBALANCE_P_VALUE: f64 = 0.01;

/// One job's completion time as observed: finished after `duration`, or still unfinished
/// at an age of `duration` (censored).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Seconds from submission to finish, or to the observation time when unfinished.
    pub duration: f64,
    /// Whether the job finished.
    pub finished: bool,
}

impl Observation {
    /// A job submitted at `submit` that finished at `finish`, or is still unfinished at
    /// `now`.
    pub fn of(submit: f64, finish: Option<f64>, now: f64) -> Self {
        match finish {
            Some(finish) => Self {
                duration: (finish - submit).max(0.0),
                finished: true,
            },
            None => Self {
                duration: (now - submit).max(0.0),
                finished: false,
            },
        }
    }
}

/// An estimate and its 95 % confidence interval; a bound is `None` when the data do not
/// reach it (a median's upper bound while too few jobs have finished).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// Lower bound of the interval.
    pub low: Option<f64>,
    /// Upper bound of the interval.
    pub high: Option<f64>,
}

impl Estimate {
    /// Whether the interval excludes zero (a difference that is significant at the
    /// 5 % level); an interval with an open end never does.
    pub fn excludes_zero(&self) -> bool {
        match (self.low, self.high) {
            (Some(low), Some(high)) => low > 0.0 || high < 0.0,
            _ => false,
        }
    }
}

/// One step of a Kaplan-Meier curve: at `time`, `events` of the `at_risk` jobs finished.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SurvivalStep {
    /// The duration at which jobs finished.
    pub time: f64,
    /// Jobs neither finished nor censored before `time`.
    pub at_risk: usize,
    /// Jobs that finished at `time`.
    pub events: usize,
    /// Share of jobs not complete just after `time`.
    pub survival: f64,
    /// Greenwood's sum up to `time`: the variance of `ln survival`.
    pub greenwood: f64,
}

/// The Kaplan-Meier (product-limit) estimate of the share of jobs still incomplete after
/// each duration. A job censored at the time another finishes counts as at risk then,
/// as is the convention.
#[derive(Clone, Debug, PartialEq)]
pub struct KaplanMeier {
    steps: Vec<SurvivalStep>,
    /// The longest observed duration, finished or not.
    last_observed: f64,
}

/// The two-sided normal quantile of [`CONFIDENCE`].
fn z() -> f64 {
    Normal::standard().inverse_cdf(0.5 + CONFIDENCE / 2.0)
}

impl KaplanMeier {
    /// The estimate from `observations` (in any order; non-finite durations are ignored).
    pub fn new(observations: &[Observation]) -> Self {
        let mut sorted: Vec<Observation> = observations
            .iter()
            .copied()
            .filter(|o| o.duration.is_finite())
            .collect();
        sorted.sort_by(|a, b| a.duration.total_cmp(&b.duration));
        let mut steps = Vec::new();
        let (mut survival, mut greenwood) = (1.0, 0.0);
        let mut at_risk = sorted.len();
        let mut i = 0;
        while i < sorted.len() {
            let time = sorted[i].duration;
            let same = sorted[i..]
                .iter()
                .take_while(|o| o.duration == time)
                .count();
            let events = sorted[i..i + same].iter().filter(|o| o.finished).count();
            if events > 0 {
                survival *= 1.0 - events as f64 / at_risk as f64;
                if events < at_risk {
                    greenwood += events as f64 / (at_risk as f64 * (at_risk - events) as f64);
                }
                steps.push(SurvivalStep {
                    time,
                    at_risk,
                    events,
                    survival,
                    greenwood,
                });
            }
            at_risk -= same;
            i += same;
        }
        Self {
            steps,
            last_observed: sorted.last().map_or(0.0, |o| o.duration),
        }
    }

    /// The steps, one per distinct duration at which a job finished.
    pub fn steps(&self) -> &[SurvivalStep] {
        &self.steps
    }

    /// The longest observed duration, finished or not.
    pub fn last_observed(&self) -> f64 {
        self.last_observed
    }

    /// The pointwise 95 % band of the survival just after `step`, on the log-log scale
    /// (Kalbfleisch and Prentice), so it stays within [0, 1]: `(lower, upper)`.
    fn band(step: &SurvivalStep) -> (f64, f64) {
        let s = step.survival;
        if s <= 0.0 {
            return (0.0, 0.0);
        }
        if s >= 1.0 {
            return (1.0, 1.0);
        }
        let spread = z() * step.greenwood.sqrt() / s.ln().abs();
        (s.powf(spread.exp()), s.powf((-spread).exp()))
    }

    /// The median completion time (the first duration at which at most half the jobs
    /// are incomplete), with the interval of the durations at which the pointwise band
    /// holds 0.5 (Brookmeyer and Crowley). `None` while more than half are incomplete.
    pub fn median(&self) -> Option<Estimate> {
        let first =
            |f: &dyn Fn(&SurvivalStep) -> bool| self.steps.iter().find(|s| f(s)).map(|s| s.time);
        let value = first(&|s| s.survival <= 0.5)?;
        Some(Estimate {
            value,
            low: first(&|s| Self::band(s).0 <= 0.5),
            high: first(&|s| Self::band(s).1 <= 0.5),
        })
    }

    /// The area under the curve from 0 to `horizon`: the mean completion time with every
    /// time capped at `horizon` (the restricted mean), with its analytic 95 % interval
    /// (the variance `sum A_i^2 d_i / (n_i (n_i - d_i))`, `A_i` the area from step `i`
    /// to the horizon).
    pub fn restricted_mean(&self, horizon: f64) -> Estimate {
        let (value, variance) = self.restricted(horizon);
        let half = z() * variance.sqrt();
        Estimate {
            value,
            low: Some(value - half),
            high: Some(value + half),
        }
    }

    /// The restricted mean at `horizon` and its variance.
    fn restricted(&self, horizon: f64) -> (f64, f64) {
        // The area from each step to the horizon, accumulated from the last step back.
        let mut area_after = vec![0.0; self.steps.len()];
        let mut area = 0.0;
        let mut until = horizon;
        for (i, step) in self.steps.iter().enumerate().rev() {
            if step.time >= horizon {
                continue;
            }
            area += step.survival * (until - step.time);
            until = step.time;
            area_after[i] = area;
        }
        // Before the first step every job is incomplete: S = 1.
        let value = area + until.max(0.0);
        let variance = self
            .steps
            .iter()
            .zip(&area_after)
            .filter(|(s, _)| s.time < horizon && s.events < s.at_risk)
            .map(|(s, a)| a * a * s.events as f64 / (s.at_risk * (s.at_risk - s.events)) as f64)
            .sum();
        (value, variance)
    }
}

/// Completion times of one arm or run, counting unfinished jobs as censored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionStats {
    /// Jobs counted.
    pub jobs: usize,
    /// Of those, jobs that finished.
    pub finished: usize,
    /// Of those, jobs waiting or running at the observation time (censored at their age).
    pub unfinished: usize,
    /// Kaplan-Meier median completion time, seconds; `None` while more than half are
    /// unfinished.
    pub median: Option<Estimate>,
    /// The horizon of `restricted_mean`, seconds: the longest time every counted job
    /// could have been observed to (the oldest job's age or completion).
    pub horizon: Option<f64>,
    /// Mean completion time with each job's time capped at `horizon`, seconds (equal to
    /// the plain mean when every job finished).
    pub restricted_mean: Option<Estimate>,
}

impl CompletionStats {
    /// The figures of `observations`, the restricted mean up to their longest duration.
    pub fn of(observations: &[Observation]) -> Self {
        let km = KaplanMeier::new(observations);
        let horizon = (!observations.is_empty()).then(|| km.last_observed());
        Self::with(observations, &km, horizon)
    }

    fn with(observations: &[Observation], km: &KaplanMeier, horizon: Option<f64>) -> Self {
        let finished = observations.iter().filter(|o| o.finished).count();
        Self {
            jobs: observations.len(),
            finished,
            unfinished: observations.len() - finished,
            median: km.median(),
            horizon,
            restricted_mean: horizon.map(|h| km.restricted_mean(h)),
        }
    }
}

/// Two arms compared: each arm's figures with the restricted mean at a common horizon,
/// and B's minus A's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// The common horizon, seconds: the shorter of the two arms' longest observations.
    pub horizon: f64,
    /// B's restricted mean minus A's, seconds, with its interval (normal, the two
    /// variances added: the arms' jobs are distinct).
    pub b_minus_a: Estimate,
    /// Whether the interval excludes zero.
    pub significant: bool,
}

/// Each arm's [`CompletionStats`], both restricted means taken at the common horizon,
/// and their [`Difference`] (`None` when an arm has no job).
pub fn compare_arms(
    a: &[Observation],
    b: &[Observation],
) -> (CompletionStats, CompletionStats, Option<Difference>) {
    let (km_a, km_b) = (KaplanMeier::new(a), KaplanMeier::new(b));
    let horizon =
        (!a.is_empty() && !b.is_empty()).then(|| km_a.last_observed().min(km_b.last_observed()));
    let Some(horizon) = horizon else {
        return (CompletionStats::of(a), CompletionStats::of(b), None);
    };
    let stats_a = CompletionStats::with(a, &km_a, Some(horizon));
    let stats_b = CompletionStats::with(b, &km_b, Some(horizon));
    let ((mean_a, variance_a), (mean_b, variance_b)) =
        (km_a.restricted(horizon), km_b.restricted(horizon));
    let value = mean_b - mean_a;
    let half = z() * (variance_a + variance_b).sqrt();
    let b_minus_a = Estimate {
        value,
        low: Some(value - half),
        high: Some(value + half),
    };
    let difference = Difference {
        horizon,
        b_minus_a,
        significant: b_minus_a.excludes_zero(),
    };
    (stats_a, stats_b, Some(difference))
}

/// The mean of `values` with its Student-t 95 % interval (`n - 1` degrees of freedom);
/// one value has no interval, none has no mean.
pub fn mean_interval(values: &[f64]) -> Option<Estimate> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some(Estimate {
            value: mean,
            low: None,
            high: None,
        });
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .map(|t| t.inverse_cdf(0.5 + CONFIDENCE / 2.0))
        .unwrap_or(f64::NAN);
    let half = t * (variance / n as f64).sqrt();
    Some(Estimate {
        value: mean,
        low: Some(mean - half),
        high: Some(mean + half),
    })
}

/// The mean per-pair difference `b - a` with its Student-t interval: the seeds pair the
/// runs, so each seed's workload is compared with itself.
pub fn paired_interval(a: &[f64], b: &[f64]) -> Option<Estimate> {
    let differences: Vec<f64> = a.iter().zip(b).map(|(a, b)| b - a).collect();
    mean_interval(&differences)
}

/// The exact two-sided binomial test: the probability, with `n` jobs each sent to arm B
/// with probability `p`, of a count of B as unlikely as `k` or less likely.
pub fn binomial_p_value(k: u64, n: u64, p: f64) -> f64 {
    let Ok(binomial) = Binomial::new(p.clamp(0.0, 1.0), n) else {
        return 1.0;
    };
    let observed = binomial.pmf(k);
    // A relative tolerance, so outcomes exactly as likely as `k` (the mirror image at
    // p = 0.5) count despite rounding.
    let bound = observed * (1.0 + 1e-7);
    (0..=n)
        .map(|i| binomial.pmf(i))
        .filter(|&q| q <= bound)
        .sum::<f64>()
        .min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(duration: f64) -> Observation {
        Observation {
            duration,
            finished: true,
        }
    }

    fn running(duration: f64) -> Observation {
        Observation {
            duration,
            finished: false,
        }
    }

    fn close(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() < 1e-3,
            "{actual} is not {expected}"
        );
    }

    /// Five jobs: finished after 2, 4 and 5 s; unfinished at ages 3 and 6 s.
    ///
    /// | t | at risk n | finished d | S(t) = prod (1 - d/n) | Greenwood sum d/(n(n-d)) |
    /// | 2 | 5 | 1 | 4/5 = 0.8         | 1/20 = 0.05      |
    /// | 4 | 3 | 1 | 0.8 * 2/3 = 0.5333 | + 1/6 = 0.21667 |
    /// | 5 | 2 | 1 | 0.5333 / 2 = 0.2667 | + 1/2 = 0.71667 |
    ///
    /// (the job censored at 3 s leaves the risk set between 2 and 4 s.)
    ///
    /// Median: the first t with S <= 0.5 is 5 s. Its interval: the log-log band at each
    /// step is S^exp(+-1.96 sqrt(G)/|ln S|): at 2 s (0.204, 0.969), at 4 s (0.068,
    /// 0.863), at 5 s (0.0097, 0.686). The lower band first reaches 0.5 at 2 s; the
    /// upper never does, so the interval is [2 s, open).
    ///
    /// Restricted mean to the horizon 6 s (the oldest observation): the area under S,
    /// 2 * 1 + 2 * 0.8 + 1 * 0.5333 + 1 * 0.2667 = 4.4 s. Its variance sums
    /// A_i^2 d_i / (n_i (n_i - d_i)) with A_i the area from step i to 6 s: A = 2.4 at
    /// 2 s (2.4^2 / 20 = 0.288), 0.8 at 4 s (0.64 / 6 = 0.10667), 0.2667 at 5 s
    /// (0.07111 / 2 = 0.03556): 0.43022, standard error 0.65591, so the interval is
    /// 4.4 -+ 1.95996 * 0.65591 = [3.1144, 5.6856].
    ///
    /// The mean over finished jobs alone, (2 + 4 + 5) / 3 = 3.67 s, lies below the
    /// interval: it drops the two jobs that are at least 3 and 6 s.
    #[test]
    fn kaplan_meier_counts_unfinished_jobs_as_censored_as_worked_out_by_hand() {
        let jobs = [done(4.0), running(6.0), done(2.0), running(3.0), done(5.0)];
        let km = KaplanMeier::new(&jobs);
        let steps = km.steps();
        assert_eq!(steps.len(), 3);
        for (step, (time, at_risk, survival, greenwood)) in steps.iter().zip([
            (2.0, 5, 0.8, 0.05),
            (4.0, 3, 0.53333, 0.21667),
            (5.0, 2, 0.26667, 0.71667),
        ]) {
            assert_eq!((step.time, step.at_risk, step.events), (time, at_risk, 1));
            close(step.survival, survival);
            close(step.greenwood, greenwood);
        }
        let stats = CompletionStats::of(&jobs);
        assert_eq!((stats.jobs, stats.finished, stats.unfinished), (5, 3, 2));
        let median = stats.median.unwrap();
        assert_eq!(
            (median.value, median.low, median.high),
            (5.0, Some(2.0), None)
        );
        assert_eq!(stats.horizon, Some(6.0));
        let mean = stats.restricted_mean.unwrap();
        close(mean.value, 4.4);
        close(mean.low.unwrap(), 3.1144);
        close(mean.high.unwrap(), 5.6856);
    }

    #[test]
    fn with_every_job_finished_the_restricted_mean_is_the_plain_mean() {
        let jobs = [done(10.0), done(20.0), done(30.0), done(40.0)];
        let stats = CompletionStats::of(&jobs);
        close(stats.restricted_mean.unwrap().value, 25.0);
        // S falls to 0.5 at 20 s.
        assert_eq!(stats.median.unwrap().value, 20.0);
    }

    #[test]
    fn more_than_half_unfinished_has_no_median_yet() {
        let stats = CompletionStats::of(&[done(5.0), running(8.0), running(9.0)]);
        assert_eq!(stats.median, None);
        assert!(stats.restricted_mean.is_some());
    }

    /// A: 4 jobs finished after 10, 20, 30, 40 s. B: the same four times 3. At the
    /// common horizon 40 s (A's longest), A's restricted mean is 25 s; B's curve is 1
    /// until 30 s, 0.75 to 40 s: 30 + 7.5 = 37.5 s. B - A = 12.5 s.
    #[test]
    fn arms_are_compared_at_their_common_horizon() {
        let a = [done(10.0), done(20.0), done(30.0), done(40.0)];
        let b = [done(30.0), done(60.0), done(90.0), done(120.0)];
        let (stats_a, stats_b, difference) = compare_arms(&a, &b);
        let difference = difference.unwrap();
        assert_eq!(difference.horizon, 40.0);
        assert_eq!(stats_a.horizon, Some(40.0));
        close(stats_b.restricted_mean.unwrap().value, 37.5);
        close(difference.b_minus_a.value, 12.5);
        assert!(difference.b_minus_a.low.unwrap() < 12.5);
    }

    /// Values 1, 2, 3, 4, 5: mean 3, sample sd sqrt(2.5) = 1.5811, standard error
    /// 0.70711; t(0.975, 4) = 2.7764, so 3 -+ 1.9632.
    #[test]
    fn a_mean_over_seeds_has_a_student_t_interval() {
        let estimate = mean_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        close(estimate.value, 3.0);
        close(estimate.low.unwrap(), 1.0368);
        close(estimate.high.unwrap(), 4.9632);
        assert_eq!(mean_interval(&[7.0]).unwrap().low, None);
        // Differences -1.9, -2.0, -2.1: sd 0.1, t(0.975, 2) = 4.3027, so -2 -+ 0.2484.
        let paired = paired_interval(&[10.0, 20.0, 30.0], &[8.1, 18.0, 27.9]).unwrap();
        close(paired.value, -2.0);
        close(paired.high.unwrap(), -1.7516);
        assert!(paired.excludes_zero());
        // Differences -1, -2, -3: sd 1, so -2 -+ 2.484 includes 0.
        let noisy = paired_interval(&[10.0, 20.0, 30.0], &[9.0, 18.0, 27.0]).unwrap();
        assert!(!noisy.excludes_zero(), "{noisy:?}");
    }

    /// 20 jobs at p = 0.5: 13 to B is P(X <= 7) + P(X >= 13) = 2 * 0.131588 = 0.263176;
    /// 18 to B is 2 * (190 + 20 + 1) / 2^20 = 0.000402.
    #[test]
    fn the_binomial_test_tells_chance_from_imbalance() {
        close(binomial_p_value(13, 20, 0.5), 0.263176);
        close(binomial_p_value(10, 20, 0.5), 1.0);
        assert!((binomial_p_value(18, 20, 0.5) - 0.000402).abs() < 1e-6);
    }
}
