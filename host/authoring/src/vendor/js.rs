//! The JavaScript SDK (`sdk/js`) this binary was built with, embedded in it and written
//! out beside a JavaScript policy (`switchyard policy new --lang js` puts it in the
//! project's `switchyard-sdk/`, `switchyard policy sdk --lang js` updates it). The
//! project then builds with componentize-js from its own folder: the SDK carries the WIT
//! and the build script, so no switchyard checkout is needed.
//!
//! The project's `package.json` and `package-lock.json` are derived from the SDK's
//! ([`js_project_manifest`], [`js_project_lock`]): a new policy installs exactly the
//! componentize-js (and fast-check) the SDK is built and tested with.

use std::path::{Path, PathBuf};

use crate::files::{ScaffoldError, write_language_sdk};

/// The SDK's files, as `(path in the vendored folder, text)`: its modules and type
/// declarations, the build script, the WIT, its README and `package.json` (which makes
/// its modules ES modules). A test checks that this lists every file of `sdk/js/src`.
const SOURCES: &[(&str, &str)] = &[
    (
        "package.json",
        include_str!("../../../../sdk/js/package.json"),
    ),
    ("README.md", include_str!("../../../../sdk/js/README.md")),
    (
        "bin/build.js",
        include_str!("../../../../sdk/js/bin/build.js"),
    ),
    (
        "wit/policy.wit",
        include_str!("../../../../sdk/js/wit/policy.wit"),
    ),
    (
        "src/binding.js",
        include_str!("../../../../sdk/js/src/binding.js"),
    ),
    (
        "src/cluster.js",
        include_str!("../../../../sdk/js/src/cluster.js"),
    ),
    (
        "src/contract.js",
        include_str!("../../../../sdk/js/src/contract.js"),
    ),
    (
        "src/decision.js",
        include_str!("../../../../sdk/js/src/decision.js"),
    ),
    (
        "src/incremental.js",
        include_str!("../../../../sdk/js/src/incremental.js"),
    ),
    (
        "src/index.d.ts",
        include_str!("../../../../sdk/js/src/index.d.ts"),
    ),
    (
        "src/index.js",
        include_str!("../../../../sdk/js/src/index.js"),
    ),
    ("src/log.js", include_str!("../../../../sdk/js/src/log.js")),
    (
        "src/policy.js",
        include_str!("../../../../sdk/js/src/policy.js"),
    ),
    (
        "src/progress.js",
        include_str!("../../../../sdk/js/src/progress.js"),
    ),
    (
        "src/settings.js",
        include_str!("../../../../sdk/js/src/settings.js"),
    ),
    (
        "src/state.js",
        include_str!("../../../../sdk/js/src/state.js"),
    ),
    (
        "src/testing.d.ts",
        include_str!("../../../../sdk/js/src/testing.d.ts"),
    ),
    (
        "src/testing.js",
        include_str!("../../../../sdk/js/src/testing.js"),
    ),
];

/// The SDK's lock file: the exact versions of componentize-js and its dependencies.
const SDK_LOCK: &str = include_str!("../../../../sdk/js/package-lock.json");

/// What marks a folder as a vendored JavaScript SDK.
const MARKER: &str = "\"name\": \"switchyard-policy\"";

/// The `devDependencies` of the SDK's `package.json`, pinned to exact versions.
fn sdk_dev_dependencies() -> serde_json::Value {
    let (_, manifest) = SOURCES
        .iter()
        .find(|(path, _)| *path == "package.json")
        .expect("the SDK's package.json is embedded");
    let manifest: serde_json::Value =
        serde_json::from_str(manifest).expect("the SDK's package.json is JSON");
    manifest["devDependencies"].clone()
}

