//! The verdicts on a policy author's expectations ([`crate::expect`]): each item
//! checked against the decision records of a run (and, for `finished`, the jobs' finish
//! times). It judges what a run produced; it must not run a policy.

use std::collections::BTreeMap;
use std::fmt;
use switchyard_control::DecisionRecord;
use switchyard_core::{Action, Operation};

use crate::expect::{
    AnyJob, Event, Expectation, JobOnly, Labelled, Migrated, Placed, Polarity, Scaled, Weighted,
    Window,
};
use crate::trace::operation_text;

/// What a run produced, for checking expectations.
#[derive(Clone, Copy, Debug)]
pub struct Evidence<'a> {
    /// Every round, oldest first.
    pub records: &'a [DecisionRecord],
    /// Finish time of each job (`None`: did not finish); absent for a single decision on
    /// a fixture snapshot, where nothing finishes.
    pub finished: Option<&'a BTreeMap<String, Option<f64>>>,
}

/// The verdict on one expectation.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The expectation, as a person reads it.
    pub what: String,
    /// Where it stands in the file.
    pub field: String,
    /// Whether it held.
    pub passed: bool,
    /// Why not (what happened instead), when it failed.
    pub detail: Option<String>,
}

/// Checks every expectation against `evidence`.
pub fn check_expectations(expectations: &[Expectation], evidence: Evidence) -> Vec<Verdict> {
    expectations.iter().map(|e| verdict(e, evidence)).collect()
}

fn verdict(e: &Expectation, evidence: Evidence) -> Verdict {
    let hits = occurrences(&e.event, e.window, evidence);
    let (passed, detail) = match (e.polarity, hits) {
        (_, Err(why)) => (false, Some(why)),
        (Polarity::Expect, Ok(hits)) if hits.is_empty() => {
            (false, Some(nearby(&e.event, evidence)))
        }
        (Polarity::Expect, Ok(_)) => (true, None),
        (Polarity::Forbid, Ok(hits)) if hits.is_empty() => (true, None),
        (Polarity::Forbid, Ok(hits)) => {
            let shown: Vec<&str> = hits.iter().take(3).map(String::as_str).collect();
            let more = hits.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            (
                false,
                Some(format!("it happened: {}{more}", shown.join("; "))),
            )
        }
    };
    let verb = match e.polarity {
        Polarity::Expect => "",
        Polarity::Forbid => "never ",
    };
    Verdict {
        what: format!("{verb}{}{}", describe(&e.event), describe_window(e.window)),
        field: e.field.clone(),
        passed,
        detail,
    }
}

/// Each time `event` happened within `window`, as text; an error when the evidence
/// cannot tell.
fn occurrences(event: &Event, window: Window, evidence: Evidence) -> Result<Vec<String>, String> {
    if let Event::Finished(JobOnly { job }) = event {
        let finished = evidence.finished.ok_or_else(|| {
            "`finished` needs a run on a workload, not a single decision on a snapshot".to_string()
        })?;
        return Ok(match finished.get(job) {
            Some(Some(t)) if window.contains(*t) => vec![format!("{job} finished at t={t:.3}")],
            _ => vec![],
        });
    }
    let mut hits = Vec::new();
    for r in evidence.records.iter().filter(|r| window.contains(r.time)) {
        let at = format!("round {} t={:.3}", r.round, r.time);
        match event {
            Event::Failed => {
                if let Some(failure) = &r.arm_a.failure {
                    hits.push(format!("{at}: {failure}"));
                }
            }
            Event::Rejected(AnyJob { job }) => {
                for rej in &r.arm_a.rejected {
                    if job.as_deref().is_none_or(|j| rej.action.op.job() == j) {
                        hits.push(format!("{at}: {}", rej.rejected_because));
                    }
                }
            }
            Event::Labelled(l) => {
                for label in &r.arm_a.labels {
                    if label.job == l.job
                        && label.key == l.key
                        && l.value.as_ref().is_none_or(|v| &label.value == v)
                    {
                        hits.push(format!("{at}: {}={}", label.key, label.value));
                    }
                }
            }
            _ => {
                for action in r.arm_a.accepted.iter().filter(|a| matches_action(event, a)) {
                    hits.push(format!("{at}: {}", operation_text(&action.op)));
                }
            }
        }
    }
    Ok(hits)
}

