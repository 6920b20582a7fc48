//! What a policy writes reaches the operator escaped, end to end: the
//! `terminal-escapes` guest puts ESC sequences (a colour, an OSC window title), a
//! carriage return with an erase-line, newlines and a right-to-left override into its
//! summary, its reasons, its labels and its log; a live controller (`switchyard run`)
//! runs it on loopback, and what `ctl policies`, `ctl decisions`, `ctl jobs`, `replay`
//! print and what the controller logs hold none of those characters raw.

use crate::ctl::ctl;
use crate::support;

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The characters that act on a terminal or reorder what it shows.
const RAW: [char; 4] = ['\u{1b}', '\u{7}', '\r', '\u{202e}'];

fn assert_escaped(what: &str, text: &str) {
    assert!(
        !text.contains(RAW),
        "{what} printed a raw control: {text:?}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("round 1 FAILED")),
        "{what} printed a line the policy forged: {text}"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policys_escape_sequences_reach_ctl_replay_and_the_log_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("stream.yaml");
    std::fs::write(&workload, support::STREAM).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{}\n", support::TOKEN)).unwrap();
    let recording = dir.path().join("recording");
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .env("SWITCHYARD_NO_CACHE", "1")
        .env_remove("SWITCHYARD_LOG")
        .args(["run", "--cluster"])
        .arg(format!("sim:{}", workload.display()))
        // A slow call on a loaded machine must not hand the round to the fallback,
        // which writes none of the guest's text.
        .args(["--policy-deadline-ms", "5000"])
        .args(["--listen", "127.0.0.1:0", "--speed", "20", "--token-file"])
        .arg(&token)
        .arg("--record")
        .arg(&recording)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("API on http://") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the controller exited before serving"
        );
    }
    let base = line[line.find("http://").unwrap()..].trim().to_string();
    // The rest of the log, read as it comes so the controller never blocks on the pipe.
    let log = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = stderr.read_to_end(&mut rest);
        String::from_utf8_lossy(&rest).into_owned()
    });

    let with_token = [("SWITCHYARD_TOKEN", support::TOKEN)];
    let guest = support::guest("terminal-escapes");
    let ran = ctl(&base, &with_token, &["upload", &guest]).await;
    assert!(ran.ok, "{}", ran.stderr);
    assert_escaped("ctl upload", &ran.stdout);
    let ran = ctl(&base, &with_token, &["activate", "terminal-escapes"]).await;
    assert!(ran.ok, "{}", ran.stderr);

    let started = Instant::now();
    let decisions = loop {
        let ran = ctl(&base, &[], &["decisions", "--limit", "200"]).await;
        assert!(ran.ok, "{}", ran.stderr);
        if ran.stdout.contains("reason ok") {
            break ran.stdout;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no decision of the guest was shown:\n{}",
            ran.stdout
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_escaped("ctl decisions", &decisions);
    assert!(
        decisions.contains("reason ok\\u{1b}]0;pwned\\u{7}\\u{1b}[31mred\\r\\u{1b}[2Kforged\\nround 1 FAILED\\u{202e}evil"),
        "{decisions}"
    );
    let ran = ctl(&base, &[], &["policies"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    assert_escaped("ctl policies", &ran.stdout);
    assert!(
        ran.stdout.contains("summary ok\\u{1b}]0;pwned\\u{7}"),
        "{}",
        ran.stdout
    );
    let ran = ctl(&base, &[], &["jobs"]).await;
    assert!(ran.ok, "{}", ran.stderr);
    assert_escaped("ctl jobs", &ran.stdout);

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success());
    let log = log.join().unwrap();
    assert!(
        log.contains("log ok"),
        "the guest's log line is logged:\n{log}"
    );
    assert_escaped("the controller's log", &log);

    // Replayed under a policy that decides nothing, every recorded round differs and
    // the report quotes the recorded reasons.
    let null = support::guest("null");
    let output = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .env("SWITCHYARD_NO_CACHE", "1")
        .arg("replay")
        .arg(&recording)
        .args(["--policy", &null, "--show", "1000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_escaped("replay", &stdout);
    assert!(stdout.contains("reason ok\\u{1b}]0;pwned"), "{stdout}");
}
