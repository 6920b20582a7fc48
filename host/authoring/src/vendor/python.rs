//! The Python SDK (`sdk/python`) this binary was built with, embedded in it and written
//! out beside a Python policy (`switchyard policy new --lang python` puts it in the
//! project's `switchyard-sdk/`, `switchyard policy sdk --lang python` updates it). The
//! project then builds with componentize-py from its own folder: the SDK carries the WIT
//! and the bindings generated from it, so no switchyard checkout is needed.

use std::path::{Path, PathBuf};

use crate::files::{ScaffoldError, write_language_sdk};

/// The SDK's files, as `(path in the vendored folder, text)`: the package, its
/// `componentize-py.toml`, WIT and bindings, and its README. A test checks that this
/// lists every file of `sdk/python/src`.
const SOURCES: &[(&str, &str)] = &[
    (
        "pyproject.toml",
        include_str!("../../../../sdk/python/pyproject.toml"),
    ),
    (
        "README.md",
        include_str!("../../../../sdk/python/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../../../sdk/python/.gitignore"),
    ),
    (
        "src/switchyard_policy/__init__.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/__init__.py"),
    ),
    (
        "src/switchyard_policy/_native_types.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/_native_types.py"),
    ),
    (
        "src/switchyard_policy/binding.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/binding.py"),
    ),
    (
        "src/switchyard_policy/cluster.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/cluster.py"),
    ),
    (
        "src/switchyard_policy/componentize-py.toml",
        include_str!("../../../../sdk/python/src/switchyard_policy/componentize-py.toml"),
    ),
    (
        "src/switchyard_policy/contract.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/contract.py"),
    ),
    (
        "src/switchyard_policy/decision.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/decision.py"),
    ),
    (
        "src/switchyard_policy/incremental.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/incremental.py"),
    ),
    (
        "src/switchyard_policy/log.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/log.py"),
    ),
    (
        "src/switchyard_policy/policy.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/policy.py"),
    ),
    (
        "src/switchyard_policy/progress.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/progress.py"),
    ),
    (
        "src/switchyard_policy/py.typed",
        include_str!("../../../../sdk/python/src/switchyard_policy/py.typed"),
    ),
    (
        "src/switchyard_policy/settings.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/settings.py"),
    ),
    (
        "src/switchyard_policy/state.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/state.py"),
    ),
    (
        "src/switchyard_policy/testing.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/testing.py"),
    ),
    (
        "src/switchyard_policy/wit/__init__.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/wit/__init__.py"),
    ),
    (
        "src/switchyard_policy/wit/exports/__init__.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/wit/exports/__init__.py"),
    ),
    (
        "src/switchyard_policy/wit/exports/incremental_scheduler.py",
        include_str!(
            "../../../../sdk/python/src/switchyard_policy/wit/exports/incremental_scheduler.py"
        ),
    ),
    (
        "src/switchyard_policy/wit/imports/__init__.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/wit/imports/__init__.py"),
    ),
    (
        "src/switchyard_policy/wit/imports/host.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/wit/imports/host.py"),
    ),
    (
        "src/switchyard_policy/wit/imports/types.py",
        include_str!("../../../../sdk/python/src/switchyard_policy/wit/imports/types.py"),
    ),
    (
        "src/switchyard_policy/wit/policy.wit",
        include_str!("../../../../sdk/python/src/switchyard_policy/wit/policy.wit"),
    ),
];

/// What marks a folder as a vendored Python SDK.
const MARKER: &str = "name = \"switchyard-policy\"";

/// Writes the vendored Python SDK into `dir`: an empty or missing folder, or one
/// holding an earlier vendored SDK (its package is replaced whole, so no stale module
/// stays). Returns the files written.
pub fn vendor_python_sdk(dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    write_language_sdk(
        dir,
        ("pyproject.toml", MARKER),
        "src/switchyard_policy",
        SOURCES,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_under(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            // What an installation or a test run leaves behind is not the SDK.
            if name == "__pycache__" || name.ends_with(".egg-info") {
                continue;
            }
            if path.is_dir() {
                files_under(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }

    #[test]
    fn every_file_of_the_python_sdk_package_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python");
        let mut on_disk = Vec::new();
        files_under(&root, &root.join("src"), &mut on_disk);
        on_disk.sort();
        let mut embedded: Vec<&str> = SOURCES
            .iter()
            .map(|(path, _)| *path)
            .filter(|p| p.starts_with("src/"))
            .collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
        assert!(
            SOURCES
                .iter()
                .any(|(path, text)| *path == "pyproject.toml" && text.contains(MARKER))
        );
    }

    #[test]
    fn an_update_replaces_the_package_and_refuses_a_folder_that_is_not_an_sdk() {
        let dir = tempfile::tempdir().unwrap();
        vendor_python_sdk(dir.path()).unwrap();
        let stale = dir.path().join("src/switchyard_policy/gone.py");
        std::fs::write(&stale, "# from an older SDK").unwrap();
        vendor_python_sdk(dir.path()).unwrap();
        assert!(!stale.exists());
        assert!(
            dir.path()
                .join("src/switchyard_policy/wit/policy.wit")
                .is_file()
        );
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("notes.txt"), "mine").unwrap();
        let error = vendor_python_sdk(other.path()).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotAnSdk { .. }), "{error}");
    }
}
