//! `switchyard simulate` with an A/B experiment, and `switchyard run` on the simulator,
//! as processes: what each prints, logs and how it stops.

use serde_json::Value;

use crate::support;

#[test]
fn simulate_with_split_reports_both_arms_and_with_shadow_reports_agreement() {
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    );
    let run = |extra: &[&str]| -> Value {
        let output = assert_cmd::Command::cargo_bin("switchyard")
            .unwrap()
            .env("SWITCHYARD_NO_CACHE", "1")
            .args(["simulate", example])
            .args(extra)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let split = run(&["--split", "default:even:0.5"]);
    let arms = split["experiment"]["split"]["arms"].as_array().unwrap();
    assert_eq!(arms[0]["policy"], "default");
    assert_eq!(arms[1]["policy"], "even");
    let jobs: u64 = arms.iter().map(|a| a["jobs"].as_u64().unwrap()).sum();
    assert_eq!(jobs, 14, "every quickstart job is in exactly one arm");
    for arm in arms {
        assert_eq!(arm["finished"], arm["jobs"], "{arm}");
        assert!(arm["avg_completion"].as_f64().unwrap() > 0.0);
    }
    let shadow = run(&["--policy", "specon", "--shadow", "even"]);
    let report = &shadow["experiment"]["shadow"];
    assert!(report["compared"].as_u64().unwrap() > 0, "{shadow}");
    assert!(report["agreement_rate"].as_f64().unwrap() <= 1.0);
    assert_eq!(shadow["experiment"]["policy_a"], "specon");
}

#[cfg(unix)]
#[test]
fn run_on_the_simulator_logs_plain_text_to_a_pipe_and_shuts_down_gracefully_on_sigterm() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("stream.yaml");
    std::fs::write(&workload, support::STREAM).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .env("SWITCHYARD_NO_CACHE", "1")
        .args(["run", "--cluster"])
        .arg(format!("sim:{}", workload.display()))
        .args(["--listen", "127.0.0.1:0", "--speed", "5"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut logged = String::new();
    while !line.contains("API on http://") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the controller exited before serving"
        );
        logged.push_str(&line);
    }
    assert!(
        logged.contains("INFO") && !logged.contains('\x1b'),
        "logs to a pipe are plain text, without terminal colours:\n{logged}"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM stops the controller gracefully, not by the signal: {status:?}"
    );
}
