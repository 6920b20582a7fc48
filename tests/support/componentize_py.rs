//! componentize-py, for the tests that build the Python example policy: the tool from
//! `COMPONENTIZE_PY` or the PATH, and the example built with this checkout's Python SDK.
//! Without the tool a test says it is skipped and returns; CI installs it and sets
//! `SWITCHYARD_REQUIRE_COMPONENTIZE_PY`, and there a missing tool fails the test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `componentize-py`, from `COMPONENTIZE_PY` or the PATH.
fn find() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("COMPONENTIZE_PY") {
        return Some(PathBuf::from(path));
    }
    let found = Command::new("componentize-py").arg("--version").output();
    found
        .is_ok_and(|o| o.status.success())
        .then(|| PathBuf::from("componentize-py"))
}

/// The tool, or `None` once the test has said it is skipped.
pub(crate) fn tool_or_skip() -> Option<PathBuf> {
    let tool = find();
    if tool.is_none() {
        assert!(
            std::env::var_os("SWITCHYARD_REQUIRE_COMPONENTIZE_PY").is_none(),
            "componentize-py is required here but was not found (set COMPONENTIZE_PY)"
        );
        eprintln!("SKIPPED: componentize-py not installed (pip install componentize-py==0.25.1)");
    }
    tool
}

/// Builds `examples/python-policy` with `tool` into `wasm`. The SDK comes from this
/// checkout's source, so the test checks the SDK as it is here rather than whatever copy
/// a virtual environment holds.
pub(crate) fn build_example(tool: &Path, wasm: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    build(
        tool,
        &repo.join("examples/python-policy"),
        "../../sdk/python/src",
        wasm,
    );
}

/// Builds the Python policy `app` in `project`, with the SDK at `sdk_src` (relative to
/// `project`), into `wasm` (relative to `project` unless absolute). The SDK carries the
/// WIT and its bindings, so no `-d`.
pub(crate) fn build(tool: &Path, project: &Path, sdk_src: &str, wasm: &Path) {
    let status = Command::new(tool)
        .current_dir(project)
        .env_remove("VIRTUAL_ENV")
        .args([
            "-w",
            "switchyard:policy/incremental-policy@0.3.0",
            "componentize",
            "-p",
            ".",
            "-p",
            sdk_src,
            "app",
            "-o",
        ])
        .arg(wasm)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "componentize-py failed on {}",
        project.display()
    );
}
