//! Expectations a policy author writes about a run: "job j3 is migrated to n2 at
//! t=600", "no action is ever rejected". An expectations file holds two lists, `expect`
//! (each must happen at least once) and `forbid` (none may ever happen), of items with
//! exactly one event key and an optional time window:
//!
//! ```yaml
//! expect:
//!   - placed: {job: vae-0, on: cpu-0}
//!   - migrated: {job: vae-3, to: cpu-1}
//!     at: 600            # ± `within` seconds, 1 by default
//!   - labelled: {job: vae-3, key: category, value: CC}
//!   - finished: {job: vae-0}
//!     before: 900
//! forbid:
//!   - rejected: {}       # the validator never turns an action down
//!   - failed: {}         # the policy never fails a round
//! ```
//!
//! Items are checked against the decision records of a run (and, for `finished`, the
//! jobs' finish times); nothing here runs a policy.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use switchyard_control::DecisionRecord;
use switchyard_core::{Action, Operation};

use super::trace::operation_text;

/// Why an expectations file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ExpectError {
    /// The file could not be read or is not an expectations file.
    #[error(transparent)]
    Load(#[from] switchyard_sim::YamlLoadError),
    /// An item is well-formed YAML but not a usable expectation.
    #[error("{path}: `{field}`: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The item at fault, e.g. `expect[2]`.
        field: String,
        /// What is wrong and what would be accepted.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    #[serde(default)]
    expect: Vec<Item>,
    #[serde(default)]
    forbid: Vec<Item>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    placed: Option<Placed>,
    migrated: Option<Migrated>,
    weighted: Option<Weighted>,
    scaled: Option<Scaled>,
    labelled: Option<Labelled>,
    waited: Option<JobOnly>,
    preempted: Option<JobOnly>,
    rejected: Option<AnyJob>,
    failed: Option<Nothing>,
    finished: Option<JobOnly>,
    at: Option<f64>,
    within: Option<f64>,
    after: Option<f64>,
    before: Option<f64>,
}

/// A job's pending tasks are placed (`task`: that task; `on`: on that node).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Placed {
    job: String,
    task: Option<String>,
    on: Option<String>,
}

/// A job (or one task of it) is migrated (`to`: that node; `purpose`: the policy's tag,
/// e.g. SpeCon's `reallocate` or `rebalance`; `kind` is its name before contract 0.2).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Migrated {
    job: String,
    task: Option<String>,
    to: Option<String>,
    #[serde(alias = "kind")]
    purpose: Option<String>,
}

/// A task's CPU weight is set (`below`/`above`: strictly).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Weighted {
    job: String,
    task: Option<String>,
    below: Option<f64>,
    above: Option<f64>,
}

/// A job is re-scaled (`to`: that many replicas).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scaled {
    job: String,
    to: Option<u32>,
}

/// The policy labels a job (`value`: with that value).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Labelled {
    job: String,
    key: String,
    value: Option<String>,
}

/// An event about one job.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JobOnly {
    job: String,
}

/// An event about one job, or about any job when `job` is absent.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AnyJob {
    job: Option<String>,
}

/// An event with no detail (`failed: {}`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

/// What an expectation looks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// An accepted placement.
    Placed(Placed),
    /// An accepted migration.
    Migrated(Migrated),
    /// An accepted CPU weight.
    Weighted(Weighted),
    /// An accepted re-scale.
    Scaled(Scaled),
    /// A policy label.
    Labelled(Labelled),
    /// An accepted `wait`.
    Waited(JobOnly),
    /// An accepted preemption.
    Preempted(JobOnly),
    /// An action the validator turned down.
    Rejected(AnyJob),
    /// A round in which the policy failed and the fallback decided.
    Failed,
    /// A job finishing (runs on a workload only).
    Finished(JobOnly),
}

/// When an event counts, cluster seconds, both ends included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    from: f64,
    until: f64,
    /// `at` and `within` as written, for messages.
    around: Option<(f64, f64)>,
}

impl Window {
    fn contains(&self, time: f64) -> bool {
        self.from <= time && time <= self.until
    }
}

/// Whether an event must happen or must never happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polarity {
    /// From the `expect` list.
    Expect,
    /// From the `forbid` list.
    Forbid,
}

/// One checked item of an expectations file.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// Where it stands in the file, e.g. `expect[2]`.
    pub field: String,
    /// Must happen, or must not.
    pub polarity: Polarity,
    /// What it looks for.
    pub event: Event,
    /// When.
    pub window: Window,
}

/// Default tolerance of `at`, seconds.
const DEFAULT_WITHIN: f64 = 1.0;

/// Reads and checks an expectations file.
pub fn load(path: &Path) -> Result<Vec<Expectation>, ExpectError> {
    checked(switchyard_sim::load_yaml(path)?, path)
}

