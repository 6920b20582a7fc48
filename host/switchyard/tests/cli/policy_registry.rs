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
