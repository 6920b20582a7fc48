//! The documentation's walkthroughs, run as written: every shell block of `README.md` and
//! `docs/*.md` whose fence says ```` ```sh docs-test ```` is run, the blocks of one file in
//! order by one `bash -euo pipefail` (a `cd` in one block holds for the next, as for a
//! reader), in a fresh temporary directory that holds the repository's `examples/` and
//! `data/`. What differs from a reader's shell is said here and nowhere else:
//!
//! - the `switchyard` built for this test is first on `PATH`, and `cargo run [--release]
//!   --` is read as `switchyard` (the same binary, without a second build);
//! - `/tmp/` means the temporary directory, so runs never meet;
//! - each loopback port a walkthrough names (`127.0.0.1:18080`) is a port the system
//!   gave this run when it bound port 0, the same one wherever that port is named, so
//!   two runs on one machine never ask for the same port;
//! - processes a block starts in the background are stopped when the file is done.
//!
//! `SWITCHYARD_DOCS_ONLY=README.md` runs the walkthroughs of the documents whose path
//! contains that text only (while writing one).
//!
//! A shell block a reader cannot run here (it needs a Kubernetes cluster, a browser, or
//! hours) says ```` ```sh docs-skip ````; a test fails on a shell block that says
//! neither, so a new walkthrough is tested unless someone decides it cannot be.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a shell block's fence says about running it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Test,
    Skip,
    Unmarked,
}

/// A shell block: where it starts (the fence's line, 1-based), its mark and its text.
#[derive(Debug)]
struct Block {
    line: usize,
    mark: Mark,
    text: String,
}

/// The shell blocks of a Markdown text (fences whose info string starts with `sh`,
/// `bash` or `shell`). A fence closes on a line of backticks alone, as in CommonMark.
fn shell_blocks(markdown: &str) -> Vec<Block> {
    enum Open {
        None,
        Other,
        Shell(Block),
    }
    let mut blocks = Vec::new();
    let mut open = Open::None;
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim();
        let closing = trimmed.starts_with("```") && trimmed.trim_matches('`').is_empty();
        open = match (open, trimmed.strip_prefix("```")) {
            (Open::Shell(block), _) if closing => {
                blocks.push(block);
                Open::None
            }
            (Open::Other, _) if closing => Open::None,
            (Open::Shell(mut block), _) => {
                block.text.push_str(line);
                block.text.push('\n');
                Open::Shell(block)
            }
            (Open::Other, _) => Open::Other,
            (Open::None, Some(info)) => {
                let mut words = info.split_whitespace();
                if matches!(words.next(), Some("sh" | "bash" | "shell")) {
                    let rest: Vec<&str> = words.collect();
                    let mark = if rest.contains(&"docs-test") {
                        Mark::Test
                    } else if rest.contains(&"docs-skip") {
                        Mark::Skip
                    } else {
                        Mark::Unmarked
                    };
                    Open::Shell(Block {
                        line: i + 1,
                        mark,
                        text: String::new(),
                    })
                } else {
                    Open::Other
                }
            }
            (Open::None, None) => Open::None,
        };
    }
    blocks
}

/// The Markdown files whose walkthroughs are tested.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The loopback address a walkthrough names.
const LOOPBACK: &str = "127.0.0.1:";

/// The loopback ports `text` names (`127.0.0.1:PORT`), each once, in order.
fn loopback_ports(text: &str) -> Vec<String> {
    let mut ports: Vec<String> = Vec::new();
    for (at, _) in text.match_indices(LOOPBACK) {
        let port: String = text[at + LOOPBACK.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if !port.is_empty() && !ports.contains(&port) {
            ports.push(port);
        }
    }
    ports
}

/// `text` with each loopback port named in it replaced by one the system gives now
/// (bound at port 0 and read back; all bound at once, so no two are the same), in one
/// pass, so a port given cannot be taken for one named.
fn with_free_ports(text: &str) -> String {
    let ports = loopback_ports(text);
    let listeners: Vec<std::net::TcpListener> = ports
        .iter()
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let free: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(LOOPBACK) {
        let digits_at = at + LOOPBACK.len();
        let digits = rest[digits_at..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - digits_at);
        let port = &rest[digits_at..digits_at + digits];
        out.push_str(&rest[..digits_at]);
        match ports.iter().position(|p| p == port) {
            Some(i) => out.push_str(&free[i].to_string()),
            None => out.push_str(port),
        }
        rest = &rest[digits_at + digits..];
    }
    out.push_str(rest);
    out
}

/// The script that runs `blocks` of `name` in `work` as the module comment says.
fn script(name: &str, blocks: &[&Block], work: &Path) -> String {
    let mut out = String::from(
        "set -euo pipefail\n\
         trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT\n",
    );
    let tmp = format!("{}/", work.display());
    for block in blocks {
        out.push_str(&format!("echo '+++ {name}:{}' >&2\n", block.line));
        let text = block
            .text
            .replace("cargo run --release -- ", "switchyard ")
            .replace("cargo run -- ", "switchyard ")
            .replace("/tmp/", &tmp);
        out.push_str(&text);
    }
    with_free_ports(&out)
}

/// How a document's walkthrough went.
struct Outcome {
    success: bool,
    output: String,
}

/// Runs `blocks` of the document `name` in a fresh temporary directory.
fn run_blocks(name: &str, blocks: &[&Block]) -> Outcome {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    for shared in ["examples", "data"] {
        std::os::unix::fs::symlink(repo().join(shared), work.join(shared)).unwrap();
    }
    let bin = work.join(".bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_switchyard"), bin.join("switchyard")).unwrap();
    let script_file = work.join(".walkthrough.sh");
    std::fs::write(&script_file, script(name, blocks, work)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("bash");
    command
        .arg(&script_file)
        .current_dir(work)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The outer build's settings are not a reader's.
    let controller = [
        "SWITCHYARD_URL",
        "SWITCHYARD_TOKEN",
        "SWITCHYARD_TOKEN_FILE",
    ];
    for var in support::OUTER_BUILD_VARS.iter().chain(&controller) {
        command.env_remove(var);
    }
    let mut child = command.spawn().unwrap();
    // Drain both pipes while waiting, so a chatty walkthrough cannot block on a full pipe.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    // A walkthrough that hangs (a controller that never answers) is a failure, not a
    // stuck CI run.
    let deadline = Instant::now() + Duration::from_secs(900);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = format!(
        "--- stdout\n{}\n--- stderr\n{}",
        stdout.join().unwrap(),
        stderr.join().unwrap()
    );
    Outcome {
        success: status.is_some_and(|s| s.success()),
        output: if status.is_none() {
            format!("{name}: still running after 15 minutes\n{output}")
        } else {
            output
        },
    }
}

#[test]
fn every_shell_block_of_the_docs_is_tested_or_says_why_not() {
    let mut unmarked = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        for block in shell_blocks(&text) {
            if block.mark == Mark::Unmarked {
                unmarked.push(format!("{}:{}", file.display(), block.line));
            }
        }
    }
    assert!(
        unmarked.is_empty(),
        "shell blocks without `docs-test` or `docs-skip` after ```sh: {unmarked:#?}"
    );
}

