//! The policy author's commands as an author uses them: `policy test` with
//! expectations, goldens and comparisons, `policy new` producing a crate whose `cargo
//! build` yields a valid component, and policies written in Python and JavaScript
//! running beside the Rust ones. (The shipped policies' golden traces are checked by
//! `switchyard-authoring`'s own tests.)

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use assert_cmd::Command;

use crate::support;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The CLI, with a policy call deadline long enough that a loaded machine does not
/// turn `policy validate`'s or `inspect`'s calls into timeouts: these tests check what
/// the examples do, not how fast.
fn switchyard() -> Command {
    let mut cmd = Command::cargo_bin("switchyard").unwrap();
    cmd.current_dir(repo())
        .env("SWITCHYARD_NO_CACHE", "1")
        .args(["--policy-deadline-ms", "60000"]);
    cmd
}

/// Runs `args`, returning (success, stdout + stderr).
fn run(args: &[&str]) -> (bool, String) {
    let output = switchyard().args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// What every least-loaded example goes through, whatever its language: `policy
/// validate` and `inspect` (the incremental world), a `simulate` beside SpeCon in which
/// both finish every job without a failed round, and `policy test` against `expect`
/// (its result returned). `cache` is the compile cache the commands share.
fn checked_like_a_rust_policy(wasm: &str, cache: &str, expect: &str) -> (bool, String) {
    let (ok, out) = run(&["--cache-dir", cache, "policy", "validate", wasm]);
    assert!(ok && out.contains("least-loaded 0.3.0"), "{out}");
    let (ok, out) = run(&["--cache-dir", cache, "policy", "inspect", wasm]);
    assert!(
        ok && out.contains("incremental"),
        "not the incremental world:\n{out}"
    );
    let (ok, out) = run(&[
        "--cache-dir",
        cache,
        "simulate",
        "examples/quickstart.yaml",
        "--policy",
        wasm,
        "--policy",
        "specon",
    ]);
    assert!(ok, "{out}");
    // Rows are named by the policy's own name, not the file's path.
    for policy in ["least-loaded", "specon"] {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("{policy} ")))
            .unwrap_or_else(|| panic!("no row for {policy}:\n{out}"));
        // jobs done, no round in which the policy failed (`fails`), and the run ended
        // with every job done (`end`)
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields[1], fields[2], "not every job finished: {row}");
        assert_eq!(
            fields[fields.len() - 2],
            "0",
            "the policy failed rounds: {row}"
        );
        assert_eq!(
            fields.last(),
            Some(&"done"),
            "the run did not end done: {row}"
        );
    }
    run(&[
        "--cache-dir",
        cache,
        "policy",
        "test",
        wasm,
        "examples/quickstart.yaml",
        "--expect",
        expect,
    ])
}

/// A new `first-fit` project built in `project` (its `first_fit.wasm`): it validates,
/// and passes the expectations its scaffold wrote (`policy-tests/`). `cache` is the
/// compile cache the two commands share.
fn new_project_passes_its_expectations(project: &Path, cache: &Path) {
    let wasm = project.join("first_fit.wasm");
    let wasm = wasm.to_str().unwrap();
    let cache = cache.to_str().unwrap();
    let (ok, out) = run(&["--cache-dir", cache, "policy", "validate", wasm]);
    assert!(ok && out.contains("first-fit 0.1.0"), "{out}");
    let workload = project.join("policy-tests/workload.yaml");
    let expect = project.join("policy-tests/expect.yaml");
    let (ok, out) = run(&[
        "--cache-dir",
        cache,
        "policy",
        "test",
        wasm,
        workload.to_str().unwrap(),
        "--expect",
        expect.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("6 of 6 expectations held"), "{out}");
}

#[test]
fn policy_test_fails_with_a_diff_when_the_trace_changes_and_bless_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("specon.trace");
    let golden = golden.to_str().unwrap();
    let base = [
        "policy",
        "test",
        "specon",
        "examples/quickstart.yaml",
        "--golden",
        golden,
    ];
    let (ok, out) = run(&[&base[..], &["--bless"]].concat());
    assert!(ok, "{out}");
    let (ok, out) = run(&base);
    assert!(ok && out.contains("matches"), "{out}");
    // A different alpha categorises jobs differently: the trace must show it.
    let (ok, out) = run(&[&base[..], &["--set", "alpha=0.05"]].concat());
    assert!(!ok, "a changed trace passed:\n{out}");
    assert!(
        out.contains("--- golden") && out.contains("+  label"),
        "{out}"
    );
}

