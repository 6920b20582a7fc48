//! What `ctl` prints for a person: each answer of the controller as short lines or a
//! table, every string from the controller through [`escaped`] (directly or through the
//! table layout), and which parts of a round `decisions` keeps. It reads the answers'
//! JSON; it must not send requests.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context as _;
use serde_json::Value;
use switchyard_control::{ArmRecord, DecisionRecord, ExperimentReport, PolicyFromRound};

use crate::cli::action_text;
use crate::cli::experiment::{describe, figures};
use crate::cli::simulate::layout;
use crate::cli::terminal::escaped;

/// A JSON value as a short cell: strings bare (escaped), the rest as JSON.
fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => escaped(s).into_owned(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// Lines gathered into one text, each ended by a newline.
fn lines(write: impl FnOnce(&mut dyn FnMut(String))) -> String {
    let mut out = String::new();
    write(&mut |s: String| {
        out.push_str(&s);
        out.push('\n');
    });
    out
}

/// `ctl status`.
pub(super) fn status_text(answer: &Value) -> String {
    lines(|line| status(answer, line))
}

/// `ctl policies`: one line per policy, the active one marked `*`.
pub(super) fn policies(answer: &Value) -> String {
    lines(|line| {
        let active = &answer["active"];
        for p in answer["policies"].as_array().into_iter().flatten() {
            let mark = if &p["name"] == active { "*" } else { " " };
            line(format!(
                "{mark} {:<16} {:<8} {:<28} {}",
                cell(&p["name"]),
                cell(&p["version"]),
                cell(&p["source"]),
                cell(&p["summary"])
            ));
        }
        load_errors(answer, "refused: ", line);
    })
}

/// `ctl upload`.
pub(super) fn upload(answer: &Value) -> String {
    lines(|line| {
        let p = &answer["policy"];
        line(format!(
            "loaded {} {} ({})",
            cell(&p["name"]),
            cell(&p["version"]),
            cell(&p["digest"])
        ));
        if p["source"]
            .as_str()
            .is_some_and(|s| s.starts_with("oci://"))
        {
            line(format!("from {}", cell(&p["source"])));
        }
        if let Some(round) = answer["applied"]["from_round"].as_u64() {
            line(format!("it is the active policy from round {round}"));
        }
        let persistence = &answer["persistence"];
        match persistence["survives_restart"].as_bool() {
            Some(true) => line(format!("kept in {}", cell(&persistence["location"]))),
            _ => line(format!("not kept: {}", cell(&persistence["warning"]))),
        }
    })
}

/// `ctl activate`.
pub(super) fn activated(answer: &Value) -> String {
    format!(
        "active: {} from round {}\n",
        cell(&answer["active"]),
        answer["from_round"]
    )
}

/// `ctl parameters`.
pub(super) fn parameters(answer: &Value) -> String {
    lines(|line| {
        let p = &answer["policy"];
        line(format!("{}: {}", cell(&p["name"]), cell(&p["settings"])));
        if let Some(round) = answer["applied"]["from_round"].as_u64() {
            line(format!("applies from round {round}"));
        }
    })
}

/// `ctl experiment ...`: the report, `what` saying what just happened to it
/// (`running`, `stopped; its final figures`).
pub(super) fn experiment(answer: &Value, what: &str) -> anyhow::Result<String> {
    let report: ExperimentReport = serde_json::from_value(answer.clone())
        .context("reading the controller's experiment report")?;
    let since = report
        .started_at
        .map_or(String::new(), |t| format!(" since t={t:.0} s"));
    Ok(format!(
        "experiment {what}{since}, {} rounds: {}\n\n{}\n",
        report.rounds,
        describe(&report),
        figures(&report)
    ))
}

fn status(answer: &Value, line: &mut dyn FnMut(String)) {
    let s = &answer["snapshot"];
    line(format!("active:     {}", cell(&answer["active"])));
    line(format!(
        "rounds:     {} ({} decided by the fallback)",
        answer["rounds"], answer["failures"]
    ));
    line(format!(
        "cluster:    t={:.0}s, {} nodes, {} jobs ({} waiting, {} running, {} restarting), {} finished",
        s["time"].as_f64().unwrap_or(0.0),
        s["nodes"],
        s["jobs"],
        s["waiting"],
        s["running"],
        s["restarting"],
        s["finished"]
    ));
    line(format!(
        "experiment: {}",
        if answer["experiment_running"] == true {
            "running (switchyard ctl experiment show)"
        } else {
            "none"
        }
    ));
    line(format!(
        "replica:    {} ({}; leader: {})",
        cell(&answer["identity"]),
        if answer["leading"] == true {
            "leading"
        } else {
            "following"
        },
        cell(&answer["leader"])
    ));
    if let Some(ended) = answer["ended"].as_str() {
        line(format!("ended:      {}", escaped(ended)));
    }
    if let Some(error) = answer["state_error"].as_str() {
        line(format!("state:      not persisted: {}", escaped(error)));
    }
    load_errors(answer, "refused:    ", line);
}

fn load_errors(answer: &Value, prefix: &str, line: &mut dyn FnMut(String)) {
    for failure in answer["load_errors"].as_array().into_iter().flatten() {
        line(format!(
            "{prefix}{}: {}",
            cell(&failure["source"]),
            cell(&failure["error"])
        ));
    }
}

/// `ctl jobs`: a table of the page's jobs and a line saying how many there are.
pub(super) fn jobs(page: &Value) -> String {
    let header: Vec<String> = [
        "job",
        "phase",
        "arm",
        "tasks placed",
        "nodes",
        "labels",
        "set by",
    ]
    .map(String::from)
    .into();
    let rows: Vec<Vec<String>> = page["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|job| {
            let labels: BTreeMap<String, Value> =
                serde_json::from_value(job["policy_labels"].clone()).unwrap_or_default();
            let nodes: Vec<String> = job["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(cell)
                .collect();
            vec![
                cell(&job["id"]),
                cell(&job["phase"]),
                job["arm"].as_str().map_or("-".into(), str::to_uppercase),
                format!("{}/{}", job["placed"], job["tasks"]),
                if nodes.is_empty() {
                    "-".into()
                } else {
                    nodes.join(",")
                },
                if labels.is_empty() {
                    "-".into()
                } else {
                    labels
                        .iter()
                        .map(|(k, v)| format!("{}={}", escaped(k), cell(v)))
                        .collect::<Vec<_>>()
                        .join(" ")
                },
                cell(&job["labels_by"]),
            ]
        })
        .collect();
    let shown = rows.len();
    let total = page["total"].as_u64().unwrap_or(shown as u64);
    let mut text = format!(
        "{total} active jobs at t={:.0} s",
        page["time"].as_f64().unwrap_or(0.0)
    );
    if (shown as u64) < total {
        let _ = write!(text, ", the first {shown} shown (--limit)");
    }
    if shown > 0 {
        text.push('\n');
        text.push_str(&layout(&header, &rows));
    }
    text
}

/// Which parts of the rounds `ctl decisions` shows.
pub(super) struct DecisionFilter<'a> {
    /// Only actions, rejections and failures about this job.
    pub job: Option<&'a str>,
    /// Only the arms this policy decided.
    pub policy: Option<&'a str>,
}

