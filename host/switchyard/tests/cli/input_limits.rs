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
        &["sweep", "--help"],
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

/// `sweep` of the workload at `path` under `default` on one seed, with `more` arguments:
/// its results as JSON.
fn sweep(path: &str, more: &[&str]) -> serde_json::Value {
    let args = [
        &[
            "sweep", path, "--policy", "default", "--seeds", "1", "--json",
        ],
        more,
    ]
    .concat();
    let output = switchyard().args(&args).output().unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_sweep_reads_each_cells_workload_within_the_limits_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("three-jobs.yaml");
    std::fs::write(&path, workload("small")).unwrap();
    let path = path.to_str().unwrap();
    let status = |results: &serde_json::Value| results["cells"][0]["status"].clone();
    assert_eq!(status(&sweep(path, &[])), "done");

    let lowered = sweep(path, &["--max-jobs", "2"]);
    assert_eq!(status(&lowered), "failed", "{lowered}");
    let error = lowered["cells"][0]["error"].as_str().unwrap();
    assert!(
        error.contains(path) && error.contains("give at most 2 jobs"),
        "the cell's error names the file and the limit: {error}"
    );
    assert_eq!(lowered["plan"]["limits"]["jobs"], 2, "{lowered}");

    // A cell run on its own (a pod of `--emit-job`) reads within the same limits.
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let (ok, stderr) = run(&[
        "sweep",
        path,
        "--policy",
        "default",
        "--seeds",
        "1",
        "--max-jobs",
        "2",
        "--cell",
        "0",
        "--out",
        out,
    ]);
    assert!(ok, "{stderr}");
    let cell: serde_json::Value = serde_json::from_slice(
        &std::fs::read(std::path::Path::new(out).join("cells/cell-00000.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cell["result"]["status"], "failed", "{cell}");
}

#[test]
fn the_job_a_sweep_emits_passes_the_limits_it_was_given_to_every_pod() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("three-jobs.yaml");
    std::fs::write(&path, workload("small")).unwrap();
    let path = path.to_str().unwrap();
    let emit = |more: &[&str]| -> Vec<String> {
        let args = [
            &["sweep", path, "--policy", "default", "--seeds", "1..2"][..],
            &["--emit-job", "--results-claim", "sweeps"],
            more,
        ]
        .concat();
        let output = switchyard().args(&args).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let job: serde_json::Value =
            serde_norway::from_str(stdout.split("\n---\n").nth(1).unwrap()).unwrap();
        job["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    assert!(!emit(&[]).iter().any(|a| a.starts_with("--max-")));
    let args = emit(&["--max-jobs", "5", "--max-yaml-bytes", "1MiB"]);
    let window = |pair: [&str; 2]| args.windows(2).any(|w| w == pair);
    assert!(window(["--max-jobs", "5"]), "{args:?}");
    assert!(window(["--max-yaml-bytes", "1048576"]), "{args:?}");
    assert_eq!(
        args.iter().filter(|a| a.starts_with("--max-")).count(),
        2,
        "{args:?}"
    );

    // The workload file itself is read within them too, before the Job is written.
    let output = switchyard()
        .args([
            "sweep",
            path,
            "--policy",
            "default",
            "--emit-job",
            "--results-claim",
            "sweeps",
        ])
        .args(["--max-yaml-bytes", "64"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains(path),
        "{stderr}"
    );
}