#[test]
fn policy_test_reports_each_expectation_and_fails_when_one_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let expect = dir.path().join("expect.yaml");
    std::fs::write(
        &expect,
        "expect:\n  - placed: {job: birnn-4, on: cpu-0}\n    at: 0\n  - migrated: {job: vae-3}\n\
         forbid:\n  - rejected: {}\n",
    )
    .unwrap();
    let (ok, out) = run(&[
        "policy",
        "test",
        "specon",
        "examples/quickstart.yaml",
        "--expect",
        expect.to_str().unwrap(),
    ]);
    assert!(!ok, "{out}");
    assert!(out.contains("ok   birnn-4 placed on cpu-0 at t=0"), "{out}");
    assert!(out.contains("FAIL vae-3 migrated"), "{out}");
    assert!(
        out.contains("what happened to vae-3: t=456.500 place vae-3"),
        "{out}"
    );
    assert!(out.contains("2 of 3 expectations held"), "{out}");
}

#[test]
fn policy_test_with_a_typo_in_the_expectations_names_the_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let expect = dir.path().join("expect.yaml");
    std::fs::write(&expect, "expect:\n  - placed: {jobb: a}\n").unwrap();
    let (ok, out) = run(&[
        "policy",
        "test",
        "default",
        "examples/quickstart.yaml",
        "--expect",
        expect.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        out.contains("expect.yaml:2:") && out.contains("unknown field `jobb`"),
        "{out}"
    );
}