#[test]
fn the_walkthroughs_of_the_readme_and_the_docs_run_as_written() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        let blocks = shell_blocks(&text);
        let tested: Vec<&Block> = blocks.iter().filter(|b| b.mark == Mark::Test).collect();
        if tested.is_empty() {
            continue;
        }
        let name = file
            .strip_prefix(repo())
            .unwrap_or(&file)
            .display()
            .to_string();
        if std::env::var("SWITCHYARD_DOCS_ONLY").is_ok_and(|only| !name.contains(&only)) {
            continue;
        }
        let started = Instant::now();
        let outcome = run_blocks(&name, &tested);
        eprintln!(
            "{name}: {} blocks in {:.0} s",
            tested.len(),
            started.elapsed().as_secs_f64()
        );
        ran += tested.len();
        if !outcome.success {
            failures.push(format!("{name}:\n{}", outcome.output));
        }
    }
    assert!(ran > 0, "no block is marked docs-test");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_documented_command_that_breaks_fails_the_walkthrough_and_names_its_block() {
    let markdown = "\
Run this:

```sh docs-test
switchyard policy list > /dev/null
```

Then this, which names a workload that is not there:

```sh docs-test
cargo run --release -- simulate examples/no-such-workload.yaml
echo never reached
```
";
    let blocks = shell_blocks(markdown);
    let outcome = run_blocks("broken.md", &blocks.iter().collect::<Vec<_>>());
    assert!(!outcome.success, "{}", outcome.output);
    assert!(
        outcome.output.contains("+++ broken.md:9"),
        "{}",
        outcome.output
    );
    assert!(
        outcome.output.contains("no-such-workload.yaml"),
        "{}",
        outcome.output
    );
    assert!(
        !outcome.output.contains("never reached"),
        "{}",
        outcome.output
    );
}

#[test]
fn fences_of_other_languages_and_their_contents_are_not_shell_blocks() {
    let markdown = "```yaml\n```sh docs-test\n```\n```sh docs-skip\nkubectl apply\n```\n";
    let blocks = shell_blocks(markdown);
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    assert_eq!(blocks[0].mark, Mark::Skip);
    assert_eq!(blocks[0].line, 4);
}

#[test]
fn a_walkthrough_runs_while_another_process_holds_the_port_it_names() {
    // Another run's controller, as far as this walkthrough can tell.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let markdown = format!(
        "```sh docs-test
cargo run -- run --cluster sim:examples/quickstart.yaml --speed 500 --listen 127.0.0.1:{port} &
export SWITCHYARD_URL=http://127.0.0.1:{port}/
cargo run -- ctl wait-ready --timeout 60
```
"
    );
    let blocks = shell_blocks(&markdown);
    let outcome = run_blocks("ports.md", &blocks.iter().collect::<Vec<_>>());
    assert!(outcome.success, "{}", outcome.output);
    drop(taken);
}

#[test]
fn every_loopback_port_a_walkthrough_names_becomes_one_free_port_wherever_it_is_named() {
    let text = "--listen 127.0.0.1:18080 & URL=http://127.0.0.1:18080/ \
                other=127.0.0.1:18095 longer=127.0.0.1:180801";
    assert_eq!(loopback_ports(text), ["18080", "18095", "180801"]);
    let replaced = with_free_ports(text);
    let ports = loopback_ports(&replaced);
    assert_eq!(ports.len(), 3, "{replaced}");
    assert!(
        !ports.iter().any(|p| p == "18080" || p == "18095"),
        "{replaced}"
    );
    assert_eq!(
        replaced.matches(&format!("127.0.0.1:{}", ports[0])).count(),
        2,
        "{replaced}"
    );
}
