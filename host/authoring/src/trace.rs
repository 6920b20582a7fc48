//! The decision trace: what a policy did, round by round, as stable text that reads well
//! in a code review. Golden files hold it, so a change of behaviour in a policy shows up
//! as a diff of a few lines instead of a changed figure in a results table.
//!
//! A round appears only when it did something an operator would see: an accepted or a
//! rejected action, a policy failure, or a label that changed. Quiet rounds (ticks that
//! changed nothing) are left out; the round numbers keep their gaps, so a change in how
//! often a policy asks to be called still shows. Times are printed with millisecond
//! precision, which the simulator reproduces bit for bit for the same seed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use similar::TextDiff;

use switchyard_control::DecisionRecord;
use switchyard_core::{Action, Operation, Trigger};

/// Renders `records` as a trace whose first lines are the comment `header`.
pub fn render_trace(header: &[String], records: &[DecisionRecord]) -> String {
    let mut out = String::new();
    for line in header {
        let _ = writeln!(out, "# {line}");
    }
    let mut labels: BTreeMap<(String, String), String> = BTreeMap::new();
    for record in records {
        let changed_labels: Vec<String> = record
            .arm_a
            .labels
            .iter()
            .filter(|l| labels.get(&(l.job.clone(), l.key.clone())) != Some(&l.value))
            .map(|l| format!("{} {}={}", l.job, l.key, l.value))
            .collect();
        for l in &record.arm_a.labels {
            labels.insert((l.job.clone(), l.key.clone()), l.value.clone());
        }
        if record.arm_a.accepted.is_empty()
            && record.arm_a.rejected.is_empty()
            && record.arm_a.failure.is_none()
            && changed_labels.is_empty()
        {
            continue;
        }
        let _ = writeln!(
            out,
            "round {} t={:.3} [{}] by {}",
            record.round,
            record.time,
            triggers(&record.triggers),
            record.arm_a.policy
        );
        if let Some(failure) = &record.arm_a.failure {
            let _ = writeln!(out, "  failed: {}", one_line(failure));
        }
        for action in &record.arm_a.accepted {
            let _ = writeln!(out, "  {}", action_line(action));
        }
        for rejected in &record.arm_a.rejected {
            let _ = writeln!(
                out,
                "  REJECTED {} -- {}",
                action_line(&rejected.action),
                one_line(&rejected.rejected_because)
            );
        }
        for label in changed_labels {
            let _ = writeln!(out, "  label {label}");
        }
    }
    out
}

/// One action as `op job details -- reason`.
pub fn action_line(action: &Action) -> String {
    format!(
        "{} -- {}",
        operation_text(&action.op),
        one_line(&action.reason)
    )
}

/// An operation without its reason, e.g. `migrate vae-3 (all tasks) -> cpu-1 reallocate`:
/// what two policies are compared on.
pub fn operation_text(op: &Operation) -> String {
    match op {
        Operation::Place { job, assignments } => {
            let to: Vec<String> = assignments
                .iter()
                .map(|a| format!("{}@{}", a.task, a.node))
                .collect();
            format!("place {job} {}", to.join(" "))
        }
        Operation::Migrate {
            job,
            task,
            node,
            purpose,
        } => {
            let which = task.as_deref().unwrap_or("(all tasks)");
            if purpose.is_empty() {
                format!("migrate {job} {which} -> {node}")
            } else {
                format!("migrate {job} {which} -> {node} {purpose}")
            }
        }
        Operation::SetCpuWeight { job, task, weight } => {
            format!("weight {job} {task} = {weight:.4}")
        }
        Operation::Scale {
            job,
            replicas,
            nodes,
        } => {
            if nodes.is_empty() {
                format!("scale {job} to {replicas}")
            } else {
                format!("scale {job} to {replicas} on {}", nodes.join(" "))
            }
        }
        Operation::Wait { job } => format!("wait {job}"),
        Operation::Preempt { job } => format!("preempt {job}"),
    }
}

fn triggers(triggers: &[Trigger]) -> String {
    let words: Vec<String> = triggers
        .iter()
        .map(|t| match t {
            Trigger::Tick => "tick".to_string(),
            Trigger::JobArrived(job) => format!("arrived {job}"),
            Trigger::JobFinished(job) => format!("finished {job}"),
            Trigger::NodeChanged(node) => format!("node {node}"),
            Trigger::JobPreempted(job) => format!("preempted {job}"),
        })
        .collect();
    words.join(", ")
}