/// Parses `text` as if read from `path`.
pub fn parse(text: &str, path: &Path) -> Result<Vec<Expectation>, ExpectError> {
    checked(switchyard_sim::parse_yaml(text, path)?, path)
}

fn checked(file: ExpectFile, path: &Path) -> Result<Vec<Expectation>, ExpectError> {
    let lists = [
        ("expect", Polarity::Expect, file.expect),
        ("forbid", Polarity::Forbid, file.forbid),
    ];
    let mut out = Vec::new();
    for (list, polarity, items) in lists {
        for (i, item) in items.into_iter().enumerate() {
            let field = format!("{list}[{i}]");
            let invalid = |message: String| ExpectError::Invalid {
                path: path.to_path_buf(),
                field: field.clone(),
                message,
            };
            let window = window(&item).map_err(invalid)?;
            let event = event(item).map_err(invalid)?;
            out.push(Expectation {
                field,
                polarity,
                event,
                window,
            });
        }
    }
    if out.is_empty() {
        return Err(ExpectError::Invalid {
            path: path.to_path_buf(),
            field: "expect".into(),
            message: "the file expects nothing: give at least one item under `expect` or `forbid`"
                .into(),
        });
    }
    Ok(out)
}

fn window(item: &Item) -> Result<Window, String> {
    let mut window = Window {
        from: f64::NEG_INFINITY,
        until: f64::INFINITY,
        around: None,
    };
    if let Some(at) = item.at {
        let within = item.within.unwrap_or(DEFAULT_WITHIN);
        if within.is_nan() || within < 0.0 {
            return Err(format!("`within` must be 0 or more seconds, got {within}"));
        }
        window = Window {
            from: at - within,
            until: at + within,
            around: Some((at, within)),
        };
    } else if item.within.is_some() {
        return Err("`within` is the tolerance of `at`; give `at` too".into());
    }
    if let Some(after) = item.after {
        window.from = window.from.max(after);
    }
    if let Some(before) = item.before {
        window.until = window.until.min(before);
    }
    if window.from > window.until {
        return Err(format!(
            "the time window is empty (from {} to {})",
            window.from, window.until
        ));
    }
    Ok(window)
}

fn event(item: Item) -> Result<Event, String> {
    let Item {
        placed,
        migrated,
        weighted,
        scaled,
        labelled,
        waited,
        preempted,
        rejected,
        failed,
        finished,
        ..
    } = item;
    let found: Vec<Event> = [
        placed.map(Event::Placed),
        migrated.map(Event::Migrated),
        weighted.map(Event::Weighted),
        scaled.map(Event::Scaled),
        labelled.map(Event::Labelled),
        waited.map(Event::Waited),
        preempted.map(Event::Preempted),
        rejected.map(Event::Rejected),
        failed.map(|_| Event::Failed),
        finished.map(Event::Finished),
    ]
    .into_iter()
    .flatten()
    .collect();
    match <[Event; 1]>::try_from(found) {
        Ok([event]) => Ok(event),
        Err(found) => Err(format!(
            "give exactly one of placed, migrated, weighted, scaled, labelled, waited, \
             preempted, rejected, failed, finished (found {})",
            found.len()
        )),
    }
}

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
pub fn check(expectations: &[Expectation], evidence: Evidence) -> Vec<Verdict> {
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
    use switchyard_control::ArmRecord;
    use switchyard_core::Checked;
    use switchyard_core::{Assignment, JobLabel, Snapshot};

    fn parse_ok(text: &str) -> Vec<Expectation> {
        parse(text, Path::new("e.yaml")).unwrap()
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
        check(
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

    #[test]
    fn a_typo_in_an_event_is_an_error_naming_line_and_field() {
        let error = parse(
            "expect:\n  - migrated: {job: j3, ot: n2}\n",
            Path::new("e.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.starts_with("e.yaml:2:"), "{error}");
        assert!(error.contains("expect[0].migrated"), "{error}");
        assert!(error.contains("unknown field `ot`"), "{error}");
    }

    #[test]
    fn an_item_with_two_events_or_none_is_refused() {
        for text in [
            "expect:\n  - placed: {job: a}\n    waited: {job: a}\n",
            "forbid:\n  - at: 5\n",
        ] {
            let error = parse(text, Path::new("e.yaml")).unwrap_err().to_string();
            assert!(error.contains("exactly one of"), "{error}");
        }
    }

    #[test]
    fn an_empty_file_expects_nothing_and_is_refused() {
        let error = parse("expect: []\n", Path::new("e.yaml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("expects nothing"), "{error}");
    }

    #[test]
    fn within_without_at_is_refused() {
        let error = parse(
            "expect:\n  - waited: {job: a}\n    within: 3\n",
            Path::new("e.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("give `at` too"), "{error}");
    }
}
