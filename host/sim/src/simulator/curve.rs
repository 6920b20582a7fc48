//! Evaluation curves: what a job reports as its loss (or accuracy) at a given fraction
//! of its work. Either a parametric family calibrated to the SpeCon paper or a real
//! training run replayed from the Pollux measurements.

/// A job's evaluation metric as a function of the fraction of its work done.
#[derive(Clone, Debug, PartialEq)]
pub enum Curve {
    /// `value(p) = last + (first - last) (1 - R(p))` with
    /// `R(p) = (1 - e^{-k p}) / (1 - e^{-k})`, the share of the total loss reduction done
    /// by progress `p`. `k` is fitted so that `R(0.2)` equals the configured share.
    Parametric {
        /// Value at the start.
        first: f64,
        /// Value at the end.
        last: f64,
        /// Steepness fitted from the 20% share.
        k: f64,
    },
    /// A measured run: `(fraction of work, value)` points, linearly interpolated.
    Replay {
        /// Points sorted by fraction, from 0 to 1.
        points: Vec<(f64, f64)>,
    },
}

/// Share of the total loss reduction in the first 20% of training, SpeCon Fig. 1.
const VAE_SHARE_AT_20: f64 = 0.65;
/// Bi-RNN, SpeCon Fig. 1.
const BIRNN_SHARE_AT_20: f64 = 0.98;
/// GRU, SpeCon Fig. 1.
const GRU_SHARE_AT_20: f64 = 0.90;

impl Curve {
    /// A parametric curve from `first` to `last` that has done `share_at_20` of its
    /// reduction at 20% of the work (`share_at_20` in (0.2, 1)).
    pub fn parametric(first: f64, last: f64, share_at_20: f64) -> Curve {
        Curve::Parametric {
            first,
            last,
            k: fit_k(share_at_20),
        }
    }

    /// The named preset (`vae`, `birnn`, `gru`) from 1.0 down to 0.1.
    pub fn preset(name: &str) -> Option<Curve> {
        let share = match name {
            "vae" => VAE_SHARE_AT_20,
            "birnn" | "bi-rnn" => BIRNN_SHARE_AT_20,
            "gru" => GRU_SHARE_AT_20,
            _ => return None,
        };
        Some(Curve::parametric(1.0, 0.1, share))
    }

    /// The value at fraction `p` of the work (clamped to [0, 1]).
    pub fn value(&self, p: f64) -> f64 {
        let p = p.clamp(0.0, 1.0);
        match self {
            Curve::Parametric { first, last, k } => {
                last + (first - last) * (1.0 - reduction(*k, p))
            }
            Curve::Replay { points } => interpolate(points, p),
        }
    }
}

fn reduction(k: f64, p: f64) -> f64 {
    if k < 1e-9 {
        p
    } else {
        (1.0 - (-k * p).exp()) / (1.0 - (-k).exp())
    }
}

/// Bisection on `k` for `reduction(k, 0.2) = share`; the function rises with `k`.
fn fit_k(share: f64) -> f64 {
    let share = share.clamp(0.2, 0.999_999);
    let (mut lo, mut hi) = (0.0_f64, 500.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if reduction(mid, 0.2) < share {
            lo = mid
        } else {
            hi = mid
        }
    }
    0.5 * (lo + hi)
}

fn interpolate(points: &[(f64, f64)], p: f64) -> f64 {
    match points.iter().position(|&(x, _)| x >= p) {
        None => points.last().map_or(0.0, |q| q.1),
        Some(0) => points[0].1,
        Some(i) => {
            let (x0, y0) = points[i - 1];
            let (x1, y1) = points[i];
            if x1 <= x0 {
                y1
            } else {
                y0 + (y1 - y0) * (p - x0) / (x1 - x0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_do_the_papers_share_of_their_reduction_in_the_first_fifth() {
        for (name, share) in [("vae", 0.65), ("birnn", 0.98), ("gru", 0.90)] {
            let c = Curve::preset(name).unwrap();
            let done = (c.value(0.0) - c.value(0.2)) / (c.value(0.0) - c.value(1.0));
            assert!((done - share).abs() < 1e-6, "{name}: {done}");
        }
    }

    #[test]
    fn a_replayed_curve_is_interpolated_between_points() {
        let c = Curve::Replay {
            points: vec![(0.0, 1.0), (0.5, 0.5), (1.0, 0.25)],
        };
        assert_eq!(c.value(0.25), 0.75);
    }
}
