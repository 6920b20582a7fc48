//! What an experiment is: its mode (shadow or split), its arms, and the rule that gives
//! each split job an arm when it is first seen (a hash of its id against a ratio, that
//! hash held to a running balance, or a label selector). It owns the rule and its
//! checks; it must not keep tallies or build figures (the running experiment and its
//! report do).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use switchyard_core::{check_label_key, check_label_value};

/// An experiment description that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExperimentError {
    /// A selector that is not `key=value` with a valid label key and value.
    #[error("label selector `{selector}`: {reason}")]
    BadSelector {
        /// The selector as written (control characters escaped).
        selector: String,
        /// What is wrong.
        reason: String,
    },
    /// A node selector of a split that leaves one arm without nodes.
    #[error(
        "node selector `{selector}` matches {matching} of the cluster's {nodes} nodes: each arm \
         of a split needs at least one node, or its jobs wait forever"
    )]
    ArmWithoutNodes {
        /// The selector.
        selector: String,
        /// Nodes it matches (arm B's).
        matching: usize,
        /// Nodes in the cluster.
        nodes: usize,
    },
    /// A split ratio outside [0, 1].
    #[error("split ratio {0} must be between 0 and 1 (the share of jobs that go to arm B)")]
    BadRatio(f64),
    /// A split assignment that is neither `hash` nor `balanced`.
    #[error(
        "split assignment `{0}` is neither `hash` (each job by a hash of its id) nor \
         `balanced` (the hash held to the ratio as jobs arrive)"
    )]
    BadAssignment(String),
}

/// `key=value`: matches objects carrying that label. Read back from its JSON form
/// through [`LabelSelector::parse`], so a selector read from a report is checked like
/// one an operator typed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SelectorFields")]
pub struct LabelSelector {
    /// Label key.
    pub key: String,
    /// Label value.
    pub value: String,
}

impl LabelSelector {
    /// Reads `key=value`: one `=`, a Kubernetes label key and value (so `a=b,c`, a set
    /// selector the controller does not take, is refused rather than read as `a` equal to
    /// `b,c`).
    pub fn parse(text: &str) -> Result<Self, ExperimentError> {
        let bad = |reason: String| ExperimentError::BadSelector {
            selector: text.escape_debug().to_string(),
            reason,
        };
        let Some((key, value)) = text.split_once('=') else {
            return Err(bad("must be `key=value`".into()));
        };
        let (key, value) = (key.trim(), value.trim());
        if value.contains('=') {
            return Err(bad("has more than one `=`; write one `key=value`".into()));
        }
        check_label_key(key).map_err(bad)?;
        check_label_value(value).map_err(bad)?;
        Ok(Self {
            key: key.to_string(),
            value: value.to_string(),
        })
    }

    /// Whether `labels` carry this label.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        labels.get(&self.key) == Some(&self.value)
    }
}

/// A [`LabelSelector`]'s JSON fields before they are checked.
#[derive(Deserialize)]
struct SelectorFields {
    key: String,
    value: String,
}

impl TryFrom<SelectorFields> for LabelSelector {
    type Error = ExperimentError;