fn matches_action(event: &Event, action: &Action) -> bool {
    match (event, &action.op) {
        (Event::Placed(p), Operation::Place { job, assignments }) => {
            job == &p.job
                && assignments.iter().any(|a| {
                    p.task.as_ref().is_none_or(|t| &a.task == t)
                        && p.on.as_ref().is_none_or(|n| &a.node == n)
                })
        }
        (
            Event::Migrated(m),
            Operation::Migrate {
                job,
                task,
                node,
                purpose,
            },
        ) => {
            job == &m.job
                && m.task.as_ref().is_none_or(|t| task.as_ref() == Some(t))
                && m.to.as_ref().is_none_or(|n| node == n)
                && m.purpose.as_ref().is_none_or(|p| purpose == p)
        }
        (Event::Weighted(w), Operation::SetCpuWeight { job, task, weight }) => {
            job == &w.job
                && w.task.as_ref().is_none_or(|t| task == t)
                && w.below.is_none_or(|b| *weight < b)
                && w.above.is_none_or(|a| *weight > a)
        }
        (Event::Scaled(s), Operation::Scale { job, replicas, .. }) => {
            job == &s.job && s.to.is_none_or(|n| *replicas == n)
        }
        (Event::Waited(w), Operation::Wait { job }) => job == &w.job,
        (Event::Preempted(p), Operation::Preempt { job }) => job == &p.job,
        _ => false,
    }
}

/// What did happen to the job an unmet expectation is about, to point at the cause.
fn nearby(event: &Event, evidence: Evidence) -> String {
    let job = match event {
        Event::Placed(Placed { job, .. })
        | Event::Migrated(Migrated { job, .. })
        | Event::Weighted(Weighted { job, .. })
        | Event::Scaled(Scaled { job, .. })
        | Event::Labelled(Labelled { job, .. })
        | Event::Waited(JobOnly { job })
        | Event::Preempted(JobOnly { job })
        | Event::Finished(JobOnly { job }) => job.as_str(),
        Event::Rejected(_) | Event::Failed => return "it never happened".into(),
    };
    if let (Event::Finished(_), Some(finished)) = (event, evidence.finished) {
        return match finished.get(job) {
            None => format!("there is no job `{job}` in the run"),
            Some(None) => format!("{job} never finished"),
            Some(Some(t)) => format!("{job} finished at t={t:.3}"),
        };
    }
    let seen: Vec<String> = evidence
        .records
        .iter()
        .flat_map(|r| {
            r.arm_a
                .accepted
                .iter()
                .filter(|a| a.op.job() == job)
                .map(move |a| format!("t={:.3} {}", r.time, operation_text(&a.op)))
        })
        .take(5)
        .collect();
    if seen.is_empty() {
        format!("it never happened; no action on {job} was accepted at all")
    } else {
        format!(
            "it never happened; what happened to {job}: {}",
            seen.join("; ")
        )
    }
}

fn describe(event: &Event) -> String {
    let opt = |prefix: &str, v: &Option<String>| {
        v.as_ref()
            .map(|v| format!(" {prefix}{v}"))
            .unwrap_or_default()
    };
    match event {
        Event::Placed(p) => format!(
            "{}{} placed{}",
            p.job,
            opt("task ", &p.task),
            opt("on ", &p.on)
        ),
        Event::Migrated(m) => format!(
            "{}{} migrated{}{}",
            m.job,
            opt("task ", &m.task),
            opt("to ", &m.to),
            m.purpose
                .as_ref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default()
        ),
        Event::Weighted(w) => format!(
            "{}{} weighted{}{}",
            w.job,
            opt("task ", &w.task),
            w.below.map(|b| format!(" below {b}")).unwrap_or_default(),
            w.above.map(|a| format!(" above {a}")).unwrap_or_default()
        ),
        Event::Scaled(s) => format!(
            "{} scaled{}",
            s.job,
            s.to.map(|n| format!(" to {n}")).unwrap_or_default()
        ),
        Event::Labelled(l) => format!(
            "{} labelled {}{}",
            l.job,
            l.key,
            l.value
                .as_ref()
                .map(|v| format!("={v}"))
                .unwrap_or_default()
        ),
        Event::Waited(w) => format!("{} left waiting", w.job),
        Event::Preempted(p) => format!("{} preempted", p.job),
        Event::Rejected(r) => match &r.job {
            Some(job) => format!("an action on {job} rejected"),
            None => "an action rejected".into(),
        },
        Event::Failed => "a policy failure".into(),
        Event::Finished(f) => format!("{} finished", f.job),
    }
}

