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
//! This module reads and checks the file; [`crate::verdict`] judges a run against it.
//! Nothing here runs a policy or looks at a run.

use std::path::{Path, PathBuf};

use serde::Deserialize;

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
pub(crate) struct Placed {
    pub(crate) job: String,
    pub(crate) task: Option<String>,
    pub(crate) on: Option<String>,
}

/// A job (or one task of it) is migrated (`to`: that node; `purpose`: the policy's tag,
/// e.g. SpeCon's `reallocate` or `rebalance`; `kind` is its name before contract 0.2).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Migrated {
    pub(crate) job: String,
    pub(crate) task: Option<String>,
    pub(crate) to: Option<String>,
    #[serde(alias = "kind")]
    pub(crate) purpose: Option<String>,
}

/// A task's CPU weight is set (`below`/`above`: strictly).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Weighted {
    pub(crate) job: String,
    pub(crate) task: Option<String>,
    pub(crate) below: Option<f64>,
    pub(crate) above: Option<f64>,
}

/// A job is re-scaled (`to`: that many replicas).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Scaled {
    pub(crate) job: String,
    pub(crate) to: Option<u32>,
}

/// The policy labels a job (`value`: with that value).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Labelled {
    pub(crate) job: String,
    pub(crate) key: String,
    pub(crate) value: Option<String>,
}

/// An event about one job.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobOnly {
    pub(crate) job: String,
}

/// An event about one job, or about any job when `job` is absent.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnyJob {
    pub(crate) job: Option<String>,
}

/// An event with no detail (`failed: {}`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Nothing {}

/// What an expectation looks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Event {
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
pub(crate) struct Window {
    pub(crate) from: f64,
    pub(crate) until: f64,
    /// `at` and `within` as written, for messages.
    pub(crate) around: Option<(f64, f64)>,
}

impl Window {
    pub(crate) fn contains(&self, time: f64) -> bool {
        self.from <= time && time <= self.until
    }
}

/// Whether an event must happen or must never happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Polarity {
    /// From the `expect` list.
    Expect,
    /// From the `forbid` list.
    Forbid,
}

/// One checked item of an expectations file.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// Where it stands in the file, e.g. `expect[2]`.
    pub(crate) field: String,
    /// Must happen, or must not.
    pub(crate) polarity: Polarity,
    /// What it looks for.
    pub(crate) event: Event,
    /// When.
    pub(crate) window: Window,
}

/// Default tolerance of `at`, seconds.
const DEFAULT_WITHIN: f64 = 1.0;

/// Reads and checks an expectations file.
pub fn load_expectations(path: &Path) -> Result<Vec<Expectation>, ExpectError> {
    checked(switchyard_sim::load_yaml(path)?, path)
}

/// Parses `text` as if read from `path`.
pub fn parse_expectations(text: &str, path: &Path) -> Result<Vec<Expectation>, ExpectError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_in_an_event_is_an_error_naming_line_and_field() {
        let error = parse_expectations(
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
            let error = parse_expectations(text, Path::new("e.yaml"))
                .unwrap_err()
                .to_string();
            assert!(error.contains("exactly one of"), "{error}");
        }
    }

    #[test]
    fn an_empty_file_expects_nothing_and_is_refused() {
        let error = parse_expectations("expect: []\n", Path::new("e.yaml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("expects nothing"), "{error}");
    }

    #[test]
    fn within_without_at_is_refused() {
        let error = parse_expectations(
            "expect:\n  - waited: {job: a}\n    within: 3\n",
            Path::new("e.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("give `at` too"), "{error}");
    }
}
