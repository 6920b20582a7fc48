//! Writing a new policy project's files, and [`ScaffoldError`], what can go wrong while
//! doing so. The leaf that [`crate::scaffold`] and [`crate::vendor`] both write through:
//! it knows no template and no SDK, and must not name either module.

use std::path::{Path, PathBuf};

/// Why a crate could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot be a crate or policy name.
    #[error(
        "`{name}` cannot name a policy: use lowercase letters, digits and `-`, starting with a letter"
    )]
    BadName {
        /// The name given.
        name: String,
    },
    /// The directory exists and is not empty.
    #[error("{path} already exists and is not empty; choose another --dir")]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// The SDK given with `--sdk` is not a crate.
    #[error(
        "no switchyard policy SDK at {path} (no Cargo.toml); pass --sdk with the path of a \
         switchyard checkout's policies/sdk, or leave it out to vendor this binary's SDK"
    )]
    NoSdk {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// `policy sdk --dir` names a folder holding something else than a vendored SDK.
    #[error(
        "{path} is not empty and holds no vendored switchyard policy SDK; give the folder \
         of the vendored SDK (a policy's switchyard-sdk/) or a new one"
    )]
    NotAnSdk {
        /// The folder.
        path: PathBuf,
    },
    /// Writing a file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Fails with [`ScaffoldError::NotEmpty`] unless `dir` is missing or empty: a new
/// project never overwrites anything.
pub(crate) fn ensure_empty(dir: &Path) -> Result<(), ScaffoldError> {
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::NotEmpty {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

/// Writes `text` to `path`, making its folders.
pub(crate) fn write(path: &Path, text: &str) -> Result<(), ScaffoldError> {
    let error = |source| ScaffoldError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(error)?;
    }
    std::fs::write(path, text).map_err(error)
}
