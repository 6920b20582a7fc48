//! `switchyard ctl` against a real controller on loopback: the command is run as an
//! operator runs it, with the address and the token from flags or the environment, and
//! what it says is checked against what the controller then does.

use crate::support;

use std::time::Duration;

use support::{STREAM, TOKEN, start_live};

/// What one `switchyard ctl` run printed, and whether it succeeded.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `switchyard ctl ARGS` against `base` with the environment `env` (nothing of the
/// test's own SWITCHYARD_* variables).
async fn ctl(base: &str, env: &[(&str, &str)], args: &[&str]) -> Ran {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.arg("ctl");
    for var in [
        "SWITCHYARD_URL",
        "SWITCHYARD_TOKEN",
        "SWITCHYARD_TOKEN_FILE",
    ] {
        command.env_remove(var);
    }
    command.env("SWITCHYARD_URL", base);
    for (key, value) in env {
        command.env(key, value);
    }
    command.args(args);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    Ran {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

const WITH_TOKEN: &[(&str, &str)] = &[("SWITCHYARD_TOKEN", TOKEN)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_reads_without_the_token_and_changes_the_active_policy_only_with_it() {
    let live = start_live(STREAM, 20.0, Duration::from_millis(500)).await;
    let ran = ctl(&live.base, &[], &["wait-ready", "--timeout", "60"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    let ran = ctl(&live.base, &[], &["status"]).await;
    assert!(
        ran.ok && ran.stdout.contains("active:     default"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    let ran = ctl(&live.base, &[], &["policies"]).await;
    assert!(
        ran.stdout.lines().any(|l| l.starts_with("* default")),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.lines().any(|l| l.starts_with("  even")),
        "{}",
        ran.stdout
    );

    let ran = ctl(&live.base, &[], &["activate", "even"]).await;
    assert!(!ran.ok);
    assert!(
        ran.stderr.contains("401") && ran.stderr.contains("--token-file"),
        "{}",
        ran.stderr
    );
    let (_, list) = live.get("/v1/policies").await;
    assert_eq!(
        list["active"], "default",
        "a refused change changed nothing"
    );

    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), format!("{TOKEN}\n")).unwrap();
    let file = token_file.path().to_str().unwrap();
    let ran = ctl(&live.base, &[], &["--token-file", file, "activate", "even"]).await;
    assert!(
        ran.ok && ran.stdout.starts_with("active: even from round"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    let (_, list) = live.get("/v1/policies").await;
    assert_eq!(list["active"], "even");

    let ran = ctl(
        &live.base,
        &[("SWITCHYARD_TOKEN", "wrong")],
        &["activate", "default"],
    )
    .await;
    assert!(
        !ran.ok && ran.stderr.contains("not the controller's"),
        "{}",
        ran.stderr
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_uploads_sets_parameters_runs_an_experiment_and_lists_decisions() {
    let live = start_live(STREAM, 20.0, Duration::from_millis(500)).await;
    let base = live.base.clone();

    let wasm = support::guest("null");
    let ran = ctl(&base, WITH_TOKEN, &["upload", &wasm]).await;
    assert!(
        ran.ok && ran.stdout.starts_with("loaded "),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    let (_, list) = live.get("/v1/policies").await;
    let uploaded = ran.stdout.split_whitespace().nth(1).unwrap().to_string();
    assert!(
        list["policies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == *uploaded),
        "{list}"
    );

    let ran = ctl(&base, WITH_TOKEN, &["parameters", "specon", "alpha=-3"]).await;
    assert!(!ran.ok && ran.stderr.contains("alpha"), "{}", ran.stderr);
    let ran = ctl(&base, WITH_TOKEN, &["parameters", "specon", "alpha=0.02"]).await;
    assert!(
        ran.ok && ran.stdout.contains("0.02"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );

    let ran = ctl(&base, WITH_TOKEN, &["experiment", "shadow", "even"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    let (status, experiment) = live.get("/v1/experiment").await;
    assert_eq!(status, 200);
    assert_eq!(experiment["policy_b"], "even", "{experiment}");
    let ran = ctl(&base, &[], &["--json", "experiment", "show"]).await;
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["policy_b"], "even");
    let ran = ctl(&base, WITH_TOKEN, &["experiment", "stop"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    let (status, _) = live.get("/v1/experiment").await;
    assert_eq!(status, 404, "the experiment stopped");
    let ran = ctl(&base, WITH_TOKEN, &["experiment", "split", "even"]).await;
    assert!(!ran.ok && ran.stderr.contains("--ratio"), "{}", ran.stderr);

    live.wait_for_rounds_after(3).await;
    let ran = ctl(&base, &[], &["decisions", "--limit", "2"]).await;
    let rounds = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("round "))
        .count();
    assert_eq!(rounds, 2, "{}", ran.stdout);
    live.stop().await;
}

#[tokio::test]
async fn ctl_names_the_address_that_does_not_answer_and_refuses_one_that_is_not_http() {
    // A port nothing listens on: bound, then closed again.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let ran = ctl(&base, &[], &["status"]).await;
    assert!(!ran.ok);
    assert!(
        ran.stderr.contains("no answer from the controller") && ran.stderr.contains(&base),
        "{}",
        ran.stderr
    );
    let ran = ctl("https://example.invalid", &[], &["status"]).await;
    assert!(
        !ran.ok && ran.stderr.contains("plain HTTP"),
        "{}",
        ran.stderr
    );
    let ran = ctl(&base, WITH_TOKEN, &["activate", ".."]).await;
    assert!(
        !ran.ok && ran.stderr.contains("cannot name a policy"),
        "{}",
        ran.stderr
    );
}
