//! Workload files: the YAML schema (documented in `docs/workloads.md`), reading it with
//! errors that name the file, line and field, and resolving it into a [`Scenario`] the
//! simulator runs. Importers of real traces live in [`import`]. This module decides
//! nothing about scheduling.
//!
//! - `schema`: the file's types as serde reads them.
//! - `limits`: how much a workload may declare ([`InputLimits`]) and the checks of
//!   single values.
//! - `resolve`: the file resolved into a scenario: nodes, the simulator's knobs,
//!   arrivals, ids and imports, the declared size checked before anything is built.
//! - `template`: one job template resolved into a job spec.
//! - `import`, `application`, `table`: the Philly and Pollux traces and the files they
//!   read.
//! - `error`: what goes wrong, naming the file, line and field.
//!
//! Every value is checked before it is used, and a workload's declared size (its node
//! groups' counts, each entry's count times its template's tasks, each trace's rows)
//! against [`InputLimits`] before anything is built: a refusal names the field, the
//! value and what is accepted.

mod application;
mod error;
mod import;
mod limits;
mod resolve;
mod schema;
mod table;
mod template;

use std::path::{Path, PathBuf};

use crate::simulator::Scenario;
pub use application::load_application;
pub use error::WorkloadError;
pub use import::replay_curve;
pub use limits::InputLimits;
use resolve::Resolver;
pub use schema::{
    Acknowledge, ClusterFile, CurveFile, CurveShape, FaultsFile, ImportFile, JobEntry, JobTemplate,
    NodeGroup, PhillyImport, PolluxImport, ReplayedCurveFile, RoleFile, ScaleFile, SimulatorFile,
    WorkloadFile,
};

/// A parsed workload file and where it came from (imports are relative to it).
#[derive(Clone, Debug)]
pub struct Workload {
    /// The file.
    pub path: PathBuf,
    /// Its contents.
    pub file: WorkloadFile,
    /// What it may declare.
    limits: InputLimits,
}

impl Workload {
    /// Reads and checks the schema of the file at `path`, within the default
    /// [`InputLimits`].
    pub fn load(path: &Path) -> Result<Self, WorkloadError> {
        Self::load_with(path, InputLimits::default())
    }

    /// Reads and checks the schema of the file at `path`, within `limits`: a regular
    /// file of at most `limits.yaml_bytes`, nested at most `limits.yaml_depth` levels.
    pub fn load_with(path: &Path, limits: InputLimits) -> Result<Self, WorkloadError> {
        let text = crate::yaml::read_text(path, &limits).map_err(|source| WorkloadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_with(&text, path, limits)
    }

    /// Parses `text` as if read from `path`, within the default [`InputLimits`].
    pub fn parse(text: &str, path: &Path) -> Result<Self, WorkloadError> {
        Self::parse_with(text, path, InputLimits::default())
    }

    /// Parses `text` as if read from `path`, within `limits`: at most
    /// `limits.yaml_bytes` bytes, nested at most `limits.yaml_depth` levels.
    pub fn parse_with(text: &str, path: &Path, limits: InputLimits) -> Result<Self, WorkloadError> {
        if text.len() as u64 > limits.yaml_bytes {
            return Err(WorkloadError::Read {
                path: path.to_path_buf(),
                source: crate::yaml::too_large(limits.yaml_bytes),
            });
        }
        let file: WorkloadFile = crate::yaml::from_str(text, limits.yaml_depth)
            .map_err(|e| WorkloadError::parse(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            limits,
        })
    }

    /// What it may declare.
    pub fn limits(&self) -> &InputLimits {
        &self.limits
    }

    /// The seed the file asks for.
    pub fn seed(&self) -> u64 {
        self.file.seed
    }

    /// The policies `simulate` compares when none is named, and why those.
    ///
    /// An imported trace (Philly, Pollux) is GPU training jobs with no loss curve a CPU
    /// policy could read: SpeCon, FlowCon and the even spread have nothing to act on
    /// there, so it gets the GPU schedulers beside kube-scheduler's default. A file of
    /// its own gets the baselines every workload can be compared on.
    pub fn default_policies(&self) -> (&'static [&'static str], &'static str) {
        match &self.file.import {
            Some(_) => (
                &["default", "gang", "tiresias"],
                "an imported trace of GPU jobs: kube-scheduler's default, all-or-nothing \
                 gangs and Tiresias (SpeCon and FlowCon act on CPU jobs' loss curves, which \
                 a trace lacks)",
            ),
            None => (
                &["default", "even", "gang"],
                "the baselines: kube-scheduler's default, the even spread and gangs",
            ),
        }
    }

    /// Resolves templates, arrivals and imports into a scenario, drawing generated
    /// arrivals from `seed`. The declared size is checked against the limits first.
    pub fn scenario(&self, seed: u64) -> Result<Scenario, WorkloadError> {
        Resolver {
            path: &self.path,
            file: &self.file,
            limits: &self.limits,
        }
        .scenario(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(text: &str) -> Workload {
        Workload::parse(text, Path::new("w.yaml")).unwrap()
    }

    #[test]
    fn an_imported_trace_defaults_to_the_gpu_schedulers_and_a_file_of_its_own_to_the_baselines() {
        let imported = workload(
            "cluster: {nodes: [{name: gpu, cpus: 8, memory_gib: 32, gpus: 8}]}\n\
             import: {philly: {path: philly.csv, cluster: 6214e9}}\n",
        );
        let (policies, why) = imported.default_policies();
        assert_eq!(policies, ["default", "gang", "tiresias"]);
        assert!(why.contains("imported trace"), "{why}");
        let own = workload(
            "cluster: {nodes: [{name: cpu, cpus: 8, memory_gib: 32}]}\n\
             templates: {t: {work: 10, cpus: 1, memory_gib: 1}}\n\
             jobs: [{template: t, at: 0}]\n",
        );
        assert_eq!(own.default_policies().0, ["default", "even", "gang"]);
    }
}