fn describe_window(w: Window) -> String {
    if let Some((at, within)) = w.around
        && w.from == at - within
        && w.until == at + within
    {
        return format!(" at t={at} (±{within} s)");
    }
    match (w.from.is_finite(), w.until.is_finite()) {
        (false, false) => String::new(),
        (true, false) => format!(" after t={}", w.from),
        (false, true) => format!(" before t={}", w.until),
        (true, true) => format!(" between t={} and t={}", w.from, w.until),
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.passed { "ok  " } else { "FAIL" };
        write!(f, "{mark} {} ({})", self.what, self.field)?;
        if let Some(detail) = &self.detail {
            write!(f, "\n     {detail}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expect::parse_expectations;
    use std::path::Path;
    use switchyard_control::ArmRecord;
    use switchyard_core::Checked;
    use switchyard_core::{Assignment, JobLabel, Snapshot};

    fn parse_ok(text: &str) -> Vec<Expectation> {
        parse_expectations(text, Path::new("e.yaml")).unwrap()
    }

    fn round(round: u64, time: f64, actions: Vec<Operation>) -> DecisionRecord {
        let accepted: Vec<Action> = actions
            .into_iter()
            .map(|op| Action {
                op,
                reason: "because".into(),
            })
            .collect();
        let snapshot = Snapshot {
            time,
            ..Snapshot::default()
        };
        let arm = ArmRecord::new(
            "p".into(),
            None,
            Checked {
                accepted,
                ..Checked::default()
            },
        );
        DecisionRecord::new(round, &snapshot, arm, None)
    }

    fn migrate(job: &str, node: &str) -> Operation {
        Operation::Migrate {
            job: job.into(),
            task: None,
            node: node.into(),
            purpose: "reallocate".into(),
        }
    }

    fn verdicts(text: &str, records: &[DecisionRecord]) -> Vec<Verdict> {
        check_expectations(
            &parse_ok(text),
            Evidence {
                records,
                finished: None,
            },
        )
    }

    #[test]
    fn a_migration_at_the_expected_time_and_node_passes() {
        let records = [round(20, 600.0, vec![migrate("j3", "n2")])];
        let v = verdicts(
            "expect:\n  - migrated: {job: j3, to: n2}\n    at: 600\n",
            &records,
        );
        assert!(v[0].passed, "{}", v[0]);
    }

    #[test]
    fn a_migration_to_another_node_fails_and_says_where_the_job_went() {
        let records = [round(20, 600.0, vec![migrate("j3", "n1")])];
        let v = verdicts("expect:\n  - migrated: {job: j3, to: n2}\n", &records);
        assert!(!v[0].passed);
        let detail = v[0].detail.as_deref().unwrap();
        assert!(detail.contains("migrate j3 (all tasks) -> n1"), "{detail}");
    }

    #[test]
    fn a_migration_outside_the_window_does_not_count() {
        let records = [round(20, 630.0, vec![migrate("j3", "n2")])];
        let v = verdicts(
            "expect:\n  - migrated: {job: j3}\n    at: 600\n    within: 10\n",
            &records,
        );
        assert!(!v[0].passed);
    }

    #[test]
    fn a_forbidden_event_that_happens_fails_with_the_round() {
        let records = [round(7, 70.0, vec![migrate("j3", "n2")])];
        let v = verdicts("forbid:\n  - migrated: {job: j3}\n", &records);
        assert!(!v[0].passed);
        assert!(
            v[0].detail.as_deref().unwrap().contains("round 7"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn placements_match_on_the_task_and_node_together() {
        let place = Operation::Place {
            job: "j".into(),
            assignments: vec![
                Assignment {
                    task: "ps-0".into(),
                    node: "a".into(),
                },
                Assignment {
                    task: "worker-0".into(),
                    node: "b".into(),
                },
            ],
        };
        let records = [round(0, 0.0, vec![place])];
        let v = verdicts(
            "expect:\n  - placed: {job: j, task: ps-0, on: a}\n  - placed: {job: j, task: ps-0, on: b}\n",
            &records,
        );
        assert!(v[0].passed);
        assert!(!v[1].passed);
    }

    #[test]
    fn labels_are_matched_by_key_and_value() {
        let mut record = round(3, 30.0, vec![]);
        record.arm_a.labels = vec![JobLabel {
            job: "j".into(),
            key: "category".into(),
            value: "CC".into(),
        }];
        let v = verdicts(
            "expect:\n  - labelled: {job: j, key: category, value: CC}\n  - labelled: {job: j, key: category, value: PC}\n",
            &[record],
        );
        assert!(v[0].passed);
        assert!(!v[1].passed);
    }

    #[test]
    fn finished_needs_a_workload_run() {
        let v = verdicts("expect:\n  - finished: {job: j}\n", &[]);
        assert!(!v[0].passed);
        assert!(v[0].detail.as_deref().unwrap().contains("workload"));
    }
}
