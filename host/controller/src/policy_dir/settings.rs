//! The settings file of a policies directory (`settings.yaml`): policies from OCI
//! registries by name, which policy is active, parameters per policy, and an optional
//! experiment.
//!
//! ```yaml
//! policies:
//!   team-fair: oci://registry.example.com/team/fair:1.4@sha256:0123...
//! active: specon
//! parameters:
//!   specon: {threshold: 0.1}
//! experiment: {mode: shadow, policy_b: even}
//! # or: {mode: split, policy_b: even, ratio: 0.5, node_selector: pool=b}
//! # or: {mode: split, policy_b: even, ratio: 0.5, assign: balanced}
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::live::{ExperimentRequest, OwnedBySettings};
use switchyard_control::{ExperimentMode, JobAssignment, LabelSelector};
use switchyard_core::Settings;

/// The settings file's name inside the directory (`settings.yml` is read too).
pub(crate) const SETTINGS_FILE: &str = "settings.yaml";

/// A parameter value as YAML writes it (numbers and booleans become text, which is
/// what policies take).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    fn into_text(self) -> String {
        match self {
            Scalar::Text(s) => s,
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

/// The experiment section.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExperimentSection {
    /// `shadow` or `split`.
    pub mode: String,
    /// Arm B's policy.
    pub policy_b: String,
    /// Split: share of jobs for B.
    pub ratio: Option<f64>,
    /// Split by `ratio`: `hash` (default) or `balanced` (held to the ratio as jobs
    /// arrive).
    pub assign: Option<String>,
    /// Split: jobs with this label go to B.
    pub job_selector: Option<String>,
    /// Split: nodes with this label belong to B.
    pub node_selector: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    #[serde(default)]
    policies: BTreeMap<String, String>,
    active: Option<String>,
    #[serde(default)]
    parameters: BTreeMap<String, BTreeMap<String, Scalar>>,
    experiment: Option<ExperimentSection>,
}

/// A parsed settings file.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DirSettings {
    /// Policies pulled from OCI registries: the name each gives itself, and its
    /// reference.
    pub policies: BTreeMap<String, String>,
    /// The policy to make active.
    pub active: Option<String>,
    /// Parameters by policy name.
    pub parameters: BTreeMap<String, Settings>,
    /// The experiment to run.
    pub experiment: Option<ExperimentSection>,
}

impl DirSettings {
    /// Parses the file's text; the error names the field at fault.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let deserializer = serde_norway::Deserializer::from_str(text);
        let raw: Option<RawSettings> =
            serde_path_to_error::deserialize(deserializer).map_err(|e| {
                let field = e.path().to_string();
                format!("field `{field}`: {}", e.into_inner())
            })?;
        let raw = raw.unwrap_or_default();
        Ok(Self {
            policies: raw.policies,
            active: raw.active,
            parameters: raw
                .parameters
                .into_iter()
                .map(|(policy, values)| {
                    let values = values
                        .into_iter()
                        .map(|(k, v)| (k, v.into_text()))
                        .collect();
                    (policy, values)
                })
                .collect(),
            experiment: raw.experiment,
        })
    }
}

impl DirSettings {
    /// What these settings decide, for the API to leave alone.
    pub(crate) fn ownership(&self, file: &str) -> OwnedBySettings {
        OwnedBySettings {
            file: file.to_string(),
            active: self.active.is_some(),
            parameters: self.parameters.keys().cloned().collect(),
            experiment: self.experiment.is_some(),
        }
    }
}

impl ExperimentSection {
    /// The experiment it describes.
    pub(crate) fn to_request(&self) -> Result<ExperimentRequest, String> {
        let mode = match self.mode.as_str() {
            "shadow" => ExperimentMode::Shadow,
            "split" => {
                let jobs = match (self.ratio, &self.job_selector) {
                    (Some(r), None) => {
                        JobAssignment::by_name(self.assign.as_deref().unwrap_or("hash"), r)
                            .map_err(|e| format!("experiment.assign: {e}"))?
                    }
                    (None, Some(_)) if self.assign.is_some() => {
                        return Err(
                            "experiment.assign goes with `ratio`; a `job_selector` split assigns by the label"
                                .into(),
                        );
                    }
                    (None, Some(s)) => JobAssignment::Label {
                        selector: LabelSelector::parse(s).map_err(|e| e.to_string())?,
                    },
                    _ => {
                        return Err(
                            "experiment: a split needs exactly one of `ratio` or `job_selector`"
                                .into(),
                        );
                    }
                };
                let nodes_b = self
                    .node_selector
                    .as_deref()
                    .map(LabelSelector::parse)
                    .transpose()
                    .map_err(|e| e.to_string())?;
                ExperimentMode::Split { jobs, nodes_b }
            }
            other => {
                return Err(format!(
                    "experiment.mode `{other}` is neither `shadow` nor `split`"
                ));
            }
        };
        // The file is the experiment's one source of truth: what it says now replaces
        // what it said before.
        Ok(ExperimentRequest {
            policy_b: self.policy_b.clone(),
            mode,
            replace: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_parameters_become_text_and_unknown_fields_are_named() {
        let s = DirSettings::parse("active: even\nparameters:\n  specon: {threshold: 0.1, n: 3}\n")
            .unwrap();
        assert_eq!(s.active.as_deref(), Some("even"));
        assert_eq!(s.parameters["specon"]["threshold"], "0.1");
        assert_eq!(s.parameters["specon"]["n"], "3");
        let error = DirSettings::parse("activ: even\n").unwrap_err();
        assert!(error.contains("activ"), "{error}");
    }

    #[test]
    fn a_split_needs_a_ratio_or_a_selector() {
        let section = ExperimentSection {
            mode: "split".into(),
            policy_b: "even".into(),
            ratio: None,
            assign: None,
            job_selector: None,
            node_selector: None,
        };
        assert!(section.to_request().is_err());
    }

    #[test]
    fn a_split_may_ask_for_a_balanced_assignment_by_name() {
        let settings = DirSettings::parse(
            "experiment: {mode: split, policy_b: even, ratio: 0.5, assign: balanced}\n",
        )
        .unwrap();
        let request = settings.experiment.unwrap().to_request().unwrap();
        assert_eq!(
            request.mode,
            ExperimentMode::Split {
                jobs: JobAssignment::Balanced { ratio_b: 0.5 },
                nodes_b: None
            }
        );
        let error = DirSettings::parse(
            "experiment: {mode: split, policy_b: even, ratio: 0.5, assign: alternate}\n",
        )
        .unwrap()
        .experiment
        .unwrap()
        .to_request()
        .unwrap_err();
        assert!(
            error.starts_with("experiment.assign: split assignment `alternate`"),
            "{error}"
        );
    }
}