#[test]
fn a_saved_snapshot_replays_as_a_fixture_with_the_same_decision() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let (ok, out) = run(&[
        "policy",
        "test",
        "specon",
        "examples/quickstart.yaml",
        "--save-snapshots",
        snaps.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    // Round 30 of this run is SpeCon's migration of resnet-12 (see the trace above).
    assert!(out.contains("round 30 t=600.000"), "{out}");
    assert!(
        out.contains("migrate resnet-12 (all tasks) -> gpu reallocate"),
        "{out}"
    );
    let fixture = snaps.join("round-30.yaml");
    let (ok, replay) = run(&["policy", "test", "specon", fixture.to_str().unwrap()]);
    assert!(ok, "{replay}");
    assert!(
        replay.contains("round 0 t=600.000 [tick] by specon")
            && replay.contains("migrate resnet-12 (all tasks) -> gpu reallocate"),
        "the fixture did not reproduce the round:\n{replay}"
    );
}

#[test]
fn against_lists_the_rounds_in_which_two_policies_decide_differently() {
    let (ok, out) = run(&[
        "policy",
        "test",
        "specon",
        "examples/quickstart.yaml",
        "--against",
        "even",
    ]);
    assert!(ok, "{out}");
    let summary = out
        .lines()
        .find(|l| l.starts_with("specon and even agreed in"))
        .unwrap_or_else(|| panic!("no comparison in:\n{out}"));
    assert!(!summary.contains("(100%)"), "{summary}");
    assert!(
        out.contains("- migrate resnet-12 (all tasks) -> gpu reallocate   (only specon)"),
        "{out}"
    );
}

/// Cargo for building guest crates, without the outer build's flags.
fn cargo() -> Process {
    let mut cmd = Process::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for var in support::OUTER_BUILD_VARS {
        cmd.env_remove(var);
    }
    cmd
}

#[test]
fn a_new_policy_crate_builds_anywhere_into_a_component_that_validates_and_passes_its_tests() {
    let dir = tempfile::tempdir().unwrap();
    let crate_dir = dir.path().join("first-fit");
    let (ok, out) = run(&[
        "policy",
        "new",
        "first-fit",
        "--dir",
        crate_dir.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    // The crate carries the SDK and WIT of this binary and the workspace's lock file: it
    // names nothing of this checkout, so it builds wherever it is moved, and (the lock
    // pinning the versions the shipped policies build with) from what is downloaded.
    let moved = dir.path().join("moved-elsewhere");
    std::fs::rename(&crate_dir, &moved).unwrap();
    let crate_dir = moved;
    let checkout = repo().canonicalize().unwrap().display().to_string();
    for file in [
        "Cargo.toml",
        "README.md",
        "switchyard-sdk/Cargo.toml",
        ".cargo/config.toml",
    ] {
        let text = std::fs::read_to_string(crate_dir.join(file)).unwrap();
        assert!(
            !text.contains(&checkout),
            "{file} names the checkout:\n{text}"
        );
    }
    // A target directory kept between runs (outside the one cargo test has locked).
    let target = repo().join("target/policy-new-test");
    let status = cargo()
        .current_dir(&crate_dir)
        .args(["build", "--release", "--offline", "--target-dir"])
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success(), "cargo build of the new crate failed");
    let wasm = target.join("wasm32-wasip2/release/first_fit.wasm");
    let wasm = wasm.to_str().unwrap();
    let (ok, out) = run(&["policy", "validate", wasm]);
    assert!(ok && out.contains("first-fit 0.1.0"), "{out}");
    let workload = crate_dir.join("policy-tests/workload.yaml");
    let expect = crate_dir.join("policy-tests/expect.yaml");
    let (ok, out) = run(&[
        "policy",
        "test",
        wasm,
        workload.to_str().unwrap(),
        "--expect",
        expect.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("6 of 6 expectations held"), "{out}");
    let host = String::from_utf8(Process::new("rustc").arg("-vV").output().unwrap().stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap();
    let status = cargo()
        .current_dir(&crate_dir)
        .args(["test", "--offline", "--target", &host, "--target-dir"])
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success(), "the new crate's own unit tests failed");
}

#[test]
fn the_python_policy_builds_validates_and_runs_beside_a_rust_policy() {
    let Some(tool) = support::componentize_py_or_skip("the Python example's test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("least_loaded.wasm");
    support::build_python_example(&tool, &wasm);
    let wasm = wasm.to_str().unwrap();
    let cache = dir.path().join("cache");
    let cache = cache.to_str().unwrap();
    let (ok, out) = checked_like_a_rust_policy(wasm, cache, "examples/python-policy/expect.yaml");
    assert!(ok, "{out}");
}

#[test]
fn a_new_python_policy_passes_its_pytest_tests_and_builds_into_a_component_that_passes_its_expectations()
 {
    let Some(tool) = support::componentize_py_or_skip("the new Python policy's test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("first-fit");
    let (ok, out) = run(&[
        "policy",
        "new",
        "first-fit",
        "--lang",
        "python",
        "--dir",
        project.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("-p switchyard-sdk/src app -o first_fit.wasm"),
        "{out}"
    );
    // It names nothing of this checkout: it builds wherever it is moved.
    let moved = dir.path().join("moved-elsewhere");
    std::fs::rename(&project, &moved).unwrap();
    // The README's steps, with the tools of the environment that holds componentize-py
    // (a new virtual environment would download them on every run).
    let pytest = tool.with_file_name("pytest");
    if pytest.is_file() {
        let status = Process::new(&pytest)
            .current_dir(&moved)
            .arg("-q")
            .status()
            .unwrap();
        assert!(
            status.success(),
            "the new project's own pytest tests failed"
        );
    } else {
        let missing = Err::<(), _>(format!("no pytest beside {}", tool.display()));
        support::optional_tool(
            support::COMPONENTIZE_PY,
            "the new Python policy's pytest step",
            missing,
        );
    }
    support::build_python_policy(
        &tool,
        &moved,
        "switchyard-sdk/src",
        Path::new("first_fit.wasm"),
    );
    new_project_passes_its_expectations(&moved, &dir.path().join("cache"));
}

/// The SDK's componentize-js (`npm ci` in `sdk/js`, which `.ci/run` does) and `node`,
/// which CI requires with `SWITCHYARD_REQUIRE_COMPONENTIZE_JS`.
const COMPONENTIZE_JS: support::Tool = support::Tool {
    name: "Node.js 20 or later and componentize-js",
    install: "Debian: apt-get install nodejs npm; then `npm ci` in sdk/js",
    required_by: "SWITCHYARD_REQUIRE_COMPONENTIZE_JS",
};

/// The `node_modules` of the JavaScript SDK holding componentize-js, with `node` and
/// `npm` on the PATH: the SDK's build script imports componentize-js from the
/// `node_modules` above it, so a checkout has it exactly when that folder holds it.
/// `None` once `what` has said it is skipped.
fn componentize_js_or_skip(what: &str) -> Option<PathBuf> {
    let modules = repo().join("sdk/js/node_modules");
    let found = support::on_path("node")
        .and_then(|_| support::on_path("npm"))
        .and_then(|_| {
            modules
                .join("@bytecodealliance/componentize-js/package.json")
                .is_file()
                .then_some(modules)
                .ok_or_else(|| "sdk/js/node_modules holds no componentize-js".to_string())
        });
    support::optional_tool(COMPONENTIZE_JS, what, found)
}

/// Runs `npm run SCRIPT` in `dir`, failing the test with npm's output when it fails.
fn npm_run(dir: &Path, script: &str) {
    let output = Process::new("npm")
        .current_dir(dir)
        .args(["run", "--silent", script])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "npm run {script} failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_javascript_policy_builds_validates_and_runs_beside_a_rust_policy() {
    if componentize_js_or_skip("the JavaScript example's test").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("least_loaded.wasm");
    // The example's build script with another output: the SDK from this checkout's
    // source, the WIT it carries.
    let output = Process::new("node")
        .current_dir(repo().join("examples/js-policy"))
        .args(["../../sdk/js/bin/build.js", "app.js", "-o"])
        .arg(&wasm)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the JavaScript build failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let wasm = wasm.to_str().unwrap();
    // One compile of the component (SpiderMonkey travels in it) for the whole test: the
    // first command fills the cache, the others load from it. (componentize-js does not
    // build the same bytes twice, since its temporary folder's name is inside the
    // component, so a cache kept between runs would only grow.)
    let cache = dir.path().join("cache");
    let cache = cache.to_str().unwrap();
    let (ok, out) = checked_like_a_rust_policy(wasm, cache, "examples/js-policy/expect.yaml");
    assert!(ok && out.contains("8 of 8 expectations held"), "{out}");
    // A refusal is the operator's sentence, not a trap.
    let (ok, out) = run(&[
        "--cache-dir",
        cache,
        "policy",
        "test",
        wasm,
        "examples/quickstart.yaml",
        "--set",
        "resource=disk",
    ]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "refused: parameter `resource` must be one of any, cpu, memory, gpu, got `disk`"
        ),
        "{out}"
    );
}

#[test]
fn a_new_javascript_policy_passes_its_own_tests_and_builds_into_a_component_that_passes_its_expectations()
 {
    let Some(modules) = componentize_js_or_skip("the new JavaScript policy's test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("first-fit");
    let (ok, out) = run(&[
        "policy",
        "new",
        "first-fit",
        "--lang",
        "js",
        "--dir",
        project.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    assert!(out.contains("npm run build"), "{out}");
    // It names nothing of this checkout: it builds wherever it is moved.
    let moved = dir.path().join("moved-elsewhere");
    std::fs::rename(&project, &moved).unwrap();
    // The README's steps, with the tools `npm ci` in sdk/js installed from the same lock
    // (a fresh `npm ci` would download componentize-js and its engine on every run).
    std::os::unix::fs::symlink(&modules, moved.join("node_modules")).unwrap();
    npm_run(&moved, "test");
    npm_run(&moved, "build");
    new_project_passes_its_expectations(&moved, &dir.path().join("cache"));
}
