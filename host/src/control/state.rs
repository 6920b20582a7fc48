//! Each policy's state blob, kept per policy name and optionally persisted.
//!
//! A policy is instantiated afresh for every call, so its blob is all it remembers. The
//! loop keeps one blob per policy name: swapping to another policy and back resumes the
//! first one's blob, and a [`DirStateStore`] writes every changed blob to a file so a
//! restarted controller picks up where it stopped. This module decides nothing about
//! which policy runs.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::Settings;

/// The file under a state directory naming the active policy and its parameters.
pub const ACTIVE_FILE: &str = "active.json";

/// A state blob could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing a state file failed.
    #[error("policy state file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The record of the active policy is not what this version writes.
    #[error("policy state file {path}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A store kept outside the process (the cluster) could not be used.
    #[error("policy state in {place}: {message}")]
    Remote {
        /// Where the state lives, e.g. `ConfigMap switchyard/switchyard-state`.
        place: String,
        /// What failed.
        message: String,
    },
}

/// The policy that was active when the controller last changed it, and its settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActivePolicy {
    /// The active policy's name.
    pub policy: String,
    /// Its effective settings.
    pub settings: Settings,
}

/// Where blobs live between controller runs.
pub trait StateStore: Send {
    /// The blob last saved for `policy`, if any.
    fn load(&self, policy: &str) -> Result<Option<Vec<u8>>, StateError>;
    /// Replaces the blob saved for `policy`.
    fn save(&self, policy: &str, blob: &[u8]) -> Result<(), StateError>;
    /// Which policy was active (stores that keep nothing answer `None`).
    fn load_active(&self) -> Result<Option<ActivePolicy>, StateError> {
        Ok(None)
    }
    /// Remembers which policy is active.
    fn save_active(&self, _active: &ActivePolicy) -> Result<(), StateError> {
        Ok(())
    }
}

/// Keeps nothing beyond the process: the simulator's offline runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryStateStore;

impl StateStore for MemoryStateStore {
    fn load(&self, _: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(None)
    }
    fn save(&self, _: &str, _: &[u8]) -> Result<(), StateError> {
        Ok(())
    }
}

/// One file per policy under a directory, written atomically (a temporary file in the
/// same directory, synced, then renamed over the old one), so a crash mid-write leaves
/// the previous blob intact.
#[derive(Clone, Debug)]
pub struct DirStateStore {
    dir: PathBuf,
}

impl DirStateStore {
    /// Uses `dir`, creating it if needed.
    pub fn new(dir: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir).map_err(|source| StateError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// The file holding `policy`'s blob. Names are reduced to a safe alphabet so a
    /// policy name can never point outside the directory.
    pub fn path_of(&self, policy: &str) -> PathBuf {
        let safe: String = policy
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{safe}.state"))
    }

    fn write_atomically(&self, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        tmp.write_all(bytes).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

impl StateStore for DirStateStore {
    fn load(&self, policy: &str) -> Result<Option<Vec<u8>>, StateError> {
        let path = self.path_of(policy);
        match std::fs::read(&path) {
            Ok(blob) => Ok(Some(blob)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io { path, source }),
        }
    }

    fn save(&self, policy: &str, blob: &[u8]) -> Result<(), StateError> {
        self.write_atomically(&self.path_of(policy), blob)
    }

    fn load_active(&self) -> Result<Option<ActivePolicy>, StateError> {
        let path = self.dir.join(ACTIVE_FILE);
        match std::fs::read(&path) {
            Ok(text) => serde_json::from_slice(&text)
                .map(Some)
                .map_err(|source| StateError::Format { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io { path, source }),
        }
    }

    fn save_active(&self, active: &ActivePolicy) -> Result<(), StateError> {
        let path = self.dir.join(ACTIVE_FILE);
        let bytes = serde_json::to_vec_pretty(active).map_err(|source| StateError::Format {
            path: path.clone(),
            source,
        })?;
        self.write_atomically(&path, &bytes)
    }
}

/// The blobs of every policy that has decided, by policy name.
pub(crate) struct PolicyStates {
    blobs: HashMap<String, Vec<u8>>,
    store: Box<dyn StateStore>,
    save_failures: u64,
}

impl PolicyStates {
    pub(crate) fn new(store: Box<dyn StateStore>) -> Self {
        Self {
            blobs: HashMap::new(),
            store,
            save_failures: 0,
        }
    }

    /// `policy`'s blob, read from the store the first time (empty when there is none or
    /// it cannot be read: the policy starts afresh rather than the round failing).
    pub(crate) fn get(&mut self, policy: &str) -> &[u8] {
        if !self.blobs.contains_key(policy) {
            let blob = match self.store.load(policy) {
                Ok(blob) => blob.unwrap_or_default(),
                Err(error) => {
                    tracing::warn!(%error, policy, "cannot read the policy's state; it starts afresh");
                    Vec::new()
                }
            };
            self.blobs.insert(policy.to_string(), blob);
        }
        &self.blobs[policy]
    }

    /// Keeps `blob` as `policy`'s state and persists it when it changed.
    pub(crate) fn put(&mut self, policy: &str, blob: Vec<u8>) {
        if self.blobs.get(policy) == Some(&blob) {
            return;
        }
        if let Err(error) = self.store.save(policy, &blob) {
            self.save_failures += 1;
            tracing::warn!(%error, policy, "cannot persist the policy's state");
        }
        self.blobs.insert(policy.to_string(), blob);
    }

    pub(crate) fn save_failures(&self) -> u64 {
        self.save_failures
    }

    /// The store behind the blobs.
    pub(crate) fn store(&self) -> &dyn StateStore {
        self.store.as_ref()
    }

    /// Forgets the blobs read so far, so each is read from the store again (another
    /// replica may have written newer ones).
    pub(crate) fn forget(&mut self) {
        self.blobs.clear();
    }
}