impl DecisionFilter<'_> {
    /// What of `record` passes the filter, or `None` when nothing does: a round whose
    /// arms did nothing (no action, rejection, failed action, label or policy failure)
    /// is not shown.
    pub(super) fn apply(&self, record: &DecisionRecord) -> Option<DecisionRecord> {
        let mut kept = record.clone();
        kept.arm_a = self.arm(&record.arm_a);
        kept.arm_b = record.arm_b.as_ref().map(|b| self.arm(b));
        kept.shadow = record.shadow.clone().and_then(|mut shadow| {
            if self.policy.is_some_and(|p| p != shadow.policy) {
                return None;
            }
            shadow.actions.retain(|a| self.job_matches(a.op.job()));
            Some(shadow)
        });
        let did_something = !nothing_in(&kept.arm_a)
            || kept.arm_b.as_ref().is_some_and(|b| !nothing_in(b))
            || kept
                .shadow
                .as_ref()
                .is_some_and(|s| !s.actions.is_empty() || s.failure.is_some());
        did_something.then_some(kept)
    }

    /// The arm with only what the filter keeps: nothing when another policy decided it.
    fn arm(&self, arm: &ArmRecord) -> ArmRecord {
        let mut kept = arm.clone();
        if self.policy.is_some_and(|p| p != arm.policy) {
            kept.failure = None;
            kept.accepted.clear();
            kept.failed.clear();
            kept.rejected.clear();
            kept.labels.clear();
            kept.rejected_labels.clear();
            return kept;
        }
        kept.accepted.retain(|a| self.job_matches(a.op.job()));
        kept.failed.retain(|f| self.job_matches(f.action.op.job()));
        kept.rejected
            .retain(|r| self.job_matches(r.action.op.job()));
        kept.labels.retain(|l| self.job_matches(&l.job));
        kept.rejected_labels
            .retain(|l| self.job_matches(&l.label.job));
        kept
    }

    fn job_matches(&self, job: &str) -> bool {
        self.job.is_none_or(|j| j == job)
    }
}

