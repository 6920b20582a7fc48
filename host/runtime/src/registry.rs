//! Where policies come from: the components shipped inside the binary (addressable by
//! name) and `.wasm` files on disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::Runtime;
use crate::error::LoadError;
use crate::module::PolicyModule;

/// A policy component compiled into the binary by the build script.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinPolicy {
    /// The name operators use (`--policy default`).
    pub name: &'static str,
    /// The component's bytes.
    pub bytes: &'static [u8],
}

/// Every shipped policy (each crate under `policies/` but the SDK, named after its
/// folder), in name order. The table is written by the build script.
pub const BUILTIN_POLICIES: &[BuiltinPolicy] =
    include!(concat!(env!("OUT_DIR"), "/builtin_policies.rs"));

/// The shipped policy called `name`.
pub fn builtin(name: &str) -> Option<&'static BuiltinPolicy> {
    BUILTIN_POLICIES.iter().find(|p| p.name == name)
}

/// How a user names a policy: a built-in name or a path to a `.wasm` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyRef {
    /// A shipped policy.
    Builtin(&'static str),
    /// A component file.
    File(PathBuf),
}

/// A policy reference that could not be resolved or loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Neither a built-in name nor a file path.
    #[error("no built-in policy is called `{0}` (built-in: {list}); a policy file must end in .wasm", list = builtin_names().join(", "))]
    UnknownName(String),
    /// The file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The component was refused.
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// Names of the shipped policies.
fn builtin_names() -> Vec<&'static str> {
    BUILTIN_POLICIES.iter().map(|p| p.name).collect()
}

impl PolicyRef {
    /// Reads `text` as a built-in name, or as a path when it ends in `.wasm` or names an
    /// existing file.
    pub fn parse(text: &str) -> Result<Self, RegistryError> {
        if let Some(builtin) = builtin(text) {
            return Ok(PolicyRef::Builtin(builtin.name));
        }
        let path = Path::new(text);
        if text.ends_with(".wasm") || path.is_file() {
            return Ok(PolicyRef::File(path.to_path_buf()));
        }
        Err(RegistryError::UnknownName(text.to_string()))
    }

    /// Where the policy comes from, as shown to operators (`builtin:default`, a path).
    pub fn source_name(&self) -> String {
        match self {
            PolicyRef::Builtin(name) => format!("builtin:{name}"),
            PolicyRef::File(path) => path.display().to_string(),
        }
    }

    /// Loads the component through `runtime` (compiled once per digest).
    pub fn load(&self, runtime: &Runtime) -> Result<Arc<PolicyModule>, RegistryError> {
        let source = self.source_name();
        match self {
            PolicyRef::Builtin(name) => {
                let builtin = builtin(name).expect("parsed from the builtin table");
                Ok(runtime.load(builtin.bytes, &source)?)
            }
            PolicyRef::File(path) => {
                let bytes = std::fs::read(path).map_err(|source| RegistryError::Read {
                    path: path.clone(),
                    source,
                })?;
                Ok(runtime.load(&bytes, &source)?)
            }
        }
    }
}
