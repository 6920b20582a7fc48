//! `switchyard policy push` and `policy pull` as a user runs them, against a real registry
//! on loopback (`host/test-support/src/registry_server.rs`): the pinned reference printed, the
//! same bytes back, logins from the docker config the flag or `DOCKER_CONFIG` names, and
//! TLS unless the registry is named insecure.

use std::path::Path;

use assert_cmd::Command;

use crate::support::{self, TestRegistry};

/// The command, with no compile cache and an empty docker config directory, so the
/// user's own logins and cache play no part.
fn switchyard(docker_config_dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("switchyard").unwrap();
    cmd.env("SWITCHYARD_NO_CACHE", "1")
        .env("DOCKER_CONFIG", docker_config_dir);
    cmd
}

/// Runs `cmd`, which must succeed, and returns its stdout.
fn run_ok(cmd: &mut Command) -> String {
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Runs `cmd`, which must fail, and returns its stderr.
fn run_err(cmd: &mut Command) -> String {
    let output = cmd.output().unwrap();
    assert!(!output.status.success(), "{cmd:?} succeeded");
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn push_prints_the_pinned_reference_and_pull_writes_the_same_bytes_by_tag_and_by_digest() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dragon = support::builtin_policy("dragon");
    let tagged = registry.reference("team/dragon:1.4");
    let insecure = ["--insecure-registry", registry.address()];

    let pushed = run_ok(
        switchyard(dir.path())
            .args(["policy", "push", &dragon, &tagged])
            .args(insecure),
    );
    let pinned = pushed.trim();
    assert!(
        pinned.starts_with(&format!("{tagged}@sha256:")) && pinned.len() == tagged.len() + 72,
        "{pushed}"
    );

    let out = dir.path().join("out.wasm");
    let pulled = run_ok(
        switchyard(dir.path())
            .args(["policy", "pull", &tagged, "-o"])
            .arg(&out)
            .args(insecure),
    );
    assert_eq!(
        pulled.trim(),
        pinned,
        "the tag resolved to the pushed digest"
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&dragon).unwrap()
    );

    // By digest, into the repository's name in the current directory.
    let by_digest = format!(
        "{}@{}",
        registry.reference("team/dragon"),
        pinned.rsplit_once('@').unwrap().1
    );
    let pulled = run_ok(
        switchyard(dir.path())
            .current_dir(dir.path())
            .args(["policy", "pull", &by_digest])
            .args(insecure),
    );
    assert_eq!(pulled.trim(), by_digest);
    assert_eq!(
        std::fs::read(dir.path().join("dragon.wasm")).unwrap(),
        std::fs::read(&dragon).unwrap()
    );
}

#[test]
fn the_login_comes_from_the_docker_config_the_flag_or_docker_config_names_and_none_is_refused() {
    let Some(registry) = TestRegistry::with_login("ci", "s3cret") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let logged_in = dir.path().join("logged-in");
    std::fs::create_dir(&logged_in).unwrap();
    registry.write_docker_config(&logged_in.join("config.json"), "ci", "s3cret");
    let dragon = support::builtin_policy("dragon");
    let tagged = registry.reference("team/dragon:1");
    let insecure = ["--insecure-registry", registry.address()];

    let stderr = run_err(
        switchyard(&empty)
            .args(["policy", "push", &dragon, &tagged])
            .args(insecure),
    );
    assert!(stderr.contains("refused access"), "{stderr}");
    assert!(
        stderr.contains(&format!("no login for {}", registry.address())),
        "{stderr}"
    );

    let config_file = logged_in.join("config.json");
    run_ok(
        switchyard(&empty)
            .args(["policy", "push", &dragon, &tagged, "--docker-config"])
            .arg(&config_file)
            .args(insecure),
    );
    let out = dir.path().join("out.wasm");
    run_ok(
        switchyard(&logged_in)
            .args(["policy", "pull", &tagged, "-o"])
            .arg(&out)
            .args(insecure),
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(&dragon).unwrap()
    );
}

#[test]
fn a_registry_not_named_insecure_is_spoken_to_over_tls_and_the_error_names_the_flag() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tagged = registry.reference("team/dragon:1");
    let stderr = run_err(switchyard(dir.path()).args(["policy", "pull", &tagged]));
    assert!(stderr.contains("over https"), "{stderr}");
    assert!(
        stderr.contains(&format!("--insecure-registry {}", registry.address())),
        "{stderr}"
    );
    let stderr = run_err(switchyard(dir.path()).args([
        "policy",
        "pull",
        &tagged,
        "--insecure-registry",
        &format!("http://{}", registry.address()),
    ]));
    assert!(stderr.contains("HOST[:PORT]"), "{stderr}");
}

#[test]
fn a_malformed_reference_is_refused_saying_what_a_reference_looks_like() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = run_err(switchyard(dir.path()).args(["policy", "pull", "oci://registry/fair"]));
    assert!(stderr.contains("`oci://registry/fair`"), "{stderr}");
    assert!(stderr.contains("neither a tag nor a digest"), "{stderr}");
    assert!(stderr.contains("oci://REGISTRY/REPOSITORY:TAG"), "{stderr}");
}

/// The repository's root, where the examples are.
fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

