//! The kinds of owner whose pods can be adopted ([`Integration`]), how each is named on
//! the command line (`--integrations`) and in the ids the policy sees, and the queue
//! names an instance accepts (`--queue`). Names and parsing only; it must not read a
//! cache or the cluster.

use std::fmt;
use std::str::FromStr;

use kube::core::{ApiResource, GroupVersionKind};

/// A kind of job whose gated pods the controller adopts when it is enabled
/// (`--integrations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Integration {
    /// A `batch/v1` Job: one task per pod (per completion index when indexed).
    Job,
    /// A `jobset.x-k8s.io/v1alpha2` JobSet: its replicated jobs are the roles. Kubeflow
    /// Trainer v2 TrainJobs run through the JobSet they create, so they come with it.
    JobSet,
    /// A `kubeflow.org/v1` PyTorchJob (Kubeflow training operator): its replica types
    /// are the roles.
    PyTorchJob,
}

impl Integration {
    /// Every kind, in the order `--help` lists them.
    pub const ALL: [Integration; 3] = [
        Integration::Job,
        Integration::JobSet,
        Integration::PyTorchJob,
    ];

    /// Its name on the command line and at the head of its jobs' ids (`job`, `jobset`,
    /// `pytorchjob`).
    pub fn name(self) -> &'static str {
        match self {
            Integration::Job => "job",
            Integration::JobSet => "jobset",
            Integration::PyTorchJob => "pytorchjob",
        }
    }

    /// Its Kubernetes kind.
    pub fn kind(self) -> &'static str {
        match self {
            Integration::Job => "Job",
            Integration::JobSet => "JobSet",
            Integration::PyTorchJob => "PyTorchJob",
        }
    }

    /// Its API group and version (`batch/v1`).
    pub fn api_version(self) -> &'static str {
        match self {
            Integration::Job => "batch/v1",
            Integration::JobSet => "jobset.x-k8s.io/v1alpha2",
            Integration::PyTorchJob => "kubeflow.org/v1",
        }
    }

    /// The resource the controller reads it through.
    pub fn api_resource(self) -> ApiResource {
        let (group, version) = self
            .api_version()
            .split_once('/')
            .expect("every API version names its group");
        let plural = format!("{}s", self.name());
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, self.kind()),
            &plural,
        )
    }
}

impl fmt::Display for Integration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name given to `--integrations` that is not an integration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown integration `{given}`: accepted are job, jobset, pytorchjob")]
pub struct UnknownIntegration {
    /// What was given.
    pub given: String,
}

impl FromStr for Integration {
    type Err = UnknownIntegration;

    fn from_str(given: &str) -> Result<Self, Self::Err> {
        let name = given.trim();
        Integration::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownIntegration {
                given: given.escape_debug().to_string(),
            })
    }
}

/// A `--queue` that cannot be a label value, so no pod could ever name it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "queue `{given}` is not a label value: accepted are 1 to 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit"
)]
pub struct InvalidQueue {
    /// What was given (escaped).
    pub given: String,
}

/// Checks that `queue` can be the value of the queue label (a Kubernetes label value,
/// not empty: a pod without the label is in no queue).
pub fn valid_queue(queue: &str) -> Result<&str, InvalidQueue> {
    let bytes = queue.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(inner)
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric();
    match ok {
        true => Ok(queue),
        false => Err(InvalidQueue {
            given: queue
                .chars()
                .take(80)
                .collect::<String>()
                .escape_debug()
                .to_string(),
        }),
    }
}

/// The id the policy, the API and the console see for the adopted job of `kind`
/// `namespace/name`: `<kind>:<namespace>/<name>` (`job:ml/train`). A TrainingJob's id
/// is `<namespace>/<name>`, and a namespace cannot hold a `:`, so the two never meet.
pub(crate) fn adopted_id(kind: Integration, namespace: &str, name: &str) -> String {
    format!("{}:{namespace}/{name}", kind.name())
}

/// The kind, namespace and name of adopted job `id`, if it is one ([`adopted_id`]).
pub(crate) fn parse_adopted_id(id: &str) -> Option<(Integration, &str, &str)> {
    let (kind, rest) = id.split_once(':')?;
    let kind: Integration = kind.parse().ok()?;
    let (namespace, name) = rest.split_once('/')?;
    Some((kind, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrations_parse_by_name_and_refuse_anything_else_naming_what_is_accepted() {
        assert_eq!("jobset".parse(), Ok(Integration::JobSet));
        assert_eq!(" PyTorchJob ".parse(), Ok(Integration::PyTorchJob));
        let error = "tfjob".parse::<Integration>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown integration `tfjob`: accepted are job, jobset, pytorchjob"
        );
        let hostile = "job\u{1b}[2J".parse::<Integration>().unwrap_err();
        assert!(!hostile.to_string().contains('\u{1b}'), "{hostile}");
    }

    #[test]
    fn a_queue_must_be_a_label_value() {
        assert_eq!(valid_queue("team-a.gpu_1"), Ok("team-a.gpu_1"));
        for bad in ["", "-a", "a-", "a/b", "a b", &"q".repeat(64), "é"] {
            assert!(valid_queue(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_adopted_id_names_its_kind_and_cannot_be_a_training_job_s() {
        let id = adopted_id(Integration::PyTorchJob, "ml", "bert");
        assert_eq!(id, "pytorchjob:ml/bert");
        assert_eq!(
            parse_adopted_id(&id),
            Some((Integration::PyTorchJob, "ml", "bert"))
        );
        assert_eq!(parse_adopted_id("ml/bert"), None, "a TrainingJob's id");
        assert_eq!(parse_adopted_id("tfjob:ml/bert"), None);
    }

    #[test]
    fn each_kind_is_read_through_its_published_resource() {
        let r = Integration::PyTorchJob.api_resource();
        assert_eq!(
            (r.group.as_str(), r.version.as_str(), r.plural.as_str()),
            ("kubeflow.org", "v1", "pytorchjobs")
        );
        let r = Integration::JobSet.api_resource();
        assert_eq!(
            (r.group.as_str(), r.plural.as_str()),
            ("jobset.x-k8s.io", "jobsets")
        );
        let r = Integration::Job.api_resource();
        assert_eq!((r.group.as_str(), r.plural.as_str()), ("batch", "jobs"));
    }
}
