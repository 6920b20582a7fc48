//! Every example opens with the command that runs it (`cargo run --release -- simulate
//! examples/NAME.yaml ...`); this test runs each of those commands, as written, with the
//! built binary from the repository's root, so an example that stops loading or running
//! fails CI. Three kinds are left to the hand, each named below with its reason: the
//! Philly replays (tens of thousands of jobs, minutes in a debug build; their figures in
//! `docs/performance.md` come from release runs), `switchyard run` headers (a controller
//! that runs until stopped) and the Python policy at scale (a component built by hand).

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// Examples whose header command is not run here, and why.
const NOT_RUN: [(&str, &str); 5] = [
    (
        "philly-6214e9.yaml",
        "41,226 jobs: minutes in a debug build",
    ),
    ("philly-all.yaml", "82,247 jobs: minutes in a debug build"),
    (
        "scale-5000-nodes.yaml",
        "a controller (`switchyard run`) that runs until stopped",
    ),
    (
        "scale-10000-nodes.yaml",
        "a controller (`switchyard run`) that runs until stopped",
    ),
    (
        "scale-1000-nodes-python.yaml",
        "5,000 jobs under a Python policy built by hand first (examples/python-policy)",
    ),
];

/// What a header's command starts with; the rest are the binary's arguments.
const CARGO_RUN: &str = "cargo run --release -- ";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The command of a workload's header comment: the first comment line that names the
/// binary, joined with the lines its trailing `\` continues onto. `None` when the header
/// gives no command.
fn header_command(text: &str) -> Option<String> {
    let comments = text
        .lines()
        .map_while(|line| line.strip_prefix('#'))
        .map(str::trim);
    let mut command = String::new();
    let mut inside = false;
    for line in comments {
        if !(inside || line.starts_with("cargo run") || line.starts_with("switchyard ")) {
            continue;
        }
        inside = true;
        match line.strip_suffix('\\') {
            Some(head) => command.push_str(head),
            None => {
                command.push_str(line);
                return Some(command);
            }
        }
    }
    inside.then_some(command)
}

/// The workload examples (`examples/*.yaml`, not the Kubernetes manifests, which
/// `tests/deploy/validate.sh` checks), by file name.
fn workload_examples() -> Vec<(String, String)> {
    let mut examples: Vec<(String, String)> = std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .filter(|(_, text)| !text.lines().any(|line| line.starts_with("apiVersion:")))
        .collect();
    examples.sort();
    examples
}

#[test]
fn every_workload_example_names_the_command_that_runs_it() {
    for (name, text) in workload_examples() {
        let command = header_command(&text)
            .unwrap_or_else(|| panic!("examples/{name}: the header gives no command"));
        assert!(
            command.contains(&format!("examples/{name}")),
            "examples/{name}: the header's command runs another file: {command}"
        );
    }
}

#[test]
fn every_workload_example_runs_with_the_command_its_header_gives() {
    let cache = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for (name, text) in workload_examples() {
        if NOT_RUN.iter().any(|(skipped, _)| *skipped == name) {
            continue;
        }
        let command = header_command(&text).unwrap();
        let arguments = command.strip_prefix(CARGO_RUN).unwrap_or_else(|| {
            panic!("examples/{name}: `{command}` is not `{CARGO_RUN}...`; name it in NOT_RUN with a reason")
        });
        let output = Command::cargo_bin("switchyard")
            .unwrap()
            .current_dir(repo())
            // One compile per policy for the whole test, none left in the user's cache.
            .env("SWITCHYARD_CACHE_DIR", cache.path())
            .args(arguments.split_whitespace())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "examples/{name}: `{command}` failed:\n{stderr}"
        );
        assert!(
            stdout.contains("makespan"),
            "examples/{name}: no results table:\n{stdout}"
        );
        ran += 1;
    }
    assert!(ran >= 15, "only {ran} examples ran");
}

#[test]
fn the_examples_left_to_the_hand_exist_and_say_how_they_are_run() {
    for (name, _) in NOT_RUN {
        let text = std::fs::read_to_string(repo().join("examples").join(name))
            .unwrap_or_else(|e| panic!("examples/{name} is listed as not run but: {e}"));
        assert!(header_command(&text).is_some(), "examples/{name}");
    }
}

#[test]
fn a_header_command_is_read_across_its_continued_lines() {
    let text = "# Run it with:\n#   cargo run --release -- simulate examples/x.yaml --policy a \\\n#       --policy b\nseed: 1\n# cargo run --release -- not this\n";
    assert_eq!(
        header_command(text).as_deref(),
        Some("cargo run --release -- simulate examples/x.yaml --policy a --policy b")
    );
    assert_eq!(header_command("seed: 1\n"), None);
}
