//! The policies the running controller knows: built-ins, uploads and files from the
//! policies directory, by name, with their source, effective parameters and the load
//! errors of components that were refused. It compiles and checks components through the
//! [`Runtime`]; it does not decide which policy is active (the driver does).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use switchyard_control::PolicySlot;
use switchyard_core::{Parameter, Settings};
use switchyard_runtime::{BUILTIN_POLICIES, LoadError, PolicyError, PolicyModule, Runtime};

/// The source of a built-in policy is this prefix and its name.
const BUILTIN_SOURCE: &str = "builtin:";

/// A policy the controller can activate.
#[derive(Clone, Debug)]
pub struct CatalogEntry {
    /// The ready-to-call policy with its effective parameters.
    pub slot: PolicySlot,
    /// Where it came from (`builtin:even`, `upload`, a file path, or `kept:` and where
    /// an upload was kept when a restarted controller loaded it from there).
    pub source: String,
}

/// A component that was refused, kept until the same source loads successfully.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LoadFailure {
    /// Where the bytes came from.
    pub source: String,
    /// Why they were refused.
    pub error: String,
    /// Seconds since the Unix epoch when it happened.
    pub at: u64,
}

/// What the API lists about one policy.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PolicyInfo {
    /// Name the policy gives itself.
    pub name: String,
    /// Version it reports.
    pub version: String,
    /// One-line summary.
    pub summary: String,
    /// `sha256:` content digest.
    pub digest: String,
    /// Where it came from.
    pub source: String,
    /// Declared parameters with defaults and docs.
    pub parameters: Vec<Parameter>,
    /// Whether it is sent jobs' loss series (as it said when it was loaded); false: every
    /// series goes to it empty, and a job whose only change is its loss is unchanged.
    pub reads_loss: bool,
    /// Effective parameter values.
    pub settings: Settings,
}

/// A catalog operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No policy of that name is loaded.
    #[error("no policy called `{name}` is loaded (loaded: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The loaded names, comma-separated.
        known: String,
    },
    /// The component was refused.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The policy refused the parameters (or its defaults).
    #[error("{0}")]
    Configure(#[source] PolicyError),
    /// A component from outside the binary calls itself by a built-in's name.
    #[error(
        "{source_name} calls itself `{name}`, the name of a built-in policy; built-in names \
         are reserved, so give the policy another name in its `describe`"
    )]
    Reserved {
        /// The name it claimed.
        name: String,
        /// Where the bytes came from.
        source_name: String,
    },
}

impl CatalogError {
    /// A short label for `switchyard_policy_load_errors_total`:
    /// [`LoadError::metric_label`], `configure` or `unknown`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            CatalogError::Load(e) => e.metric_label(),
            CatalogError::Configure(_) => "configure",
            CatalogError::Unknown { .. } => "unknown",
            CatalogError::Reserved { .. } => "reserved",
        }
    }
}

/// The loaded policies and the refused ones; shared by the API, the directory watcher
/// and the driver.
pub struct Catalog {
    runtime: Runtime,
    name_to_entry: RwLock<BTreeMap<String, CatalogEntry>>,
    source_to_failure: RwLock<BTreeMap<String, LoadFailure>>,
}

impl Catalog {
    /// A catalog holding every built-in policy with its default parameters.
    pub fn with_builtins(runtime: Runtime) -> Result<Self, CatalogError> {
        let catalog = Self {
            runtime,
            name_to_entry: RwLock::new(BTreeMap::new()),
            source_to_failure: RwLock::new(BTreeMap::new()),
        };
        for builtin in BUILTIN_POLICIES {
            catalog.load(
                builtin.bytes,
                &format!("{BUILTIN_SOURCE}{}", builtin.name),
                &BTreeMap::new(),
            )?;
        }
        Ok(catalog)
    }

