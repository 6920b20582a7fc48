//! The guest SDK and the WIT contract this binary was built with, embedded in it, and
//! written out as a crate of their own (`switchyard policy new` puts one beside every
//! standalone policy, `switchyard policy sdk` updates it). A policy crate so made builds
//! from its own folder and crates.io alone: no path to a switchyard checkout, and the
//! contract is the one the binary that validates the component speaks.

use std::path::{Path, PathBuf};

use crate::files::{ScaffoldError, ensure_sdk_folder, write};

mod js;
mod python;

pub use js::{js_project_lock, js_project_manifest, vendor_js_sdk};
pub use python::vendor_python_sdk;

/// The folder of the vendored SDK inside a new policy crate.
pub const SDK_DIR: &str = "switchyard-sdk";

/// The SDK's sources and the contract, as `(path in the vendored crate, text)`. A test
/// checks that this lists every file under `policies/sdk/src`, its subfolders' too.
const SOURCES: &[(&str, &str)] = &[
    (
        "src/changes.rs",
        include_str!("../../../policies/sdk/src/changes.rs"),
    ),
    (
        "src/cluster.rs",
        include_str!("../../../policies/sdk/src/cluster.rs"),
    ),
    (
        "src/cluster/gang.rs",
        include_str!("../../../policies/sdk/src/cluster/gang.rs"),
    ),
    (
        "src/cluster/jobs.rs",
        include_str!("../../../policies/sdk/src/cluster/jobs.rs"),
    ),
    (
        "src/cluster/ledger.rs",
        include_str!("../../../policies/sdk/src/cluster/ledger.rs"),
    ),
    (
        "src/cluster/ledger/tests.rs",
        include_str!("../../../policies/sdk/src/cluster/ledger/tests.rs"),
    ),
    (
        "src/cluster/nodes.rs",
        include_str!("../../../policies/sdk/src/cluster/nodes.rs"),
    ),
    (
        "src/cluster/resources.rs",
        include_str!("../../../policies/sdk/src/cluster/resources.rs"),
    ),
    (
        "src/entries.rs",
        include_str!("../../../policies/sdk/src/entries.rs"),
    ),
    (
        "src/incremental.rs",
        include_str!("../../../policies/sdk/src/incremental.rs"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../policies/sdk/src/lib.rs"),
    ),
    (
        "src/log.rs",
        include_str!("../../../policies/sdk/src/log.rs"),
    ),
    (
        "src/memcmp.rs",
        include_str!("../../../policies/sdk/src/memcmp.rs"),
    ),
    (
        "src/placement.rs",
        include_str!("../../../policies/sdk/src/placement.rs"),
    ),
    (
        "src/progress.rs",
        include_str!("../../../policies/sdk/src/progress.rs"),
    ),
    (
        "src/settings.rs",
        include_str!("../../../policies/sdk/src/settings.rs"),
    ),
    (
        "src/shown.rs",
        include_str!("../../../policies/sdk/src/shown.rs"),
    ),
    (
        "src/spread.rs",
        include_str!("../../../policies/sdk/src/spread.rs"),
    ),
    (
        "src/state.rs",
        include_str!("../../../policies/sdk/src/state.rs"),
    ),
    (
        "src/testing.rs",
        include_str!("../../../policies/sdk/src/testing.rs"),
    ),
    ("wit/policy.wit", include_str!("../../../wit/policy.wit")),
];

/// Where the SDK's `generate!` calls find the WIT in the repository, and in the vendored
/// crate.
const WIT_IN_REPOSITORY: &str = "path: \"../../wit\"";
const WIT_IN_VENDORED: &str = "path: \"wit\"";

/// The workspace's lock file: a new crate starts from the versions the shipped policies
/// are built and tested with (cargo drops what the crate does not use).
pub(crate) const LOCK_FILE: &str = include_str!("../../../Cargo.lock");

/// The vendored SDK's manifest. The dependencies repeat the workspace's
/// (`[workspace.dependencies]` of the repository's Cargo.toml; a test compares them).
fn manifest() -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!(
        "# The switchyard policy SDK and the WIT contract it binds (wit/policy.wit), as built
# into switchyard {version}. Written by `switchyard policy new`; to replace it with the SDK
# of another switchyard binary, run that binary's `switchyard policy sdk --dir {SDK_DIR}`.
[package]
name = \"switchyard-policy-sdk\"
description = \"Guest-side bindings and helpers for switchyard scheduling policies\"
version = \"{version}\"
edition = \"2024\"
license = \"Apache-2.0\"
publish = false

[features]
# Fixture builders (nodes, jobs, snapshots) for the policies' native unit tests.
test-support = []

[dependencies]
wit-bindgen = {{ version = \"0.61\", default-features = false, features = [\"macros\", \"realloc\"] }}
serde = {{ version = \"1\", features = [\"derive\", \"rc\"] }}
serde_json = \"1\"
rustc-hash = \"2\"
"
    )
}

/// The files of the vendored SDK crate, as `(relative path, text)`.
fn files() -> Vec<(String, String)> {
    let mut files = vec![("Cargo.toml".to_string(), manifest())];
    files.extend(SOURCES.iter().map(|(path, text)| {
        (
            path.to_string(),
            text.replace(WIT_IN_REPOSITORY, WIT_IN_VENDORED),
        )
    }));
    files
}

/// Writes the vendored SDK into `dir`: an empty or missing folder, or one holding an
/// earlier vendored SDK (whose files are replaced; a source file this SDK no longer has
/// is removed, so the crate does not compile a stale module). Returns the files written.
pub fn vendor_rust_sdk(dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    ensure_sdk_folder(dir, "Cargo.toml", "name = \"switchyard-policy-sdk\"")?;
    let files = files();
    for stale in files_under(dir, "src")
        .into_iter()
        .filter(|relative| !files.iter().any(|(path, _)| path == relative))
    {
        let path = dir.join(&stale);
        std::fs::remove_file(&path).map_err(|source| ScaffoldError::Write { path, source })?;
    }
    let mut written = Vec::new();
    for (relative, text) in files {
        let path = dir.join(relative);
        write(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}

/// The files under `dir/folder` and its subfolders, as paths relative to `dir` with `/`
/// between their parts (as [`SOURCES`] names them), sorted; none when it cannot be read.
fn files_under(dir: &Path, folder: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join(folder)) else {
        return found;
    };
    for entry in entries.flatten() {
        let relative = format!("{folder}/{}", entry.file_name().to_string_lossy());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(files_under(dir, &relative));
        } else {
            found.push(relative);
        }
    }
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repository() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn every_source_file_of_the_sdk_is_embedded() {
        let on_disk = files_under(&repository().join("policies/sdk"), "src");
        let embedded: Vec<&str> = SOURCES
            .iter()
            .map(|(path, _)| *path)
            .filter(|p| p.starts_with("src/"))
            .collect();
        assert_eq!(on_disk, embedded);
    }

    #[test]
    fn the_vendored_sdk_finds_its_wit_beside_it() {
        let generates = SOURCES
            .iter()
            .map(|(_, text)| text.matches("wit_bindgen::generate!").count())
            .sum::<usize>();
        let files = files();
        let rewritten = files
            .iter()
            .map(|(_, text)| text.matches(WIT_IN_VENDORED).count())
            .sum::<usize>();
        assert!(generates > 0);
        assert_eq!(
            rewritten, generates,
            "every generate! must find wit/ beside it"
        );
        assert!(files.iter().all(|(_, text)| !text.contains("../../wit")));
    }

    #[test]
    fn the_vendored_manifest_asks_for_the_workspaces_dependency_versions() {
        let workspace = std::fs::read_to_string(repository().join("Cargo.toml")).unwrap();
        let sdk = std::fs::read_to_string(repository().join("policies/sdk/Cargo.toml")).unwrap();
        let vendored = manifest();
        // Every dependency of the SDK's own manifest, so a new one cannot be left out.
        let dependencies: Vec<&str> = sdk
            .split("[dependencies]")
            .nth(1)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_suffix(".workspace = true"))
            .collect();
        assert!(dependencies.contains(&"serde"), "{sdk}");
        for dependency in dependencies {
            let line = |text: &str| {
                text.lines()
                    .find(|l| l.starts_with(&format!("{dependency} = ")))
                    .map(str::to_string)
            };
            assert_eq!(line(&vendored), line(&workspace), "{dependency}");
        }
    }

    #[test]
    fn an_update_replaces_an_earlier_sdk_and_drops_its_stale_modules() {
        let dir = tempfile::tempdir().unwrap();
        vendor_rust_sdk(dir.path()).unwrap();
        std::fs::write(dir.path().join("src/gone.rs"), "// from an older SDK").unwrap();
        vendor_rust_sdk(dir.path()).unwrap();
        assert!(!dir.path().join("src/gone.rs").exists());
        assert!(dir.path().join("wit/policy.wit").is_file());
    }

    #[test]
    fn a_folder_that_is_not_an_sdk_is_never_written_into() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let error = vendor_rust_sdk(dir.path()).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotAnSdk { .. }), "{error}");
    }
}