fn one_line(text: &str) -> String {
    text.replace('\n', " ")
}

/// How a trace's header names the component that made it: this, its version and its
/// digest (`# component 0.1.0 sha256:...`).
pub const COMPONENT_LINE: &str = "# component ";

/// How a trace differs from the golden copy in what was decided: `None` when equal,
/// else a unified diff (golden first) trimmed to the changed hunks. The component line
/// is left out: a component built elsewhere (another toolchain, other paths in its
/// panic messages) has other bytes, and the trace is about decisions
/// ([`component_change`] tells the bytes apart, for a caller that knows its components
/// build reproducibly, as the shipped policies do).
pub fn diff_trace(golden: &str, actual: &str) -> Option<String> {
    let decided = |trace: &str| -> String {
        trace
            .split_inclusive('\n')
            .filter(|line| !line.starts_with(COMPONENT_LINE))
            .collect()
    };
    let (golden, actual) = (decided(golden), decided(actual));
    if golden == actual {
        return None;
    }
    Some(
        TextDiff::from_lines(&golden, &actual)
            .unified_diff()
            .context_radius(2)
            .header("golden", "this run")
            .to_string(),
    )
}

/// The component lines of the golden copy and of this run, when they differ (the golden
/// trace was made by other bytes).
pub fn component_change<'a>(golden: &'a str, actual: &'a str) -> Option<(&'a str, &'a str)> {
    let component = |trace: &'a str| {
        trace
            .lines()
            .find_map(|line| line.strip_prefix(COMPONENT_LINE))
            .unwrap_or("(none)")
    };
    let (before, now) = (component(golden), component(actual));
    (before != now).then_some((before, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_control::ArmRecord;
    use switchyard_core::Checked;
    use switchyard_core::{JobLabel, Snapshot};

    fn record(round: u64, actions: Vec<Operation>, labels: &[(&str, &str)]) -> DecisionRecord {
        let snapshot = Snapshot {
            time: round as f64 * 30.0,
            triggers: vec![Trigger::Tick],
            ..Snapshot::default()
        };
        let decision = switchyard_core::Decision {
            labels: labels
                .iter()
                .map(|(job, value)| JobLabel {
                    job: job.to_string(),
                    key: "category".into(),
                    value: value.to_string(),
                })
                .collect(),
            ..Default::default()
        };
        let accepted = actions
            .into_iter()
            .map(|op| Action {
                op,
                reason: "why\nnot".into(),
            })
            .collect();
        let arm = ArmRecord::new(
            "p".into(),
            None,
            Checked {
                accepted,
                labels: decision.labels.clone(),
                ..Checked::default()
            },
        );
        DecisionRecord::new(round, &snapshot, arm, decision.next_call_after)
    }

    #[test]
    fn quiet_rounds_and_unchanged_labels_are_left_out() {
        let records = [
            record(0, vec![Operation::Wait { job: "a".into() }], &[("a", "PC")]),
            record(1, vec![], &[("a", "PC")]),
            record(2, vec![], &[("a", "CC")]),
        ];
        let text = render_trace(&["head".into()], &records);
        assert_eq!(
            text,
            "# head\n\
             round 0 t=0.000 [tick] by p\n  wait a -- why not\n  label a category=PC\n\
             round 2 t=60.000 [tick] by p\n  label a category=CC\n"
        );
    }

    #[test]
    fn equal_traces_have_no_diff_and_different_ones_show_the_changed_line() {
        assert_eq!(diff_trace("a\nb\n", "a\nb\n"), None);
        let d = diff_trace("a\nb\n", "a\nc\n").unwrap();
        assert!(d.contains("-b") && d.contains("+c"), "{d}");
    }

    #[test]
    fn traces_of_other_bytes_that_decide_alike_have_no_diff_and_name_both_components() {
        let golden = "# trace of p\n# component 1.0 sha256:aa\nround 0\n";
        let rebuilt = "# trace of p\n# component 1.0 sha256:bb\nround 0\n";
        assert_eq!(diff_trace(golden, rebuilt), None);
        assert_eq!(
            component_change(golden, rebuilt),
            Some(("1.0 sha256:aa", "1.0 sha256:bb"))
        );
        assert_eq!(component_change(golden, golden), None);
        let d = diff_trace(golden, "# trace of p\n# component 1.0 sha256:bb\nround 1\n").unwrap();
        assert!(d.contains("-round 0") && !d.contains("component"), "{d}");
    }
}