#[test]
fn simulate_and_policy_test_run_a_policy_named_by_reference_and_name_its_digest() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let least_loaded = support::guest("least-loaded");
    let tagged = registry.reference("team/least-loaded:1");
    let insecure = ["--insecure-registry", registry.address()];
    let pinned = run_ok(
        switchyard(dir.path())
            .args(["policy", "push", &least_loaded, &tagged])
            .args(insecure),
    );
    let pinned = pinned.trim();

    let output = switchyard(dir.path())
        .current_dir(repo())
        .args(["simulate", "examples/quickstart.yaml", "--policy", &tagged])
        .args(["--policy", "local=specon", "--json"])
        .args(insecure)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("policy {pinned} (component sha256:")),
        "the run names the digest the tag resolved to: {stderr}"
    );
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        results.to_string().contains("least-loaded-rust"),
        "the pulled policy ran under its own name: {results}"
    );

    let tested = run_ok(
        switchyard(dir.path())
            .current_dir(repo())
            .args(["policy", "test", pinned, "examples/quickstart.yaml"])
            .args(insecure),
    );
    assert!(tested.contains("least-loaded-rust"), "{tested}");

    // A reference that names nothing fails the run, naming it.
    let missing = registry.reference("team/least-loaded:2");
    let error = run_err(
        switchyard(dir.path())
            .current_dir(repo())
            .args(["simulate", "examples/quickstart.yaml", "--policy"])
            .arg(format!("mine={missing}"))
            .args(insecure),
    );
    assert!(
        error.contains(&missing) && error.contains("does not exist"),
        "{error}"
    );
}

/// Pushes the `least-loaded` guest as `team/least-loaded:1`; returns the tagged and the
/// pinned reference.
fn push_least_loaded(registry: &TestRegistry, docker_config_dir: &Path) -> (String, String) {
    let tagged = registry.reference("team/least-loaded:1");
    let pinned = run_ok(
        switchyard(docker_config_dir)
            .args(["policy", "push", &support::guest("least-loaded"), &tagged])
            .args(["--insecure-registry", registry.address()]),
    );
    (tagged, pinned.trim().to_string())
}

#[test]
fn either_arm_of_a_split_may_be_a_registry_reference_with_its_port_tag_and_digest() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (tagged, pinned) = push_least_loaded(&registry, dir.path());
    for (split, arm_of_reference) in [
        (format!("default:{tagged}:0.5"), 1),
        (format!("{pinned}:default:0.5"), 0),
    ] {
        let output = switchyard(dir.path())
            .current_dir(repo())
            .args(["simulate", "examples/quickstart.yaml", "--split", &split])
            .args(["--json", "--insecure-registry", registry.address()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "--split {split}: {stderr}");
        assert!(
            stderr.contains(&format!("policy {pinned} (component sha256:")),
            "--split {split} pulls the reference: {stderr}"
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let arms = &report["experiment"]["split"]["arms"];
        assert_eq!(
            arms[arm_of_reference]["policy"], "least-loaded-rust",
            "--split {split}: {report}"
        );
        assert_eq!(
            arms[1 - arm_of_reference]["policy"],
            "default",
            "--split {split}: {report}"
        );
    }
}

#[test]
fn the_decision_trace_of_a_policy_from_a_registry_names_its_version_digest_and_pinned_reference_once()
 {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (tagged, pinned) = push_least_loaded(&registry, dir.path());
    let out = dir.path().join("out");
    let output = switchyard(dir.path())
        .current_dir(repo())
        .args(["simulate", "examples/quickstart.yaml", "--policy", &tagged])
        .args(["--insecure-registry", registry.address(), "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The layer's digest, as the pull reported it.
    let digest = stderr
        .split("(component ")
        .nth(1)
        .and_then(|rest| rest.get(..71))
        .unwrap_or_else(|| panic!("{stderr}"));
    let trace = std::fs::read_to_string(out.join("decisions-least-loaded-rust.jsonl")).unwrap();
    let mut lines = trace.lines();
    let first: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        first["policies"][0],
        serde_json::json!({
            "name": "least-loaded-rust",
            "version": first["policies"][0]["version"],
            "digest": digest,
            "reference": pinned,
        }),
        "{first}"
    );
    assert_eq!(
        first["policies"][1]["name"], "default",
        "the fallback: {first}"
    );
    assert!(first["policies"][1].get("reference").is_none(), "{first}");
    let rounds: Vec<&str> = lines.collect();
    assert!(rounds.len() > 10, "{trace}");
    assert!(
        rounds.iter().all(|r| !r.contains("sha256:")),
        "no round repeats a digest: {trace}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_upload_of_a_reference_has_the_controller_pull_it_and_says_where_it_is_kept() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let null = support::guest("null");
    let tagged = registry.reference("team/null:1");
    let insecure = ["--insecure-registry", registry.address()];
    let pinned = run_ok(
        switchyard(dir.path())
            .args(["policy", "push", &null, &tagged])
            .args(insecure),
    );
    let pinned = pinned.trim().to_string();
    let state = tempfile::tempdir().unwrap();
    let access = switchyard_controller::RegistryAccess::new(
        switchyard_registry::ClientOptions {
            insecure_registries: vec![registry.address().to_string()],
            ..Default::default()
        },
        64 << 20,
    )
    .unwrap();
    let live = support::start_live_with(
        support::STREAM,
        switchyard_controller::LiveConfig {
            speed: 100.0,
            state_dir: Some(state.path().to_path_buf()),
            registry: Some(access),
            ..Default::default()
        },
        std::time::Duration::from_millis(500),
    )
    .await;
    let base = live.base.clone();
    let uploaded = tokio::task::spawn_blocking(move || {
        run_ok(
            switchyard(dir.path())
                .env("SWITCHYARD_URL", base)
                .env("SWITCHYARD_TOKEN", support::TOKEN)
                .args(["ctl", "upload", &tagged]),
        )
    })
    .await
    .unwrap();
    assert!(uploaded.starts_with("loaded null "), "{uploaded}");
    assert!(uploaded.contains(&format!("from {pinned}\n")), "{uploaded}");
    let kept = state.path().join("components").join("null.wasm");
    assert!(
        uploaded.contains(&format!("kept in {}", kept.display())),
        "{uploaded}"
    );
    live.stop().await;
}
