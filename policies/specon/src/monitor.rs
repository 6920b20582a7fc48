//! Algorithm 1, the container monitor: one job's category step from its gain.
//!
//! Pure: no snapshot, no state blob. Whether the job's worker still hosts enough
//! progressing or watching jobs for a reallocation request is decided by the caller once
//! every job of the round has its new category (see the crate docs).

use serde::{Deserialize, Serialize};

/// SpeCon's three categories.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Category {
    /// Progressing: still gaining fast. Every job starts here.
    #[default]
    PC,
    /// Watching: slowing down, may speed up again.
    WC,
    /// Converged: slow and unlikely to speed up.
    CC,
}

impl Category {
    /// The label value (`PC`, `WC`, `CC`).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::PC => "PC",
            Category::WC => "WC",
            Category::CC => "CC",
        }
    }
}

/// The outcome of one monitor step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The category after the step.
    pub category: Category,
    /// Lines 13-16: the job was in CC and its gain fell again, so it asks for
    /// reallocation, subject to the |PC| + |WC| > 1 test (line 15, `busy_scope`).
    pub wants_reallocation: bool,
}

/// Lines 5-22 of Algorithm 1 for one job: `gain` = G(t_m), `previous` = G(t_{m-1}) (none
/// on the first gain, which then counts as falling), `alpha` the threshold.
///
/// Lines 7-16 are read as one `if / else if` chain (one category per round, as the
/// text describes), with the typo on lines 11-12 fixed: a WC job moves to CC.
pub fn step(category: Category, gain: f64, previous: Option<f64>, alpha: f64) -> Step {
    let falling = previous.is_none_or(|p| gain < p);
    let stay = Step {
        category,
        wants_reallocation: false,
    };
    if falling && gain < alpha {
        match category {
            Category::PC => Step {
                category: Category::WC,
                wants_reallocation: false,
            },
            Category::WC => Step {
                category: Category::CC,
                wants_reallocation: false,
            },
            Category::CC => Step {
                category: Category::CC,
                wants_reallocation: true,
            },
        }
    } else if gain < alpha {
        // Line 17-18: jitter (the gain rose but is still small) keeps the category.
        stay
    } else if gain > alpha {
        // Lines 19-22: a sudden change (or an earlier misjudgement) resets to PC.
        Step {
            category: Category::PC,
            wants_reallocation: false,
        }
    } else {
        // gain == alpha exactly: none of the paper's branches applies.
        stay
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Category::*;

    const ALPHA: f64 = 0.01;

    #[test]
    fn a_falling_gain_below_alpha_moves_pc_to_wc_then_wc_to_cc() {
        let s = step(PC, 0.005, Some(0.02), ALPHA);
        assert_eq!(
            s,
            Step {
                category: WC,
                wants_reallocation: false
            }
        );
        let s = step(WC, 0.004, Some(0.005), ALPHA);
        assert_eq!(
            s,
            Step {
                category: CC,
                wants_reallocation: false
            }
        );
    }

    #[test]
    fn a_job_moves_one_category_per_round_never_pc_straight_to_cc() {
        assert_eq!(step(PC, 0.0, Some(1.0), ALPHA).category, WC);
    }

    #[test]
    fn a_falling_gain_in_cc_stays_and_asks_for_reallocation() {
        assert_eq!(
            step(CC, 0.001, Some(0.004), ALPHA),
            Step {
                category: CC,
                wants_reallocation: true
            }
        );
    }

    #[test]
    fn jitter_below_alpha_keeps_the_category() {
        for c in [PC, WC, CC] {
            assert_eq!(
                step(c, 0.006, Some(0.004), ALPHA),
                Step {
                    category: c,
                    wants_reallocation: false
                }
            );
        }
    }

    #[test]
    fn a_gain_above_alpha_goes_back_to_pc() {
        for c in [PC, WC, CC] {
            assert_eq!(step(c, 0.05, Some(0.001), ALPHA).category, PC);
            assert_eq!(step(c, 0.05, Some(0.5), ALPHA).category, PC);
        }
    }

    #[test]
    fn the_first_gain_counts_as_falling() {
        assert_eq!(step(PC, 0.001, None, ALPHA).category, WC);
        assert_eq!(step(PC, 0.5, None, ALPHA).category, PC);
    }
}
