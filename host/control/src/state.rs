//! What the controller keeps between runs: each policy's state blob, which policy is
//! active, the parameters operators set for every policy, and the components accepted
//! by upload.
//!
//! A policy is instantiated afresh for every call, so its blob is all it remembers. The
//! loop keeps one blob per policy name: swapping to another policy and back resumes the
//! first one's blob, and a [`DirStateStore`] writes every changed blob to a file so a
//! restarted controller picks up where it stopped. An uploaded component exists nowhere
//! else, so a [`ComponentStore`] keeps it too, and the live controller loads it again at
//! start (and when a replica becomes leader) before it resumes the active policy. A
//! policy that came from an OCI registry is kept the same way, as the UTF-8 text of its
//! reference pinned to a digest (`oci://...@sha256:...`) instead of the component: the
//! controller tells the two apart (a component starts with the Wasm magic) and pulls the
//! reference again.
//! Components from the policies directory and built-ins are never kept: the directory
//! and the binary are their own persistence. This module decides nothing about which
//! policy runs.
//!
//! Components have a trait of their own rather than more methods on [`StateStore`]:
//! blobs are read and written by the decision thread, which owns its store, between
//! rounds; a component is written by the upload handler (a large write must not delay a
//! round) and read at start and on a change of leader, so a [`ComponentStore`] is shared
//! (`Send + Sync`, behind an `Arc`) and stores that keep nothing, like the offline
//! simulator's, need not pretend to. [`DirStateStore`] and the cluster's ConfigMap store
//! implement both; [`MemoryStateStore`] keeps no component and says so.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use switchyard_core::Settings;

/// The file under a state directory naming the active policy and its parameters.
pub const ACTIVE_FILE: &str = "active.json";

/// The file under a state directory holding the parameters operators set, by policy
/// (active or not).
pub const PARAMETERS_FILE: &str = "parameters.json";

/// The parameters operators set, by policy name.
pub type PolicyParameters = std::collections::BTreeMap<String, Settings>;
/// The folder under a state directory holding uploaded components, `<policy>.wasm`.
const COMPONENTS_DIR: &str = "components";

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

impl StateError {
    /// The file or object at fault, for a load error's source.
    pub fn place(&self) -> String {
        match self {
            StateError::Io { path, .. } | StateError::Format { path, .. } => {
                path.display().to_string()
            }
            StateError::Remote { place, .. } => place.clone(),
        }
    }
}

/// Why an accepted upload is not kept for the next start. The component is loaded and
/// used all the same; only a restart (or a change of leader) loses it.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    /// The store keeps nothing beyond the process.
    #[error(
        "the controller keeps nothing across restarts (it runs without --state-dir): this upload is gone after a restart; start the controller with --state-dir DIR to keep uploads"
    )]
    NothingKept,
    /// The component is larger than the store can hold.
    #[error(
        "the component is {size} bytes ({:.1} MiB), more than {place} can hold ({limit} bytes), so it is not kept: it is used now, but a restart or a new leader will not have it. To keep it, ship it through an OCI registry: `switchyard policy push FILE.wasm oci://REGISTRY/REPOSITORY:TAG`, then load it by reference (`switchyard ctl upload oci://...`, or POST /v1/policies with {{\"reference\": \"oci://...\"}}), which is kept as the reference and its digest and pulled again after a restart",
        *size as f64 / f64::from(1 << 20)
    )]
    TooLarge {
        /// The component's size.
        size: usize,
        /// What one object of the store holds.
        limit: usize,
        /// The kind of object, e.g. `a ConfigMap`.
        place: String,
    },
    /// Writing it failed.
    #[error(
        "the component could not be kept ({0}): it is used now, but a restart will not have it; upload it again to retry"
    )]
    Store(#[from] StateError),
}

impl KeepError {
    /// Short label for the `reason` of `switchyard_policy_uploads_not_kept_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            KeepError::NothingKept => "nothing-kept",
            KeepError::TooLarge { .. } => "too-large",
            KeepError::Store(_) => "store-error",
        }
    }
}

/// A component read back from a [`ComponentStore`].
#[derive(Clone, Debug, PartialEq)]
pub struct KeptComponent {
    /// Where it is kept: a file, or `ConfigMap <namespace>/<name>`.
    pub location: String,
    /// The component as it was uploaded.
    pub bytes: Vec<u8>,
}

/// Where uploaded components live between controller runs (see the module docs for why
/// this is not part of [`StateStore`]).
pub trait ComponentStore: Send + Sync {
    /// Keeps `bytes`, the component of `policy` or its pinned registry reference,
    /// replacing what was kept for that name;
    /// returns where it is kept. When they cannot be kept, a copy kept earlier under that
    /// name is dropped as well where the store can, so a restart does not bring back a
    /// version older than the one in use.
    fn keep(&self, policy: &str, bytes: &[u8]) -> Result<String, KeepError>;

    /// Every kept component, read back; an entry that cannot be read is an error naming
    /// its place, and the others are still returned.
    fn kept(&self) -> Vec<Result<KeptComponent, StateError>>;
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
    /// The parameters operators set, by policy (stores that keep nothing answer none).
    fn load_parameters(&self) -> Result<PolicyParameters, StateError> {
        Ok(PolicyParameters::new())
    }
    /// Remembers the parameters operators set, by policy, replacing what was kept.
    fn save_parameters(&self, _parameters: &PolicyParameters) -> Result<(), StateError> {
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

impl ComponentStore for MemoryStateStore {
    fn keep(&self, _: &str, _: &[u8]) -> Result<String, KeepError> {
        Err(KeepError::NothingKept)
    }
    fn kept(&self) -> Vec<Result<KeptComponent, StateError>> {
        Vec::new()
    }
}

/// The name every temporary file of a write starts with.
const TEMP_PREFIX: &str = ".switchyard-writing-";

/// One file per policy under a directory (`<policy>.state`, `active.json`,
/// `parameters.json`, and each kept
/// upload as `components/<policy>.wasm`), written atomically (a temporary file in the
/// same directory, synced, then renamed over the old one), so a crash mid-write leaves
/// the previous contents intact.
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
        let store = Self {
            dir: dir.to_path_buf(),
        };
        store.remove_interrupted_writes();
        Ok(store)
    }

