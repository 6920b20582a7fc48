//! How a node's CPU is divided among the tasks running on it, and what a task gets out
//! of the cores it receives. Pure functions; the simulator decides who asks for what.

/// Speed-up of a task that uses `cores` cores, relative to one core.
///
/// Amdahl-style diminishing returns: `speedup(c) = c / (1 + s (c - 1))` for `c >= 1`,
/// where `s` is the serial fraction (0 = perfectly parallel, 1 = no gain from a second
/// core). Below one core a task runs proportionally slower: `speedup(c) = c`.
pub(crate) fn speedup(cores: f64, serial_fraction: f64) -> f64 {
    if cores <= 1.0 {
        cores.max(0.0)
    } else {
        cores / (1.0 + serial_fraction * (cores - 1.0))
    }
}

/// Weighted, work-conserving processor sharing (water-filling).
///
/// `demands[i] = (most cores task i can use, its weight)`. Every task gets a share
/// proportional to its weight; a task that cannot use its whole share keeps only what it
/// can use and the rest is divided among the others, again by weight. The result never
/// exceeds `capacity` in total nor any task's demand, and equals
/// `min(capacity, total demand)` in total.
pub(crate) fn water_fill(capacity: f64, demands: &[(f64, f64)]) -> Vec<f64> {
    let mut shares = vec![0.0; demands.len()];
    let mut open: Vec<usize> = (0..demands.len()).filter(|&i| demands[i].0 > 0.0).collect();
    let mut left = capacity.max(0.0);
    while !open.is_empty() && left > 0.0 {
        let weight: f64 = open
            .iter()
            .map(|&i| demands[i].1.max(f64::MIN_POSITIVE))
            .sum();
        let level = left / weight;
        let (capped, rest): (Vec<usize>, Vec<usize>) = open
            .iter()
            .partition(|&&i| demands[i].0 <= level * demands[i].1.max(f64::MIN_POSITIVE));
        if capped.is_empty() {
            for &i in &rest {
                shares[i] = level * demands[i].1.max(f64::MIN_POSITIVE);
            }
            break;
        }
        for &i in &capped {
            shares[i] = demands[i].0;
            left -= demands[i].0;
        }
        open = rest;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unused_share_goes_to_the_others_by_weight() {
        let s = water_fill(4.0, &[(0.5, 1.0), (4.0, 1.0), (4.0, 0.5)]);
        assert_eq!(s[0], 0.5);
        assert!((s[1] - 2.3333333333333335).abs() < 1e-12);
        assert!((s[1] + s[2] + s[0] - 4.0).abs() < 1e-12);
    }

    #[test]
    fn one_core_gives_a_speedup_of_one_and_more_cores_give_less_than_linear() {
        assert_eq!(speedup(1.0, 0.1), 1.0);
        assert!(speedup(4.0, 0.1) < 4.0 && speedup(4.0, 0.1) > 3.0);
    }
}
