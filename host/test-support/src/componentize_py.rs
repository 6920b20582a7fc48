//! componentize-py, for the tests that build a Python policy: the tool from
//! `COMPONENTIZE_PY` or the PATH, and a policy built with it. Without the tool a test
//! says it is skipped and returns; CI installs it and sets
//! `SWITCHYARD_REQUIRE_COMPONENTIZE_PY`, and there a missing tool fails the test. It
//! builds; it must not check what it built.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Tool, executable, optional_tool};

/// componentize-py, which CI installs and requires.
pub const COMPONENTIZE_PY: Tool = Tool {
    name: "componentize-py",
    install: "pip install componentize-py==0.25.1, or name it with COMPONENTIZE_PY",
    required_by: "SWITCHYARD_REQUIRE_COMPONENTIZE_PY",
};

/// `componentize-py`, from `COMPONENTIZE_PY` or the PATH, if it runs; `None` once `what`
/// has said it is skipped.
pub fn componentize_py_or_skip(what: &str) -> Option<PathBuf> {
    let found = executable("COMPONENTIZE_PY", "componentize-py").and_then(|tool| {
        let runs = Command::new(&tool).arg("--version").output();
        if runs.is_ok_and(|o| o.status.success()) {
            Ok(tool)
        } else {
            Err(format!("{} does not run", tool.display()))
        }
    });
    optional_tool(COMPONENTIZE_PY, what, found)
}

/// Builds `examples/python-policy` with `tool` into `wasm`. The SDK comes from this
/// checkout's source, so the test checks the SDK as it is here rather than whatever copy
/// a virtual environment holds.
pub fn build_python_example(tool: &Path, wasm: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    build_python_policy(
        tool,
        &repo.join("examples/python-policy"),
        "../../sdk/python/src",
        wasm,
    );
}

/// Builds the Python policy `app` in `project`, with the SDK at `sdk_src` (relative to
/// `project`), into `wasm` (relative to `project` unless absolute). The SDK carries the
/// WIT and its bindings, so no `-d`.
pub fn build_python_policy(tool: &Path, project: &Path, sdk_src: &str, wasm: &Path) {
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