    /// Removes what writes cut short (a killed process) left: temporary files are
    /// renamed over their target only once complete, so one still here is garbage.
    fn remove_interrupted_writes(&self) {
        for folder in [self.dir.clone(), self.dir.join(COMPONENTS_DIR)] {
            let Ok(entries) = std::fs::read_dir(&folder) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if name.to_string_lossy().starts_with(TEMP_PREFIX) {
                    match std::fs::remove_file(entry.path()) {
                        Ok(()) => {
                            tracing::info!(file = %entry.path().display(), "removed a write cut short")
                        }
                        Err(error) => {
                            tracing::warn!(%error, file = %entry.path().display(), "cannot remove a write cut short")
                        }
                    }
                }
            }
        }
    }

    /// The file holding `policy`'s blob. Names are reduced to a safe alphabet so a
    /// policy name can never point outside the directory.
    pub fn path_of(&self, policy: &str) -> PathBuf {
        self.dir.join(format!("{}.state", safe_name(policy)))
    }

    /// The file keeping `policy`'s uploaded component.
    pub fn component_path_of(&self, policy: &str) -> PathBuf {
        self.dir
            .join(COMPONENTS_DIR)
            .join(format!("{}.wasm", safe_name(policy)))
    }

    fn write_atomically(&self, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        let folder = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(folder).map_err(io)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .tempfile_in(folder)
            .map_err(io)?;
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
        self.read_json(ACTIVE_FILE)
    }

    fn save_active(&self, active: &ActivePolicy) -> Result<(), StateError> {
        self.write_json(ACTIVE_FILE, active)
    }

    fn load_parameters(&self) -> Result<PolicyParameters, StateError> {
        Ok(self.read_json(PARAMETERS_FILE)?.unwrap_or_default())
    }

    fn save_parameters(&self, parameters: &PolicyParameters) -> Result<(), StateError> {
        self.write_json(PARAMETERS_FILE, parameters)
    }
}

impl DirStateStore {
    /// The JSON file `name` under the directory, `None` when there is none.
    fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, StateError> {
        let path = self.dir.join(name);
        match std::fs::read(&path) {
            Ok(text) => serde_json::from_slice(&text)
                .map(Some)
                .map_err(|source| StateError::Format { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io { path, source }),
        }
    }

    /// Writes `value` as the JSON file `name` under the directory, atomically.
    fn write_json(&self, name: &str, value: &impl Serialize) -> Result<(), StateError> {
        let path = self.dir.join(name);
        let bytes = serde_json::to_vec_pretty(value).map_err(|source| StateError::Format {
            path: path.clone(),
            source,
        })?;
        self.write_atomically(&path, &bytes)
    }
}

impl ComponentStore for DirStateStore {
    fn keep(&self, policy: &str, bytes: &[u8]) -> Result<String, KeepError> {
        let path = self.component_path_of(policy);
        if let Err(error) = self.write_atomically(&path, bytes) {
            // Do not let an older upload of the same name come back after a restart.
            let _ = std::fs::remove_file(&path);
            return Err(error.into());
        }
        Ok(path.display().to_string())
    }

    fn kept(&self) -> Vec<Result<KeptComponent, StateError>> {
        let folder = self.dir.join(COMPONENTS_DIR);
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(source) => {
                return vec![Err(StateError::Io {
                    path: folder,
                    source,
                })];
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            // Leftover temporary files of an interrupted write have no `.wasm` extension.
            .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
            .collect();
        paths.sort();
        paths
            .into_iter()
            .map(|path| match std::fs::read(&path) {
                Ok(bytes) => Ok(KeptComponent {
                    location: path.display().to_string(),
                    bytes,
                }),
                Err(source) => Err(StateError::Io { path, source }),
            })
            .collect()
    }
}

/// `name` reduced to a safe alphabet, so a policy name can never point outside the
/// directory.
fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The blobs of every policy that has decided, by policy name.
pub(crate) struct PolicyStates {
    blobs: HashMap<String, Vec<u8>>,
    store: Box<dyn StateStore>,
    save_failures: u64,
    /// The last save's error, while saves keep failing.
    failing: Option<String>,
}

impl PolicyStates {
    pub(crate) fn new(store: Box<dyn StateStore>) -> Self {
        Self {
            blobs: HashMap::new(),
            store,
            save_failures: 0,
            failing: None,
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
        match self.store.save(policy, &blob) {
            Ok(()) => {
                if self.failing.take().is_some() {
                    tracing::info!(policy, "policy state is persisted again");
                }
            }
            Err(error) => {
                self.save_failures += 1;
                // Once per outage, not once per round.
                if self.failing.is_none() {
                    tracing::error!(%error, policy, "cannot persist policy state; a restart would lose it (see /v1/status)");
                }
                self.failing = Some(error.to_string());
            }
        }
        self.blobs.insert(policy.to_string(), blob);
    }

    pub(crate) fn save_failures(&self) -> u64 {
        self.save_failures
    }

    /// The last save's error, while saves keep failing.
    pub(crate) fn save_error(&self) -> Option<&str> {
        self.failing.as_deref()
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