/// The `package.json` of a new policy `name`: an ES-module project whose `test` and
/// `build` scripts run `node --test` and the SDK's build script, with the SDK's tools as
/// its development dependencies.
pub fn js_project_manifest(name: &str, wasm_path: &str) -> String {
    let manifest = serde_json::json!({
        "name": name,
        "version": "0.1.0",
        "private": true,
        "type": "module",
        "description": format!("{name}, a switchyard scheduling policy in JavaScript"),
        "scripts": {
            "test": "node --test",
            "build": format!("node switchyard-sdk/bin/build.js app.js -o {wasm_path}"),
        },
        "devDependencies": sdk_dev_dependencies(),
    });
    serde_json::to_string_pretty(&manifest).expect("JSON") + "\n"
}

/// The `package-lock.json` of a new policy `name`: the SDK's, with the project as its
/// root package, so `npm ci` installs the versions the SDK was tested with.
pub fn js_project_lock(name: &str) -> String {
    let mut lock: serde_json::Value =
        serde_json::from_str(SDK_LOCK).expect("the SDK's lock is JSON");
    lock["name"] = name.into();
    lock["version"] = "0.1.0".into();
    lock["packages"][""] = serde_json::json!({
        "name": name,
        "version": "0.1.0",
        "devDependencies": sdk_dev_dependencies(),
    });
    serde_json::to_string_pretty(&lock).expect("JSON") + "\n"
}

/// Writes the vendored JavaScript SDK into `dir`: an empty or missing folder, or one
/// holding an earlier vendored SDK (its modules are replaced whole, so no stale module
/// stays). Returns the files written.
pub fn vendor_js_sdk(dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    write_language_sdk(dir, ("package.json", MARKER), "src", SOURCES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdk() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/js")
    }

    #[test]
    fn every_module_of_the_javascript_sdk_is_embedded() {
        let mut on_disk: Vec<String> = std::fs::read_dir(sdk().join("src"))
            .unwrap()
            .map(|e| format!("src/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = SOURCES
            .iter()
            .map(|(path, _)| *path)
            .filter(|p| p.starts_with("src/"))
            .collect();
        assert_eq!(on_disk, embedded);
        assert!(
            SOURCES
                .iter()
                .any(|(path, text)| *path == "package.json" && text.contains(MARKER))
        );
    }

    #[test]
    fn a_new_project_pins_the_tools_the_sdk_is_tested_with() {
        let manifest: serde_json::Value =
            serde_json::from_str(&js_project_manifest("first-fit", "first_fit.wasm")).unwrap();
        let tools = &manifest["devDependencies"];
        let componentize = tools["@bytecodealliance/componentize-js"].as_str().unwrap();
        assert!(
            componentize.chars().all(|c| c.is_ascii_digit() || c == '.'),
            "not an exact version: {componentize}"
        );
        let lock: serde_json::Value = serde_json::from_str(&js_project_lock("first-fit")).unwrap();
        let sdk_lock: serde_json::Value = serde_json::from_str(SDK_LOCK).unwrap();
        assert_eq!(lock["packages"][""]["devDependencies"], *tools);
        assert_eq!(lock["name"], "first-fit");
        let installed = |lock: &serde_json::Value| {
            let mut packages = lock["packages"].as_object().unwrap().clone();
            packages.remove("");
            packages
        };
        assert_eq!(installed(&lock), installed(&sdk_lock));
        assert_eq!(
            lock["packages"]["node_modules/@bytecodealliance/componentize-js"]["version"],
            componentize
        );
    }

    #[test]
    fn an_update_replaces_the_modules_and_refuses_a_folder_that_is_not_an_sdk() {
        let dir = tempfile::tempdir().unwrap();
        vendor_js_sdk(dir.path()).unwrap();
        let stale = dir.path().join("src/gone.js");
        std::fs::write(&stale, "// from an older SDK").unwrap();
        vendor_js_sdk(dir.path()).unwrap();
        assert!(!stale.exists());
        assert!(dir.path().join("wit/policy.wit").is_file());
        assert!(dir.path().join("bin/build.js").is_file());
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("notes.txt"), "mine").unwrap();
        let error = vendor_js_sdk(other.path()).unwrap_err();
        assert!(matches!(error, ScaffoldError::NotAnSdk { .. }), "{error}");
    }
}
