//! The `switchyard` command's integration tests, one binary: the commands as a user runs
//! them (`commands`, `authoring`, `ctl`, `run`, `sweep`, and `policy_registry` against a
//! registry on loopback), and the checks of the whole repository that run the command or
//! read every crate: the docs' shell blocks and the examples run as written (`docs`,
//! `examples`), the crate floors (`floors`), no import cycle in any crate
//! (`module_cycles`).

use switchyard_test_support as support;

mod authoring;
mod commands;
mod ctl;
mod docs;
mod examples;
mod floors;
mod module_cycles;
mod policy_registry;
mod run;
mod sweep;

/// What `cargo metadata --format-version 1` says of the workspace, with `options`
/// (`--no-deps`, `--locked`): the crate floors and the cycle check read its packages.
fn cargo_metadata(options: &[&str]) -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .args(options)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}