    fn try_from(fields: SelectorFields) -> Result<Self, Self::Error> {
        Self::parse(&format!("{}={}", fields.key, fields.value))
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// How split jobs are assigned to arms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "by")]
pub enum JobAssignment {
    /// A job goes to B when the hash of its id, as a fraction of the hash range, is
    /// below `ratio_b`.
    Hash {
        /// Share of jobs that go to arm B, in [0, 1].
        ratio_b: f64,
    },
    /// The hash, held to a running balance: after `n` jobs arm B has `ratio_b * n`
    /// jobs rounded up or down, so 20 jobs at 0.5 are 10 and 10. Each job still goes
    /// where its hash sends it whenever the balance allows either arm.
    Balanced {
        /// Share of jobs that go to arm B, in [0, 1].
        ratio_b: f64,
    },
    /// Jobs carrying the label go to B, the others to A.
    Label {
        /// The selector.
        selector: LabelSelector,
    },
}

impl JobAssignment {
    /// A hash split sending `ratio_b` of the jobs to arm B.
    pub fn hash(ratio_b: f64) -> Result<Self, ExperimentError> {
        if !(0.0..=1.0).contains(&ratio_b) {
            return Err(ExperimentError::BadRatio(ratio_b));
        }
        Ok(Self::Hash { ratio_b })
    }

    /// A split sending `ratio_b` of the jobs to arm B by the hash, held to a running
    /// balance ([`JobAssignment::Balanced`]).
    pub fn balanced(ratio_b: f64) -> Result<Self, ExperimentError> {
        Self::hash(ratio_b).map(|_| Self::Balanced { ratio_b })
    }

    /// `hash` or `balanced`, as the settings file, `--split-assign` and the API name
    /// them, sending `ratio_b` of the jobs to B.
    pub fn by_name(name: &str, ratio_b: f64) -> Result<Self, ExperimentError> {
        match name {
            "hash" => Self::hash(ratio_b),
            "balanced" => Self::balanced(ratio_b),
            other => Err(ExperimentError::BadAssignment(
                other.escape_debug().to_string(),
            )),
        }
    }

    /// The share of jobs meant for B, when the rule has one.
    pub(super) fn ratio_b(&self) -> Option<f64> {
        match self {
            JobAssignment::Hash { ratio_b } | JobAssignment::Balanced { ratio_b } => Some(*ratio_b),
            JobAssignment::Label { .. } => None,
        }
    }

    /// The arm of a job first seen after `assigned` jobs went to A and B.
    pub(super) fn arm_of(
        &self,
        id: &str,
        labels: &BTreeMap<String, String>,
        assigned: [u64; 2],
    ) -> Arm {
        let to_b = match self {
            JobAssignment::Hash { ratio_b } => hash_fraction(id) < *ratio_b,
            JobAssignment::Balanced { ratio_b } => {
                // What B lacks of its share once this job is counted: from 1 up B must
                // take it, from 0 down A must; in between the hash decides, with
                // odds that bring B back to its share. `|ratio n - B| < 1` holds after
                // every job.
                let due = ratio_b * (assigned[0] + assigned[1] + 1) as f64 - assigned[1] as f64;
                due >= 1.0 || (due > 0.0 && hash_fraction(id) < due)
            }
            JobAssignment::Label { selector } => selector.matches(labels),
        };
        if to_b { Arm::B } else { Arm::A }
    }
}

/// FNV-1a of the id, finished with SplitMix64's mixer, as a fraction of `u64::MAX`:
/// stable across runs, platforms and releases, unlike `std`'s hasher. FNV alone leaves
/// the high bits of ids that differ only in their last characters (`job-1`, `job-2`)
/// correlated, which skews the split; the mixer spreads them.
fn hash_fraction(id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    h as f64 / u64::MAX as f64
}

/// What kind of experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum ExperimentMode {
    /// B decides on A's snapshots; only A's decisions apply.
    Shadow,
    /// Jobs (and optionally nodes) are divided between the arms.
    Split {
        /// How jobs are assigned.
        jobs: JobAssignment,
        /// Nodes carrying this label belong to arm B, the others to A; none shares
        /// every node.
        #[serde(skip_serializing_if = "Option::is_none")]
        nodes_b: Option<LabelSelector>,
    },
}

/// One side of an experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arm {
    /// The active policy.
    A,
    /// The candidate.
    B,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_split_is_deterministic_and_roughly_follows_the_ratio() {
        let rule = JobAssignment::hash(0.3).unwrap();
        let labels = BTreeMap::new();
        let to_b = (0..2000)
            .filter(|i| rule.arm_of(&format!("job-{i}"), &labels, [0; 2]) == Arm::B)
            .count();
        assert!((450..750).contains(&to_b), "{to_b} of 2000 went to B");
        for i in 0..50 {
            let id = format!("job-{i}");
            assert_eq!(
                rule.arm_of(&id, &labels, [0; 2]),
                rule.arm_of(&id, &labels, [3; 2])
            );
        }
    }

    /// Assigns `n` jobs in arrival order as `observe` does; returns B's count after each.
    fn counts_of_b(rule: &JobAssignment, n: usize) -> Vec<u64> {
        let labels = BTreeMap::new();
        let mut assigned = [0; 2];
        (0..n)
            .map(|i| {
                let arm = rule.arm_of(&format!("resnet-{i}"), &labels, assigned);
                assigned[arm as usize] += 1;
                assigned[1]
            })
            .collect()
    }

    #[test]
    fn a_balanced_split_of_20_jobs_at_one_half_is_10_and_10() {
        let counts = counts_of_b(&JobAssignment::balanced(0.5).unwrap(), 20);
        assert_eq!(counts[19], 10);
        // After every even number of jobs the arms are level, whatever the hash says.
        for (n, b) in counts.iter().enumerate().skip(1).step_by(2) {
            let jobs = n + 1;
            assert_eq!(*b as usize, jobs / 2, "after {jobs} jobs");
        }
    }

    #[test]
    fn a_balanced_split_stays_within_one_job_of_its_ratio_and_still_follows_the_hash() {
        for ratio in [0.1, 0.3, 0.5, 0.77] {
            let rule = JobAssignment::balanced(ratio).unwrap();
            for (n, b) in counts_of_b(&rule, 500).into_iter().enumerate() {
                let share = ratio * (n + 1) as f64;
                assert!((share - b as f64).abs() < 1.0, "{ratio}: {b} of {}", n + 1);
            }
        }
        // Not a fixed alternation: the hash picks which of a pair of jobs goes to B.
        let labels = BTreeMap::new();
        let rule = JobAssignment::balanced(0.5).unwrap();
        let firsts: std::collections::HashSet<Arm> = (0..20)
            .map(|i| rule.arm_of(&format!("job-{i}"), &labels, [0; 2]))
            .collect();
        assert_eq!(firsts.len(), 2);
    }

    #[test]
    fn assignments_are_named_hash_or_balanced() {
        assert_eq!(
            JobAssignment::by_name("balanced", 0.5),
            Ok(JobAssignment::Balanced { ratio_b: 0.5 })
        );
        let error = JobAssignment::by_name("alternate", 0.5).unwrap_err();
        assert!(error.to_string().contains("neither `hash`"), "{error}");
        assert_eq!(
            JobAssignment::by_name("balanced", -0.1),
            Err(ExperimentError::BadRatio(-0.1))
        );
    }

    #[test]
    fn a_ratio_outside_zero_to_one_and_a_selector_without_equals_are_refused() {
        assert_eq!(
            JobAssignment::hash(1.5),
            Err(ExperimentError::BadRatio(1.5))
        );
        assert!(LabelSelector::parse("team").is_err());
        assert_eq!(
            LabelSelector::parse("team=a").unwrap().to_string(),
            "team=a"
        );
    }
}
