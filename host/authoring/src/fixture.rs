//! Fixture snapshots: one cluster state, written to a YAML file, on which a policy makes
//! one decision. Authors rarely write one from scratch: `switchyard policy test
//! --save-snapshots DIR` records every round of a simulation as a fixture, and the author
//! edits the one that matters (a node cordoned, a loss curve flattened) into a test case.
//!
//! ```yaml
//! snapshot:            # exactly what the policy is handed (see wit/policy.wit)
//!   time: 600.0
//!   triggers: [{kind: tick}]
//!   nodes: [...]
//!   jobs: [...]
//! states:              # optional: each policy's state blob (UTF-8), by policy name
//!   specon: '{"jobs":{}}'
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use switchyard_core::Snapshot;

/// Why a fixture could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The file could not be read or is not a fixture.
    #[error(transparent)]
    Load(#[from] switchyard_sim::YamlLoadError),
    /// Writing a fixture failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A state blob is not UTF-8, which a fixture file cannot hold.
    #[error(
        "the state blob of policy `{policy}` is not UTF-8 text; it cannot be saved in a fixture"
    )]
    BinaryState {
        /// The policy whose blob it is.
        policy: String,
    },
}

/// One snapshot and the state blobs the policies had when it was taken.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// What the policy is handed.
    pub snapshot: Snapshot,
    /// Each policy's state blob, by policy name (the name its `describe` gives).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub states: BTreeMap<String, String>,
}

impl Fixture {
    /// Reads a fixture file.
    pub fn load(path: &Path) -> Result<Self, FixtureError> {
        Ok(switchyard_sim::load_yaml(path)?)
    }

    /// Parses `text` as if read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, FixtureError> {
        Ok(switchyard_sim::parse_yaml(text, path)?)
    }

    /// True when `text` looks like a fixture rather than a workload: its top level has a
    /// `snapshot` key.
    pub fn looks_like(text: &str) -> bool {
        serde_norway::from_str::<serde_norway::Mapping>(text)
            .is_ok_and(|m| m.contains_key("snapshot"))
    }

    /// `snapshot` with `policy`'s state `blob`.
    pub fn new(snapshot: Snapshot, policy: &str, blob: &[u8]) -> Result<Self, FixtureError> {
        let mut states = BTreeMap::new();
        if !blob.is_empty() {
            let text = std::str::from_utf8(blob).map_err(|_| FixtureError::BinaryState {
                policy: policy.to_string(),
            })?;
            states.insert(policy.to_string(), text.to_string());
        }
        Ok(Self { snapshot, states })
    }

    /// The state blob `policy` starts from (empty when the fixture has none for it).
    pub fn state_of(&self, policy: &str) -> Vec<u8> {
        self.states
            .get(policy)
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default()
    }

    /// Writes the fixture to `path` as YAML.
    pub fn save(&self, path: &Path) -> Result<(), FixtureError> {
        let text = serde_norway::to_string(self).expect("a fixture serialises to YAML");
        std::fs::write(path, text).map_err(|source| FixtureError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}
