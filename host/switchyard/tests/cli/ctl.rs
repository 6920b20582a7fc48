//! `switchyard ctl` against a real controller on loopback: the command is run as an
//! operator runs it, with the address and the token from flags or the environment, and
//! what it says is checked against what the controller then does.

use crate::support;

use std::time::Duration;

use support::{STREAM, TOKEN, start_live};

/// What one `switchyard ctl` run printed, and whether it succeeded.
pub(crate) struct Ran {
    pub(crate) ok: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `switchyard ctl ARGS` against `base` with the environment `env` (nothing of the
/// test's own SWITCHYARD_* variables).
pub(crate) async fn ctl(base: &str, env: &[(&str, &str)], args: &[&str]) -> Ran {
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

/// Jobs whose ids carry a right-to-left override (a workload refuses control characters
/// in names; ESC, OSC and CR from a policy are shown escaped end to end in `escaping`).
const HOSTILE_NAMES: &str = "
seed: 1
cluster:
  nodes:
    - {name: cpu, count: 2, cpus: 8, memory_gib: 32}
templates:
  \"evil\\u202e\": {work: 2000, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none, checkpointable: false}
jobs:
  - {template: \"evil\\u202e\", count: 3, every: 1}
";

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
    assert!(rounds <= 2, "{}", ran.stdout);
    live.stop().await;
}

/// The rounds of `ctl decisions` text: each `round N` line with the lines under it.
fn rounds_of(text: &str) -> Vec<(String, Vec<String>)> {
    let mut rounds: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("round ") {
            rounds.push((line.to_string(), Vec::new()));
        } else if let (Some(last), true) = (rounds.last_mut(), line.starts_with("  ")) {
            last.1.push(line.trim().to_string());
        }
    }
    rounds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_shows_a_split_experiment_its_jobs_and_both_arms_decisions_in_text_and_json() {
    let live = start_live(STREAM, 20.0, Duration::from_millis(500)).await;
    let base = live.base.clone();
    let ran = ctl(
        &base,
        WITH_TOKEN,
        &[
            "experiment",
            "split",
            "even",
            "--ratio",
            "0.5",
            "--assign",
            "balanced",
        ],
    )
    .await;
    assert!(
        ran.ok && ran.stdout.starts_with("experiment started"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    assert!(
        ran.stdout
            .contains("B gets 0.5 of the jobs by a balanced hash"),
        "{}",
        ran.stdout
    );
    live.wait_for("/v1/experiment", |r| {
        r["split"]["arms"][1]["jobs"].as_u64().unwrap_or(0) >= 4
    })
    .await;

    // Starting another experiment is refused while this one runs, unless --replace.
    let ran = ctl(&base, WITH_TOKEN, &["experiment", "shadow", "even"]).await;
    assert!(
        !ran.ok && ran.stderr.contains("409") && ran.stderr.contains("--replace"),
        "{}",
        ran.stderr
    );
    assert_eq!(live.get("/v1/experiment").await.1["mode"]["mode"], "split");

    let ran = ctl(&base, &[], &["experiment", "show"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    for expected in [
        "experiment running since t=",
        "restricted mean JCT",
        "Kaplan-Meier",
    ] {
        assert!(ran.stdout.contains(expected), "{expected}: {}", ran.stdout);
    }
    let arm_rows: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("A  ") || l.starts_with("B  "))
        .collect();
    assert_eq!(arm_rows.len(), 2, "{}", ran.stdout);
    assert!(arm_rows[1].contains("even"), "{}", ran.stdout);
    let ran = ctl(&base, &[], &["experiment", "show", "-o", "json"]).await;
    let shown: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(shown["split"]["arms"][1]["policy"], "even");

    // Jobs: an arm column, and even's labels owned by even.
    let ran = ctl(&base, &[], &["jobs"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    let header = ran.stdout.lines().nth(1).unwrap();
    for column in ["job", "phase", "arm", "nodes", "labels", "set by"] {
        assert!(header.contains(column), "{header}");
    }
    let page: serde_json::Value =
        serde_json::from_str(&ctl(&base, &[], &["--json", "jobs"]).await.stdout).unwrap();
    let jobs = page["jobs"].as_array().unwrap();
    assert!(!jobs.is_empty(), "{page}");
    for job in jobs {
        let id = job["id"].as_str().unwrap();
        let row = ran
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id));
        let Some(row) = row else { continue };
        let arm = job["arm"].as_str().unwrap().to_uppercase();
        assert_eq!(row.split_whitespace().nth(2), Some(arm.as_str()), "{row}");
        if job["arm"] == "b" && !job["policy_labels"].as_object().unwrap().is_empty() {
            assert_eq!(job["labels_by"], "even", "{job}");
            assert!(row.ends_with("even"), "{row}");
        }
    }

    // Decisions: arm B's actions, with their tasks and nodes, tagged; only even's with
    // --policy even; only one job's with --job.
    let ran = ctl(&base, &[], &["decisions", "--limit", "200"]).await;
    let rounds = rounds_of(&ran.stdout);
    assert!(!rounds.is_empty(), "{}", ran.stdout);
    // Each arm's component is named once, before the rounds, by version and digest.
    for policy in ["default", "even"] {
        let named: Vec<&str> = ran
            .stdout
            .lines()
            .filter(|l| l.starts_with(&format!("policy {policy} ")))
            .collect();
        assert_eq!(named.len(), 1, "{}", ran.stdout);
        let digest = named[0].split_whitespace().nth(3).unwrap();
        assert!(
            digest.starts_with("sha256:") && digest.len() == 71,
            "{}",
            named[0]
        );
    }
    assert!(
        rounds.iter().all(|(_, lines)| !lines.is_empty()),
        "no round is shown without a line under it: {}",
        ran.stdout
    );
    let b_place = rounds
        .iter()
        .flat_map(|(_, lines)| lines)
        .find(|l| l.starts_with("[B even]") && l.contains(" place "))
        .unwrap_or_else(|| panic!("no placement of arm B: {}", ran.stdout))
        .clone();
    assert!(b_place.contains("main→"), "{b_place}");
    let ran = ctl(
        &base,
        &[],
        &["decisions", "--limit", "200", "--policy", "even"],
    )
    .await;
    let lines: Vec<String> = rounds_of(&ran.stdout)
        .into_iter()
        .flat_map(|r| r.1)
        .collect();
    assert!(!lines.is_empty(), "{}", ran.stdout);
    assert!(
        lines.iter().all(|l| l.starts_with("[B even]")),
        "{}",
        ran.stdout
    );
    let job = b_place.split_whitespace().nth(2).unwrap().to_string();
    let ran = ctl(&base, &[], &["decisions", "--limit", "1000", "--job", &job]).await;
    let lines: Vec<String> = rounds_of(&ran.stdout)
        .into_iter()
        .flat_map(|r| r.1)
        .collect();
    assert!(!lines.is_empty(), "{}", ran.stdout);
    assert!(
        lines
            .iter()
            .all(|l| l.split_whitespace().nth(2) == Some(job.as_str())),
        "{}",
        ran.stdout
    );
    let ran = ctl(
        &base,
        &[],
        &[
            "decisions",
            "--limit",
            "200",
            "--policy",
            "even",
            "-o",
            "json",
        ],
    )
    .await;
    let page: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let records = page["decisions"].as_array().unwrap();
    assert!(!records.is_empty(), "{page}");
    for record in records {
        assert_eq!(record["accepted"].as_array().unwrap().len(), 0, "{record}");
        assert_eq!(record["arm_b"]["policy"], "even");
    }

    // --follow prints rounds that come after it started, as JSON lines with -o json.
    let mut follow = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "ctl",
            "--url",
            &base,
            "decisions",
            "--limit",
            "1",
            "--follow",
            "-o",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follow.stdout.take().unwrap();
    let first_round = tokio::task::spawn_blocking(move || {
        use std::io::BufRead as _;
        let (mut rounds, mut named) = (Vec::new(), Vec::new());
        for line in std::io::BufReader::new(stdout).lines() {
            let record: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
            // A component is named on a line of its own before the first round it decides.
            if let Some(policy) = record.get("policy").filter(|p| p.is_object()) {
                named.push(policy["name"].as_str().unwrap().to_string());
                continue;
            }
            let policy = record["policy"].as_str().unwrap();
            assert!(
                named.iter().any(|n| n == policy),
                "{named:?} before {record}"
            );
            rounds.push(record["round"].as_u64().unwrap());
            if rounds.len() >= 3 {
                break;
            }
        }
        rounds
    });
    let rounds = tokio::time::timeout(Duration::from_secs(60), first_round)
        .await
        .expect("--follow printed three rounds")
        .unwrap();
    follow.kill().unwrap();
    let _ = follow.wait();
    assert!(rounds.windows(2).all(|w| w[0] < w[1]), "{rounds:?}");

    let ran = ctl(&base, WITH_TOKEN, &["experiment", "stop"]).await;
    assert!(
        ran.ok
            && ran
                .stdout
                .starts_with("experiment stopped; its final figures"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_flag_overrides_the_environment_and_an_empty_variable_counts_as_unset() {
    let live = start_live(STREAM, 20.0, Duration::from_millis(500)).await;
    let base = live.base.clone();
    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), format!("{TOKEN}\n")).unwrap();
    let file = token_file.path().to_str().unwrap();

    // A token file in the environment that does not exist: --token wins, unread.
    let env = [("SWITCHYARD_TOKEN_FILE", "/nonexistent/token")];
    let ran = ctl(&base, &env, &["--token", TOKEN, "activate", "even"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    // A wrong token in the environment: --token-file wins.
    let env = [("SWITCHYARD_TOKEN", "wrong")];
    let ran = ctl(&base, &env, &["--token-file", file, "activate", "default"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    // An empty SWITCHYARD_TOKEN is unset: the file variable gives the token.
    let env = [("SWITCHYARD_TOKEN", ""), ("SWITCHYARD_TOKEN_FILE", file)];
    let ran = ctl(&base, &env, &["activate", "even"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    // Both variables set: the token itself wins, as --token over --token-file.
    let env = [
        ("SWITCHYARD_TOKEN", "wrong"),
        ("SWITCHYARD_TOKEN_FILE", file),
    ];
    let ran = ctl(&base, &env, &["activate", "default"]).await;
    assert!(
        !ran.ok && ran.stderr.contains("not the controller's"),
        "{}",
        ran.stderr
    );
    assert_eq!(live.get("/v1/policies").await.1["active"], "even");
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_escapes_what_the_controller_echoes_and_lists_only_its_own_flags() {
    // Job ids made of a template name that reverses the text after it.
    let live = start_live(HOSTILE_NAMES, 20.0, Duration::from_millis(500)).await;
    live.wait_for("/v1/jobs", |page| page["total"].as_u64().unwrap_or(0) > 0)
        .await;
    for args in [&["jobs"][..], &["decisions", "--limit", "50"]] {
        let ran = ctl(&live.base, &[], args).await;
        assert!(ran.ok, "{}", ran.stderr);
        assert!(
            !ran.stdout.contains(['\u{1b}', '\u{7}', '\r', '\u{202e}']),
            "{args:?}: {:?}",
            ran.stdout
        );
        assert!(
            ran.stdout.contains("evil\\u{202e}-0"),
            "{args:?}: {}",
            ran.stdout
        );
    }

    let ran = ctl(&live.base, &[], &["--help"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    for own in [
        "--url",
        "--token-file",
        "--token",
        "--output",
        "--json",
        "jobs",
        "decisions",
    ] {
        assert!(ran.stdout.contains(own), "{own}: {}", ran.stdout);
    }
    for controller_only in [
        "--policy-deadline-ms",
        "--policy-memory-mib",
        "--cache-dir",
        "--no-cache",
    ] {
        assert!(
            !ran.stdout.contains(controller_only),
            "{controller_only}: {}",
            ran.stdout
        );
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_refuses_a_token_file_or_an_upload_that_is_not_a_small_regular_file_without_reading_it()
{
    // Nothing listens here: every refusal comes before a request would be sent.
    let base = "http://127.0.0.1:9";
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    support::make_fifo(&fifo);
    let large_token = dir.path().join("token");
    std::fs::write(&large_token, "t".repeat(5 << 10)).unwrap();
    let large_token = large_token.to_str().unwrap();
    let ran = ctl(
        base,
        &[],
        &["--token-file", large_token, "activate", "even"],
    )
    .await;
    assert!(
        !ran.ok && ran.stderr.contains(large_token) && ran.stderr.contains("limit of 4096 bytes"),
        "{}",
        ran.stderr
    );
    for file in ["/dev/zero", fifo.to_str().unwrap()] {
        let env = [("SWITCHYARD_TOKEN_FILE", file)];
        let ran = ctl(base, &env, &["activate", "even"]).await;
        assert!(
            !ran.ok && ran.stderr.contains(file) && ran.stderr.contains("not a regular file"),
            "{file}: {}",
            ran.stderr
        );
        let ran = ctl(base, WITH_TOKEN, &["upload", file]).await;
        assert!(
            !ran.ok && ran.stderr.contains(file) && ran.stderr.contains("not a regular file"),
            "{file}: {}",
            ran.stderr
        );
    }
    // A sparse file past the limit is refused by its size, before it is read.
    let large = dir.path().join("large.wasm");
    std::fs::File::create(&large)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    let large = large.to_str().unwrap();
    let ran = ctl(
        base,
        WITH_TOKEN,
        &["upload", large, "--max-upload-mib", "1"],
    )
    .await;
    assert!(
        !ran.ok
            && ran.stderr.contains(large)
            && ran.stderr.contains("--max-upload-mib")
            && ran
                .stderr
                .contains("larger than the limit of 1048576 bytes"),
        "{}",
        ran.stderr
    );
}
