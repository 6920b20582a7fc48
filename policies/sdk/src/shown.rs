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
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ShownLabels {
    /// `(job, value)` in the previous snapshot's order.
    shown: Vec<(String, String)>,
}

impl ShownLabels {
    /// The labels `key=value_of(job)` whose value differs from the one last shown (a
    /// job whose `value_of` is `None` gets none, and keeps what it was shown), in
    /// snapshot order; remembers the new values and forgets the jobs that left.
    pub fn changed(
        &mut self,
        snapshot: &Snapshot,
        key: &str,
        mut value_of: impl FnMut(&Job) -> Option<String>,
    ) -> Vec<JobLabel> {
        let mut before: HashMap<String, String> =
            std::mem::take(&mut self.shown).into_iter().collect();
        let mut labels = Vec::new();
        for job in &snapshot.jobs {
            let old = before.remove(&job.id);
            let value = match value_of(job) {
                Some(value) => {
                    if old.as_deref() != Some(value.as_str()) {
                        labels.push(JobLabel {
                            job: job.id.clone(),
                            key: key.to_string(),
                            value: value.clone(),
                        });
                    }
                    value
                }
                None => match old {
                    Some(old) => old,
                    None => continue,
                },
            };
            self.shown.push((job.id.clone(), value));
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
        let third = shown.changed(&s, "k", |j| {
            Some(if j.id == "a" {
                "w".into()
            } else {
                "v-b".into()
            })
        });
        assert_eq!(values(&third), [("a".to_string(), "w".to_string())]);
    }

    #[test]
    fn jobs_that_left_are_forgotten_and_a_returning_id_is_shown_again() {
        let mut shown = ShownLabels::default();
        let both = snapshot(0.0, vec![], vec![job("a"), job("b")]);
        shown.changed(&both, "k", |_| Some("v".into()));
        let only_b = snapshot(1.0, vec![], vec![job("b")]);
        assert!(shown.changed(&only_b, "k", |_| Some("v".into())).is_empty());
        assert_eq!(shown.len(), 1, "a left and is forgotten");
        let a_again = shown.changed(&both, "k", |_| Some("v".into()));
        assert_eq!(values(&a_again), [("a".to_string(), "v".to_string())]);
    }

    #[test]
    fn a_job_without_a_value_keeps_what_it_was_shown() {
        let mut shown = ShownLabels::default();
        let s = snapshot(0.0, vec![], vec![job("a")]);
        shown.changed(&s, "k", |_| Some("v".into()));
        assert!(shown.changed(&s, "k", |_| None).is_empty());
        assert!(shown.changed(&s, "k", |_| Some("v".into())).is_empty());
    }
}
