//! The shipped policies decide as their golden decision traces in `tests/golden/`
//! record, through the harness `switchyard policy test --golden` uses, and are the very
//! components that made them (the digest in each trace's header). A binary of its own:
//! it moves the process into the repository's root, where the workloads' relative paths
//! (and the traces' headers, which name them) resolve.

use std::path::{Path, PathBuf};

use switchyard_authoring::{TestSpec, component_change, diff_trace, render_trace, run_policy_test};
use switchyard_control::PolicySlot;
use switchyard_core::{DisruptionBudget, Settings};
use switchyard_runtime::{PolicyRef, Runtime, RuntimeOptions};
use switchyard_sim::InputLimits;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The trace of a shipped policy on one of the paper workloads, as `policy test
/// --golden` renders it.
fn trace_of(policy: &str, workload: &str) -> String {
    let runtime = Runtime::new(RuntimeOptions::default()).unwrap();
    let fallback = PolicySlot::configure(
        PolicyRef::parse("default").unwrap().load(&runtime).unwrap(),
        &Settings::new(),
    )
    .unwrap();
    let settings = Settings::new();
    let spec = TestSpec {
        policy,
        settings: &settings,
        against: None,
        input: Path::new(workload),
        seed: None,
        save_snapshots: None,
        // The default budget, as `policy test` runs: it leaves the shipped policies'
        // decisions as they are (`host/sim/tests/sim/disruptions.rs`).
        disruption: DisruptionBudget::default(),
        limits: InputLimits::default(),
    };
    let run = run_policy_test(&runtime, &spec, &fallback).unwrap();
    render_trace(&run.header, &run.records)
}

/// Compares a shipped policy's trace with its golden file in tests/golden/.
fn assert_matches_golden(policy: &str, workload: &str) {
    let golden = repo().join(format!("tests/golden/{policy}.trace"));
    std::env::set_current_dir(repo()).unwrap();
    let actual = trace_of(policy, workload);
    let expected = std::fs::read_to_string(&golden).unwrap_or_default();
    let bless = format!(
        "cargo run -- policy test {policy} {workload} --golden tests/golden/{policy}.trace --bless"
    );
    if let Some(diff) = diff_trace(&expected, &actual) {
        panic!(
            "{policy} no longer decides as tests/golden/{policy}.trace records.\n\
             If the change is intended, regenerate the file and commit it with the change:\n  \
             {bless}\n\n{diff}"
        );
    }
    // The shipped policies build to the same bytes wherever they are built (the build
    // script maps this machine's paths away), so other bytes mean other sources, other
    // dependencies or another toolchain, even when they decide alike.
    if let Some((before, now)) = component_change(&expected, &actual) {
        panic!(
            "tests/golden/{policy}.trace was made by component {before}; this build's is {now}: \
             the policy, the SDK, a dependency or the toolchain changed, though its decisions \
             did not.\nRegenerate the file and commit it with the change:\n  {bless}"
        );
    }
}

#[test]
fn specon_decides_as_its_golden_trace_records() {
    assert_matches_golden("specon", "examples/specon-random-20.yaml");
}

#[test]
fn flowcon_decides_as_its_golden_trace_records() {
    assert_matches_golden("flowcon", "examples/flowcon-three-jobs.yaml");
}

#[test]
fn dragon_decides_as_its_golden_trace_records() {
    assert_matches_golden("dragon", "examples/dragon-table1.yaml");
}

#[test]
fn gang_decides_as_its_golden_trace_records() {
    assert_matches_golden("gang", "examples/gang-three-ps-jobs.yaml");
}
