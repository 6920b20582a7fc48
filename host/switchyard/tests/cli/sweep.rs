//! `switchyard sweep` and the offline experiments as a user runs them: a sweep's cells
//! are the runs `simulate` makes, cells run one by one and merged give the local sweep's
//! table, a failing cell leaves the others, the Job manifest has a pod per cell, and
//! files are written before anything is printed.

use std::io::Read as _;
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::commands::{stdout_of, switchyard};

const QUICKSTART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/quickstart.yaml"
);

fn json_file(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `sweep` of the quickstart under `policies` (one `--policy` each) over `seeds`: the
/// arguments each test adds its own to.
fn sweep_of<'a>(policies: &[&'a str], seeds: &'a str) -> Vec<&'a str> {
    let mut args = vec!["sweep", QUICKSTART];
    for policy in policies {
        args.extend(["--policy", policy]);
    }
    args.extend(["--seeds", seeds]);
    args
}

/// `results.json` of a sweep without the cells' wall-clock seconds, which differ from
/// run to run.
fn without_seconds(mut results: Value) -> Value {
    for cell in results["cells"].as_array_mut().unwrap() {
        cell.as_object_mut().unwrap().remove("seconds");
    }
    results
}

#[test]
fn a_sweep_of_2_policies_and_5_seeds_gives_the_cells_of_10_single_simulate_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let mut args = sweep_of(&["default", "even"], "1..5");
    args.extend(["--jobs", "2", "--out", out.to_str().unwrap()]);
    let table = stdout_of(&args);
    assert!(table.contains("mean JCT vs default"), "{table}");
    assert!(out.join("sweep.png").is_file() && out.join("sweep.svg").is_file());
    let results = json_file(&out.join("results.json"));
    let cells = results["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 10);
    for cell in cells {
        let (policy, seed) = (
            cell["run"].as_str().unwrap(),
            cell["seed"].as_u64().unwrap(),
        );
        let single = dir.path().join(format!("{policy}-{seed}"));
        stdout_of(&[
            "simulate",
            QUICKSTART,
            "--policy",
            policy,
            "--seed",
            &seed.to_string(),
            "--out",
            single.to_str().unwrap(),
        ]);
        let simulated = json_file(&single.join("results.json"));
        assert_eq!(cell["status"], "done", "{cell}");
        assert_eq!(
            cell["summary"], simulated["runs"][0]["summary"],
            "{policy} on seed {seed}"
        );
    }
    // The rows are the cells' means: default's mean JCT over its five seeds.
    let mean: f64 = cells
        .iter()
        .filter(|c| c["run"] == "default")
        .map(|c| c["summary"]["avg_completion"].as_f64().unwrap())
        .sum::<f64>()
        / 5.0;
    let row = &results["rows"][0];
    assert_eq!(row["run"], "default");
    assert!((row["mean_completion"]["value"].as_f64().unwrap() - mean).abs() < 1e-9);
    assert!(row["against_baseline"].is_null());
    assert_eq!(results["rows"][1]["against_baseline"]["seeds"], 5);
}

#[test]
fn sweep_merge_of_cells_run_one_by_one_equals_the_local_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = sweep_of(&["default", "even"], "3,4");
    args.extend(["--baseline", "even"]);
    let local = dir.path().join("local");
    let mut local_args = args.to_vec();
    local_args.extend(["--out", local.to_str().unwrap()]);
    let local_table = stdout_of(&local_args);

    let cells = dir.path().join("cells");
    // In reverse order, as pods of a Job finish in any order.
    for index in (0..4).rev() {
        let index = index.to_string();
        let mut cell_args = args.to_vec();
        cell_args.extend(["--cell", &index, "--out", cells.to_str().unwrap()]);
        stdout_of(&cell_args);
    }
    assert!(cells.join("cells").join("cell-00003.json").is_file());
    let merged_table = stdout_of(&["sweep", "merge", cells.to_str().unwrap()]);

    let table_of = |text: &str| text.split("\n\nwrote to").next().unwrap().to_string();
    assert_eq!(table_of(&merged_table), table_of(&local_table));
    assert_eq!(
        without_seconds(json_file(&cells.join("results.json"))),
        without_seconds(json_file(&local.join("results.json")))
    );
}