fn nothing_in(arm: &ArmRecord) -> bool {
    arm.accepted.is_empty()
        && arm.failed.is_empty()
        && arm.rejected.is_empty()
        && arm.labels.is_empty()
        && arm.rejected_labels.is_empty()
        && arm.failure.is_none()
}

/// The kept rounds of `read` rounds read, each arm's lines under its round, and a
/// line saying how many rounds did nothing that passes the filter.
pub(super) fn decisions(kept: &[DecisionRecord], read: usize, filter: &DecisionFilter) -> String {
    let mut out = String::new();
    for record in kept {
        let _ = writeln!(out, "round {} t={:.1}s", record.round, record.time);
        // The arm is named in every round of an experiment, whichever arm acted.
        let experiment = record.arm_b.is_some() || record.shadow.is_some();
        let tag = |arm: &str, policy: &str| {
            if experiment {
                format!("[{arm} {}] ", escaped(policy))
            } else {
                String::new()
            }
        };
        arm_lines(&mut out, &tag("A", &record.arm_a.policy), &record.arm_a);
        if let Some(b) = &record.arm_b {
            arm_lines(&mut out, &tag("B", &b.policy), b);
        }
        if let Some(shadow) = &record.shadow {
            let tag = format!("[shadow {}, not applied] ", escaped(&shadow.policy));
            if let Some(failure) = &shadow.failure {
                let _ = writeln!(out, "  {tag}FAILED: {}", escaped(failure));
            }
            for action in &shadow.actions {
                let _ = writeln!(out, "  {tag}{}", action_text::with_job(action));
            }
        }
    }
    let quiet = read - kept.len();
    if quiet > 0 {
        let what = match (filter.job, filter.policy) {
            (None, None) => String::new(),
            (job, policy) => format!(
                " for{}{}",
                job.map_or(String::new(), |j| format!(" job {}", escaped(j))),
                policy.map_or(String::new(), |p| format!(" policy {}", escaped(p)))
            ),
        };
        let _ = writeln!(
            out,
            "({quiet} of {read} rounds read did nothing{what}; not shown)"
        );
    }
    out
}

/// One line per component that a policy name of the rounds below stands for: its
/// version and digest (and the pinned reference of a policy from a registry), from the
/// round it began deciding under that name.
pub(super) fn decider_lines(policies: &[PolicyFromRound]) -> String {
    let mut out = String::new();
    for p in policies {
        let _ = write!(
            out,
            "policy {} {} {}",
            escaped(&p.policy.name),
            escaped(&p.policy.version),
            escaped(&p.policy.digest)
        );
        if let Some(reference) = &p.policy.reference {
            let _ = write!(out, " {}", escaped(reference));
        }
        let _ = writeln!(out, " (from round {})", p.from_round);
    }
    out
}

fn arm_lines(out: &mut String, tag: &str, arm: &ArmRecord) {
    if let Some(failure) = &arm.failure {
        let _ = writeln!(
            out,
            "  {tag}FAILED: {} (the fallback decided)",
            escaped(failure)
        );
    }
    for action in &arm.accepted {
        let _ = writeln!(out, "  {tag}{}", action_text::with_job(action));
    }
    for failed in &arm.failed {
        let _ = writeln!(
            out,
            "  {tag}failed: {}: {}",
            action_text::with_job(&failed.action),
            escaped(&failed.failed_because)
        );
    }
    for rejected in &arm.rejected {
        let _ = writeln!(
            out,
            "  {tag}rejected: {}: {}",
            action_text::with_job(&rejected.action),
            escaped(&rejected.rejected_because)
        );
    }
    for label in &arm.labels {
        let _ = writeln!(
            out,
            "  {tag}{} label {}={}",
            escaped(&label.job),
            escaped(&label.key),
            escaped(&label.value)
        );
    }
    for rejected in &arm.rejected_labels {
        let _ = writeln!(
            out,
            "  {tag}rejected label: {} {}={}: {}",
            escaped(&rejected.label.job),
            escaped(&rejected.label.key),
            escaped(&rejected.label.value),
            escaped(&rejected.rejected_because)
        );
    }
}
