//! Writing a new policy project's files, and [`ScaffoldError`], what can go wrong while
//! doing so: the leaf every other module of the crate writes through. It knows no
//! template and no SDK's contents, and must not name the modules that do.

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

/// Fails with [`ScaffoldError::NotAnSdk`] unless `dir` is missing, empty, or holds a
/// vendored SDK: its `marker_file` contains `marker`.
pub(crate) fn ensure_sdk_folder(
    dir: &Path,
    marker_file: &str,
    marker: &str,
) -> Result<(), ScaffoldError> {
    let is_sdk =
        std::fs::read_to_string(dir.join(marker_file)).is_ok_and(|text| text.contains(marker));
    let empty = std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none());
    if !empty && !is_sdk {
        return Err(ScaffoldError::NotAnSdk {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

/// Writes the SDK of a guest language, `sources`, into `dir`: an empty or missing
/// folder, or one holding an earlier vendored SDK (its `marker_file` contains `marker`),
/// whose `package` folder is replaced whole so that no stale module stays. Returns the
/// files written.
pub(crate) fn write_language_sdk(
    dir: &Path,
    (marker_file, marker): (&str, &str),
    package: &str,
    sources: &[(&str, &str)],
) -> Result<Vec<PathBuf>, ScaffoldError> {
    ensure_sdk_folder(dir, marker_file, marker)?;
    let package = dir.join(package);
    if package.is_dir() {
        std::fs::remove_dir_all(&package).map_err(|source| ScaffoldError::Write {
            path: package.clone(),
            source,
        })?;
    }
    let mut written = Vec::new();
    for (relative, text) in sources {
        let path = dir.join(relative);
        write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}