#[test]
fn a_failing_cell_is_reported_and_the_other_cells_go_on() {
    let mut args = sweep_of(&["even", "specon"], "1..2");
    args.extend(["--set", "specon.alpha=0.02,fast", "--json"]);
    let output = switchyard().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Value = serde_json::from_slice(&output.stdout).unwrap();
    let status = |run: &str| -> Vec<String> {
        results["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["run"] == run)
            .map(|c| c["status"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(status("even"), ["done", "done"]);
    assert_eq!(status("specon(alpha=0.02)"), ["done", "done"]);
    assert_eq!(status("specon(alpha=fast)"), ["failed", "failed"]);
    let failed = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["status"] == "failed")
        .unwrap();
    let error = failed["error"].as_str().unwrap();
    assert!(error.contains("alpha"), "{error}");
    let row = results["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == "specon(alpha=fast)")
        .unwrap();
    assert_eq!(
        (row["done"].as_u64(), row["failed"].as_u64()),
        (Some(0), Some(2))
    );
}

#[test]
fn emit_job_writes_an_indexed_job_with_a_completion_per_cell_and_the_workloads() {
    let mut args = sweep_of(&["default", "specon"], "1..20");
    args.extend([
        "--set",
        "specon.alpha=0.01,0.02",
        "--emit-job",
        "--results-claim",
        "sweeps",
    ]);
    let manifest = stdout_of(&args);
    let documents: Vec<Value> = manifest
        .split("\n---\n")
        .map(|d| serde_norway::from_str(d).unwrap())
        .collect();
    let [config_map, job] = &documents[..] else {
        panic!("expected a ConfigMap and a Job:\n{manifest}");
    };
    assert_eq!(config_map["kind"], "ConfigMap");
    let workload = config_map["data"]["quickstart.yaml"].as_str().unwrap();
    assert_eq!(workload, std::fs::read_to_string(QUICKSTART).unwrap());
    assert_eq!(
        (job["apiVersion"].as_str(), job["kind"].as_str()),
        (Some("batch/v1"), Some("Job"))
    );
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    // 3 runs (default, specon at two alphas) x 20 seeds.
    assert_eq!(spec["completions"], 60);
    let pod = &spec["template"]["spec"];
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let window = |pair: [&str; 2]| args.windows(2).any(|w| w == pair);
    assert!(window(["--cell", "$(JOB_COMPLETION_INDEX)"]), "{args:?}");
    assert!(window(["--seeds", "1..20"]), "{args:?}");
    assert!(args.contains(&"/workloads/quickstart.yaml"), "{args:?}");
    assert_eq!(
        pod["volumes"][1]["persistentVolumeClaim"]["claimName"],
        "sweeps"
    );
}

#[test]
fn an_offline_split_prints_a_table_with_intervals_and_a_balanced_split_is_10_and_10() {
    let dir = tempfile::tempdir().unwrap();
    let workload = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/specon-random-20.yaml"
    );
    let out = stdout_of(&[
        "simulate",
        workload,
        "--split",
        "even:specon:0.5",
        "--split-assign",
        "balanced",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.contains("restricted mean JCT"), "{out}");
    assert!(out.contains("B - A, restricted mean up to"), "{out}");
    assert!(out.contains("arms: 10 of 20 jobs went to B"), "{out}");
    assert!(!out.trim_start().starts_with('{'), "{out}");
    let report = json_file(&dir.path().join("experiment.json"));
    let imbalance = &report["experiment"]["split"]["imbalance"];
    assert_eq!(
        (imbalance["jobs"].as_u64(), imbalance["jobs_b"].as_u64()),
        (Some(20), Some(10))
    );
    let arms = report["experiment"]["split"]["arms"].as_array().unwrap();
    assert_eq!(arms[0]["completion"]["jobs"], 10);
    assert_eq!(arms[1]["completion"]["jobs"], 10);
}

/// Runs the command with its standard output read up to the first line and then
/// closed, as `| head -1` does.
fn first_line_then_closed(args: &[&str]) -> String {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("switchyard"))
        .env("SWITCHYARD_NO_CACHE", "1")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = Vec::new();
    let mut byte = [0u8];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        first.push(byte[0]);
    }
    drop(stdout);
    child.wait().unwrap();
    String::from_utf8(first).unwrap()
}

#[test]
fn files_are_written_before_the_table_so_a_reader_that_stops_early_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let simulate = dir.path().join("simulate");
    let line = first_line_then_closed(&[
        "simulate",
        QUICKSTART,
        "--policy",
        "default",
        "--out",
        simulate.to_str().unwrap(),
    ]);
    assert!(line.starts_with("policy"), "{line}");
    for file in ["results.json", "utilisation.png", "decisions-default.jsonl"] {
        assert!(simulate.join(file).is_file(), "{file} missing");
    }
    let split = dir.path().join("split");
    first_line_then_closed(&[
        "simulate",
        QUICKSTART,
        "--shadow",
        "even",
        "--out",
        split.to_str().unwrap(),
    ]);
    assert!(split.join("experiment.json").is_file());
}

#[test]
fn the_end_of_run_message_names_each_decision_trace() {
    let dir = tempfile::tempdir().unwrap();
    let out = stdout_of(&[
        "simulate",
        QUICKSTART,
        "--policy",
        "default",
        "--policy",
        "local=even",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let message = out.lines().find(|l| l.starts_with("wrote to")).unwrap();
    assert!(
        message.contains("decisions-default.jsonl, decisions-local.jsonl"),
        "{message}"
    );
    assert!(!message.contains("NAME"), "{message}");
}
