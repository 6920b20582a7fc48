//! The input limits as flags: each command that reads a workload takes the same
//! `--max-*` flags, a raised limit admits what the default refuses and a lowered one
//! refuses what the default admits.

use crate::commands::switchyard;

/// A workload of three one-core jobs whose template name is `name`.
fn workload(name: &str) -> String {
    format!(
        "seed: 1
cluster:
  nodes:
    - {{name: cpu, count: 2, cpus: 8, memory_gib: 32}}
templates:
  {name}: {{work: 20, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none, checkpointable: false}}
jobs:
  - {{template: {name}, count: 3, every: 1}}
"
    )
}

/// Runs `simulate` (or another command reading the workload at `{}`) with `args`:
/// whether it succeeded and what it said on standard error.
fn run(args: &[&str]) -> (bool, String) {
    let output = switchyard().args(args).output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_raised_limit_admits_a_workload_the_default_refuses_in_simulate_and_policy_test() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long-name.yaml");
    // Job ids (the template's name and `-0`) past the default 253 bytes.
    std::fs::write(&path, workload(&"t".repeat(300))).unwrap();
    let path = path.to_str().unwrap();
    for command in [
        &["simulate", path, "--policy", "default"][..],
        &["policy", "test", "default", path],
    ] {
        let (ok, stderr) = run(command);
        assert!(
            !ok && stderr.contains("302 bytes") && stderr.contains("at most 253 bytes"),
            "{command:?}: {stderr}"
        );
        let raised = [command, &["--max-name-bytes", "400"]].concat();
        let (ok, stderr) = run(&raised);
        assert!(ok, "{raised:?}: {stderr}");
    }
}

#[test]
fn a_lowered_limit_refuses_a_workload_the_default_admits_in_simulate_and_policy_test() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("three-jobs.yaml");
    std::fs::write(&path, workload("small")).unwrap();
    let path = path.to_str().unwrap();
    for command in [
        &["simulate", path, "--policy", "default"][..],
        &["policy", "test", "default", path],
    ] {
        let (ok, stderr) = run(command);
        assert!(ok, "{command:?}: {stderr}");
        for (flag, value) in [
            ("--max-jobs", "2"),
            ("--max-nodes", "1"),
            ("--max-yaml-bytes", "64"),
        ] {
            let lowered = [command, &[flag, value]].concat();
            let (ok, stderr) = run(&lowered);
            assert!(!ok, "{lowered:?} ran");
            assert!(stderr.contains(path), "{lowered:?}: {stderr}");
        }
    }
}

#[test]
fn every_command_that_reads_a_workload_lists_the_input_limits_with_their_defaults() {
    for command in [
        &["simulate", "--help"][..],
        &["policy", "test", "--help"],
        &["replay", "--help"],
        &["run", "--cluster", "sim:x.yaml", "--help"],
    ] {
        let output = switchyard().args(command).output().unwrap();
        let help = String::from_utf8_lossy(&output.stdout);
        for flag in [
            "--max-jobs <N>",
            "--max-nodes <N>",
            "--max-tasks <N>",
            "--max-tasks-per-job <N>",
            "--max-replicas <N>",
            "--max-name-bytes <BYTES>",
            "--max-yaml-depth <LEVELS>",
            "--max-yaml-bytes <SIZE>",
            "--max-trace-rows <N>",
            "--max-trace-bytes <SIZE>",
        ] {
            assert!(help.contains(flag), "{command:?} lacks {flag}:\n{help}");
        }
        assert!(help.contains("[default: 1000000]"), "{command:?}:\n{help}");
    }
}
