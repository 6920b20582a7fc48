//! Labels a policy has already shown, so it sends a job's label only when its value
//! changes.
//!
//! The host keeps every label until the policy sets it again (the simulator on its
//! job, Kubernetes on the `TrainingJob`), so sending the same value every round changes
//! nothing but costs a string per waiting job per round in the guest, across the
//! boundary, in the validator and in the decision trace: on a trace whose queue holds
//! thousands of jobs, most of a round. The memory lives in the policy's state blob and
//! holds the jobs of the last snapshot only, so it does not grow with jobs that left.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{Job, JobLabel, Snapshot};

/// The value of one label key last shown for each job of the previous call.
///
/// Jobs are kept by a 64-bit FNV-1a hash of their id and values by their position in a
/// list of the distinct values shown, so the blob decodes without an allocation per
/// job: a round's cost is a few integers per live job. Two live jobs whose ids hash
/// alike (odds of 2^-64 a pair) could share a memory; the worst that does is one label
/// sent again or late.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ShownLabels {
    /// The distinct values shown.
    values: Vec<String>,
    /// `(hash of the job id, position in values)` in the previous snapshot's order.
    shown: Vec<(u64, u32)>,
}

/// How many distinct values are found by a scan before the rest are hashed.
const SCANNED: usize = 8;

/// FNV-1a over the id's bytes.
fn id_hash(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl ShownLabels {
    /// The labels `key=value_of(job)` whose value differs from the one last shown (a
    /// job whose `value_of` is `None` gets none, and keeps what it was shown), in
    /// snapshot order; remembers the new values and forgets the jobs that left.
    pub fn changed<V: AsRef<str>>(
        &mut self,
        snapshot: &Snapshot,
        key: &str,
        mut value_of: impl FnMut(&Job) -> Option<V>,
    ) -> Vec<JobLabel> {
        self.changed_at(snapshot, key, |_, job| value_of(job))
            .into_iter()
            .map(|(_, label)| label)
            .collect()
    }

    /// [`ShownLabels::changed`] for a policy that keeps what it decided by the job's
    /// position in the snapshot: `value_of` gets the position too, and each label comes
    /// with its job's position.
    pub fn changed_at<V: AsRef<str>>(
        &mut self,
        snapshot: &Snapshot,
        key: &str,
        mut value_of: impl FnMut(usize, &Job) -> Option<V>,
    ) -> Vec<(usize, JobLabel)> {
        let before = std::mem::take(&mut self.shown);
        let old_values = std::mem::take(&mut self.values);
        // The previous order mostly holds: look just after the last match first, and
        // index the old entries only when that misses.
        let mut index: Option<HashMap<u64, usize>> = None;
        let mut next = 0;
        let mut hashed: HashMap<String, u32> = HashMap::new();
        let mut labels = Vec::new();
        for (at, job) in snapshot.jobs.iter().enumerate() {
            let hash = id_hash(&job.id);
            let found = if before.get(next).is_some_and(|e| e.0 == hash) {
                Some(next)
            } else {
                index
                    .get_or_insert_with(|| {
                        before.iter().enumerate().map(|(i, e)| (e.0, i)).collect()
                    })
                    .get(&hash)
                    .copied()
            };
            if let Some(at) = found {
                next = at + 1;
            }
            let old = found
                .and_then(|at| old_values.get(before[at].1 as usize))
                .map(String::as_str);
            let value = value_of(at, job);
            let keep = match (&value, old) {
                (Some(value), old) => {
                    let value = value.as_ref();
                    if old != Some(value) {
                        labels.push((
                            at,
                            JobLabel {
                                job: job.id.clone(),
                                key: key.to_string(),
                                value: value.to_string(),
                            },
                        ));
                    }
                    value
                }
                (None, Some(old)) => old,
                (None, None) => continue,
            };
            // A label mostly takes a handful of values: scanning the first few beats
            // hashing every job's; the values past them (a label with many) are hashed.
            let scanned = self.values.iter().take(SCANNED).position(|v| v == keep);
            let position = match scanned.map(|p| p as u32).or_else(|| hashed.get(keep).copied()) {
                Some(position) => position,
                None => {
                    let position = self.values.len() as u32;
                    self.values.push(keep.to_string());
                    if position as usize >= SCANNED {
                        hashed.insert(keep.to_string(), position);
                    }
                    position
                }
            };
            self.shown.push((hash, position));
        }
        labels
    }

    /// How many jobs are remembered (the jobs of the last snapshot with a label).
    pub fn len(&self) -> usize {
        self.shown.len()
    }

    /// True when no job is remembered.
    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn values(labels: &[JobLabel]) -> Vec<(String, String)> {
        labels
            .iter()
            .map(|l| (l.job.clone(), l.value.clone()))
            .collect()
    }

    #[test]
    fn a_label_is_sent_when_its_value_changes_and_not_again() {
        let mut shown = ShownLabels::default();
        let s = snapshot(0.0, vec![], vec![job("a"), job("b")]);
        let first = shown.changed(&s, "k", |j| Some(format!("v-{}", j.id)));
        assert_eq!(first.len(), 2);
        assert!(
            shown
                .changed(&s, "k", |j| Some(format!("v-{}", j.id)))
                .is_empty()
        );
        let third = shown.changed(&s, "k", |j| Some(if j.id == "a" { "w" } else { "v-b" }));
        assert_eq!(values(&third), [("a".to_string(), "w".to_string())]);
    }

    #[test]
    fn jobs_that_left_are_forgotten_and_a_returning_id_is_shown_again() {
        let mut shown = ShownLabels::default();
        let both = snapshot(0.0, vec![], vec![job("a"), job("b")]);
        shown.changed(&both, "k", |_| Some("v"));
        let only_b = snapshot(1.0, vec![], vec![job("b")]);
        assert!(shown.changed(&only_b, "k", |_| Some("v")).is_empty());
        assert_eq!(shown.len(), 1, "a left and is forgotten");
        let a_again = shown.changed(&both, "k", |_| Some("v"));
        assert_eq!(values(&a_again), [("a".to_string(), "v".to_string())]);
    }

    #[test]
    fn a_label_with_more_values_than_are_scanned_is_remembered_all_the_same() {
        let mut shown = ShownLabels::default();
        let jobs = (0..3 * SCANNED).map(|i| job(&format!("j{i}"))).collect();
        let s = snapshot(0.0, vec![], jobs);
        let each_its_own = |j: &Job| Some(format!("v-{}", j.id));
        assert_eq!(shown.changed(&s, "k", each_its_own).len(), 3 * SCANNED);
        assert!(shown.changed(&s, "k", each_its_own).is_empty());
        assert_eq!(shown.values.len(), 3 * SCANNED);
    }

    #[test]
    fn a_job_without_a_value_keeps_what_it_was_shown() {
        let mut shown = ShownLabels::default();
        let s = snapshot(0.0, vec![], vec![job("a")]);
        shown.changed(&s, "k", |_| Some("v"));
        assert!(shown.changed(&s, "k", |_| None::<&str>).is_empty());
        assert!(shown.changed(&s, "k", |_| Some("v")).is_empty());
    }
}