    /// Compiles and checks `bytes`, configures the policy and adds it under the name it
    /// gives itself, replacing a policy of the same name. Its parameters are
    /// `parameters[name]` when given, else those of the policy it replaces, else the
    /// defaults. A refusal replaces nothing; the caller counts it and then records it
    /// with [`Catalog::record_failure`], so whoever sees the failure listed also sees it
    /// counted. Success clears `source`'s earlier failure.
    pub fn load(
        &self,
        bytes: &[u8],
        source: &str,
        parameters: &BTreeMap<String, Settings>,
    ) -> Result<CatalogEntry, CatalogError> {
        let result = self
            .runtime
            .load(bytes, source)
            .map_err(CatalogError::Load)
            .and_then(|module| {
                let builtin = source.strip_prefix(BUILTIN_SOURCE) == Some(module.name());
                if !builtin && switchyard_runtime::builtin(module.name()).is_some() {
                    return Err(CatalogError::Reserved {
                        name: module.name().to_string(),
                        source_name: source.to_string(),
                    });
                }
                let settings = parameters
                    .get(module.name())
                    .cloned()
                    .or_else(|| self.get(module.name()).ok().map(|e| e.slot.settings))
                    .unwrap_or_default();
                PolicySlot::configure(module, &settings).map_err(CatalogError::Configure)
            });
        match result {
            Ok(slot) => {
                self.source_to_failure.write().unwrap().remove(source);
                let entry = CatalogEntry {
                    slot,
                    source: source.to_string(),
                };
                self.name_to_entry
                    .write()
                    .unwrap()
                    .insert(entry.slot.name().to_string(), entry.clone());
                Ok(entry)
            }
            Err(error) => Err(error),
        }
    }

    /// Notes that `source` could not be used (also for failures outside this catalog,
    /// such as an unreadable file or settings file).
    pub fn record_failure(&self, source: &str, error: &str) {
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.source_to_failure.write().unwrap().insert(
            source.to_string(),
            LoadFailure {
                source: source.to_string(),
                error: error.to_string(),
                at,
            },
        );
    }

    /// Forgets `source`'s load error.
    pub fn clear_failure(&self, source: &str) {
        self.source_to_failure.write().unwrap().remove(source);
    }

    /// The policy called `name`.
    pub fn get(&self, name: &str) -> Result<CatalogEntry, CatalogError> {
        let entries = self.name_to_entry.read().unwrap();
        entries
            .get(name)
            .cloned()
            .ok_or_else(|| CatalogError::Unknown {
                name: name.to_string(),
                known: entries.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }

    /// Configures `name` with `settings` (defaults filled in by the policy) and keeps
    /// the result as its parameters. Nothing changes when the policy refuses them.
    pub fn configure(&self, name: &str, settings: &Settings) -> Result<CatalogEntry, CatalogError> {
        loop {
            let entry = self.configured(name, settings)?;
            if self.keep_configured(&entry) {
                return Ok(entry);
            }
        }
    }

    /// `name` configured with `settings`, not kept: the caller keeps it with
    /// [`Catalog::keep_configured`] once it has made the change durable.
    pub fn configured(
        &self,
        name: &str,
        settings: &Settings,
    ) -> Result<CatalogEntry, CatalogError> {
        let entry = self.get(name)?;
        let slot = PolicySlot::configure(entry.slot.module.clone(), settings)
            .map_err(CatalogError::Configure)?;
        Ok(CatalogEntry {
            slot,
            source: entry.source,
        })
    }

    /// Keeps `entry` as its policy's, unless another component of that name was loaded
    /// since it was configured (an upload while the policy's `configure` ran): then
    /// nothing changes and the answer is `false`, so a parameter change never undoes
    /// an upload.
    pub fn keep_configured(&self, entry: &CatalogEntry) -> bool {
        let mut entries = self.name_to_entry.write().unwrap();
        match entries.get_mut(entry.slot.name()) {
            Some(current) if Arc::ptr_eq(&current.slot.module, &entry.slot.module) => {
                *current = entry.clone();
                true
            }
            _ => false,
        }
    }

    /// Every loaded policy, by name.
    pub fn list(&self) -> Vec<PolicyInfo> {
        self.name_to_entry
            .read()
            .unwrap()
            .values()
            .map(|e| policy_info(&e.slot.module, &e.source, &e.slot.settings))
            .collect()
    }

    /// Every load error still standing, by source.
    pub fn failures(&self) -> Vec<LoadFailure> {
        self.source_to_failure
            .read()
            .unwrap()
            .values()
            .cloned()
            .collect()
    }
}

/// The API's view of a loaded policy.
pub(crate) fn policy_info(
    module: &Arc<PolicyModule>,
    source: &str,
    settings: &Settings,
) -> PolicyInfo {
    let d = module.description();
    PolicyInfo {
        name: d.name.clone(),
        version: d.version.clone(),
        summary: d.summary.clone(),
        digest: module.digest().to_hex(),
        source: source.to_string(),
        parameters: d.parameters.clone(),
        reads_loss: d.reads_loss,
        settings: settings.clone(),
    }
}
