//! Policies named by OCI registry reference, against a real registry on loopback
//! (Debian's `docker-registry`, `host/test-support/src/registry_server.rs`) and the live
//! controller over its HTTP API: `POST /v1/policies` with `{"reference": ...}` pulls the
//! component, lists it under the reference pinned to its digest and keeps that reference
//! (a few bytes) in `--state-dir`, so a restarted controller pulls exactly those bytes
//! again; every reference that cannot be pulled is refused with its reason while the
//! active policy keeps deciding; a kept reference that no longer pulls at restart is a
//! load error and the other policies come back.

use crate::support;

use std::path::Path;
use std::time::Duration;

use axum::body::Bytes;
use serde_json::{Value, json};
use support::{STREAM, TestRegistry};
use switchyard_controller::{LiveConfig, PolicyDir, RegistryAccess, watch_policy_dir};
use switchyard_registry::{ClientOptions, Credentials, Digest, Pushed, Reference};

fn guest_bytes(folder: &str) -> Bytes {
    std::fs::read(support::guest(folder)).unwrap().into()
}

/// Pushes the test guest `folder` to `repository:tag` anonymously.
async fn push(registry: &TestRegistry, folder: &str, repository_tag: &str) -> Pushed {
    let tagged = Reference::parse(&registry.reference(repository_tag)).unwrap();
    registry
        .client(Credentials::none(), None)
        .push(&tagged, guest_bytes(folder))
        .await
        .unwrap()
}

/// How a controller reaches `registry`: plain HTTP with `credentials`, components up to
/// `max_bytes`, no cache (so every pull asks the registry).
fn access(registry: &TestRegistry, credentials: Credentials, max_bytes: u64) -> RegistryAccess {
    RegistryAccess::new(
        ClientOptions {
            insecure_registries: vec![registry.address().to_string()],
            credentials,
            cache: None,
        },
        max_bytes,
    )
    .unwrap()
}

/// A controller keeping its state in `dir` and pulling through `access`.
fn config(dir: Option<&Path>, access: RegistryAccess) -> LiveConfig {
    LiveConfig {
        speed: 100.0,
        state_dir: dir.map(Path::to_path_buf),
        keep_decisions: 1_000_000,
        registry: Some(access),
        ..Default::default()
    }
}

async fn start(config: LiveConfig) -> support::Live {
    support::start_live_with(STREAM, config, Duration::from_millis(500)).await
}

/// The listed policy called `name`, if it is loaded.
fn listed<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_named_by_tag_is_listed_under_its_pinned_reference_and_the_same_bytes_come_back_after_a_restart()
 {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let pushed = push(&registry, "null", "team/null:1").await;
    let pinned = pushed.reference.to_string();
    let dir = tempfile::tempdir().unwrap();
    let limit = 64 << 20;
    let live = start(config(
        Some(dir.path()),
        access(&registry, Credentials::none(), limit),
    ))
    .await;

    let (status, loaded) = live
        .post(
            "/v1/policies",
            json!({"reference": registry.reference("team/null:1")}),
        )
        .await;
    assert_eq!(status, 201, "{loaded}");
    assert_eq!(loaded["policy"]["name"], "null");
    assert_eq!(
        loaded["policy"]["source"], pinned,
        "the tag was resolved once, to the digest the push answered"
    );
    assert_eq!(
        loaded["policy"]["digest"],
        Digest::of(&guest_bytes("null")).to_string()
    );
    let kept = dir.path().join("components").join("null.wasm");
    assert_eq!(loaded["persistence"]["survives_restart"], true, "{loaded}");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        pinned,
        "the reference is kept, not the component"
    );
    let (status, applied) = live.post("/v1/policies/null/activate", json!({})).await;
    assert_eq!(status, 200, "{applied}");
    let (_, status) = live.get("/v1/status").await;
    assert_eq!(status["active_source"], pinned);
    let metrics = live
        .client
        .get(live.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let info = metrics
        .lines()
        .find(|l| l.starts_with("switchyard_policy_info{") && l.contains("policy=\"null\""))
        .unwrap_or_else(|| panic!("an info series for null: {metrics}"));
    assert!(info.contains(&format!("source=\"{pinned}\"")), "{info}");
    // The decisions name what `null` stands for once: its digest and pinned reference.
    let from = applied["from_round"].as_u64().unwrap();
    live.wait_for_rounds_after(from + 2).await;
    let (_, page) = live.get("/v1/decisions?limit=2").await;
    let policies = page["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 1, "{page}");
    assert_eq!(policies[0]["name"], "null");
    assert_eq!(policies[0]["digest"], loaded["policy"]["digest"]);
    assert_eq!(policies[0]["reference"], pinned);
    live.stop().await;

    // The tag moves on; the restarted controller pulls what the kept digest names.
    push(&registry, "least-loaded", "team/null:1").await;
    let live = start(config(
        Some(dir.path()),
        access(&registry, Credentials::none(), limit),
    ))
    .await;
    let (_, list) = live.get("/v1/policies").await;
    assert_eq!(list["load_errors"], json!([]), "{list}");
    assert_eq!(
        list["active"], "null",
        "the active policy came back: {list}"
    );
    let null = listed(&list, "null").unwrap_or_else(|| panic!("null came back: {list}"));
    assert_eq!(null["source"], pinned);
    assert_eq!(null["digest"], loaded["policy"]["digest"]);
    assert!(listed(&list, "least-loaded-rust").is_none(), "{list}");
    live.wait_for_rounds_after(3).await;
    assert!(
        live.all_decisions()
            .await
            .iter()
            .all(|r| r["policy"] == "null"),
        "the pulled policy decides after the restart"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_reference_that_no_longer_pulls_at_restart_is_a_load_error_and_the_rest_comes_back()
{
    let dir = tempfile::tempdir().unwrap();
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let same_access = access(&registry, Credentials::none(), 64 << 20);
    let pinned = {
        let pinned = push(&registry, "null", "team/null:1").await.reference;
        let live = start(config(Some(dir.path()), same_access.clone())).await;
        let (status, body) = live
            .post("/v1/policies", json!({"reference": pinned.to_string()}))
            .await;
        assert_eq!(status, 201, "{body}");
        let (status, body) = live.upload(guest_bytes("least-loaded").to_vec()).await;
        assert_eq!(status, 201, "{body}");
        let (status, body) = live.post("/v1/policies/null/activate", json!({})).await;
        assert_eq!(status, 200, "{body}");
        live.stop().await;
        pinned
    };
    drop(registry);

    let live = start(config(Some(dir.path()), same_access)).await;
    let (_, status) = live.get("/v1/status").await;
    assert_eq!(
        status["active"], "default",
        "the active policy falls back to --policy: {status}"
    );
    let errors = status["load_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{status}");
    assert_eq!(errors[0]["source"], pinned.to_string());
    let error = errors[0]["error"].as_str().unwrap();
    assert!(
        error.contains("cannot reach registry") && error.contains(&pinned.to_string()),
        "{error}"
    );
    let (_, list) = live.get("/v1/policies").await;
    assert!(
        listed(&list, "least-loaded-rust").is_some(),
        "the kept upload comes back: {list}"
    );
    let rounds = live.rounds().await;
    live.wait_for_rounds_after(rounds + 2).await;
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_that_cannot_be_pulled_are_refused_with_their_reason_and_the_active_policy_keeps_deciding()
 {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let null = guest_bytes("null");
    push(&registry, "null", "team/null:1").await;
    let larger = push(&registry, "least-loaded", "team/large:1").await;
    assert!(
        larger.size > null.len() as u64,
        "the oversized case needs a component larger than null"
    );
    let damaged = push(&registry, "null", "team/damaged:1").await;
    let blob = registry.blob_file(&damaged.component_digest.to_hex());
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    registry
        .push_artifact(
            "team/text",
            "1",
            b"print('hello')\n",
            "application/wasm",
            "application/vnd.wasm.config.v0+json",
        )
        .await;
    registry
        .push_artifact(
            "team/image",
            "1",
            b"layers of an image",
            "application/vnd.oci.image.layer.v1.tar+gzip",
            "application/vnd.oci.image.config.v1+json",
        )
        .await;

    let live = start(config(
        None,
        access(&registry, Credentials::none(), null.len() as u64),
    ))
    .await;
    let (status, body) = live.post("/v1/policies/flowcon/activate", json!({})).await;
    assert_eq!(status, 200, "{body}");

    let here = |path: &str| registry.reference(path);
    let cases: Vec<(Value, u16, Vec<String>)> = vec![
        (
            json!({"reference": "oci://127.0.0.1:1/team/null:1"}),
            502,
            vec!["cannot reach registry `127.0.0.1:1`".into()],
        ),
        (
            json!({"reference": here("team/null:2")}),
            422,
            vec!["does not exist".into(), here("team/null:2")],
        ),
        (
            json!({"reference": here("team/text:1")}),
            422,
            vec!["is not a Wasm component".into()],
        ),
        (
            json!({"reference": here("team/image:1")}),
            422,
            vec![
                "is not a Wasm component".into(),
                "application/vnd.oci.image.config.v1+json".into(),
            ],
        ),
        (
            json!({"reference": here("team/damaged:1")}),
            422,
            vec![damaged.component_digest.to_string(), "digest".into()],
        ),
        (
            json!({"reference": here("team/large:1")}),
            413,
            vec![
                format!("over the limit of {} bytes", null.len()),
                "not downloaded".into(),
            ],
        ),
        (
            json!({"reference": "oci://registry.example.com/team/fair"}),
            400,
            vec!["oci://registry.example.com/team/fair".into()],
        ),
        (
            json!({"reference": "/team/null:1"}),
            400,
            vec!["oci://".into()],
        ),
        (
            json!({"ref": here("team/null:1")}),
            400,
            vec!["reference".into()],
        ),
        (json!({"reference": 7}), 400, vec!["reference".into()]),
    ];
    for (body, status, wanted) in cases {
        let rounds = live.rounds().await;
        let (got, answer) = live.post("/v1/policies", body.clone()).await;
        let message = answer["error"].as_str().unwrap_or_default().to_string();
        assert_eq!(got, status, "{body}: {answer}");
        for part in &wanted {
            assert!(
                message.contains(part.as_str()),
                "{body}: `{part}` in {message}"
            );
        }
        let (_, now) = live.get("/v1/status").await;
        assert_eq!(now["active"], "flowcon", "{body}: {now}");
        live.wait_for_rounds_after(rounds + 1).await;
    }
    let (_, list) = live.get("/v1/policies").await;
    assert!(listed(&list, "null").is_none(), "{list}");
    assert!(
        live.all_decisions()
            .await
            .iter()
            .skip(5)
            .all(|r| r["policy"] == "flowcon"),
        "flowcon decided throughout"
    );
    live.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_basic_auth_the_login_of_the_docker_config_pulls_and_a_wrong_one_is_refused() {
    let Some(registry) = TestRegistry::with_login("team", "s3cret") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("config.json");
    registry.write_docker_config(&config_file, "team", "s3cret");
    let login = Credentials::from_docker_config_file(&config_file).unwrap();
    let tagged = Reference::parse(&registry.reference("team/null:1")).unwrap();
    registry
        .client(login.clone(), None)
        .push(&tagged, guest_bytes("null"))
        .await
        .unwrap();

    // A Kubernetes dockerconfigjson Secret, mounted as a directory.
    let secret = dir.path().join("secret");
    std::fs::create_dir(&secret).unwrap();
    registry.write_docker_config(&secret.join(".dockerconfigjson"), "team", "wrong");
    let wrong = Credentials::from_docker_config_file(&secret).unwrap();
    for (credentials, status, wanted) in [
        (Credentials::none(), 502, "HTTP 401"),
        (wrong, 502, "HTTP 401"),
        (login, 201, "null"),
    ] {
        let live = start(config(None, access(&registry, credentials, 64 << 20))).await;
        let (got, answer) = live
            .post("/v1/policies", json!({"reference": tagged.to_string()}))
            .await;
        assert_eq!(got, status, "{answer}");
        assert!(answer.to_string().contains(wanted), "{wanted} in {answer}");
        assert!(
            !answer.to_string().contains("s3cret") && !answer.to_string().contains("wrong\""),
            "no password in an answer: {answer}"
        );
        let (_, now) = live.get("/v1/status").await;
        assert_eq!(now["active"], "default");
        live.stop().await;
    }
}

#[test]
fn a_settings_file_names_a_policy_by_reference_makes_it_active_and_keeps_nothing_for_it() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let pinned = tokio
        .block_on(push(&registry, "null", "team/null:1"))
        .reference
        .to_string();
    let state = tempfile::tempdir().unwrap();
    let live = tokio.block_on(start(config(
        Some(state.path()),
        access(&registry, Credentials::none(), 64 << 20),
    )));
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("settings.yaml");
    let tagged = registry.reference("team/null:1");
    std::fs::write(
        &settings,
        // Quoted: a bare `null` is YAML's null.
        format!("policies:\n  \"null\": {tagged}\nactive: \"null\"\n"),
    )
    .unwrap();
    let watched =
        PolicyDir::new(dir.path(), live.controller.clone(), tokio.handle().clone()).unwrap();
    let (watcher, first) = watch_policy_dir(watched).unwrap();
    assert_eq!(first.refused, vec![]);
    assert_eq!(first.activated.as_deref(), Some("null"));
    let (_, list) = tokio.block_on(live.get("/v1/policies"));
    assert_eq!(listed(&list, "null").unwrap()["source"], pinned, "{list}");
    assert!(
        !state.path().join("components").join("null.wasm").exists(),
        "the settings file is the policy's persistence"
    );

    // A name that is not the one the policy gives itself is reported against the file.
    std::fs::write(
        &settings,
        format!("policies:\n  team-fair: {pinned}\nactive: \"null\"\n"),
    )
    .unwrap();
    let status = tokio.block_on(live.wait_for("/v1/status", |s| {
        s["load_errors"]
            .as_array()
            .is_some_and(|errors| !errors.is_empty())
    }));
    let error = &status["load_errors"][0];
    assert!(
        error["source"]
            .as_str()
            .unwrap()
            .ends_with("settings.yaml: policies.team-fair"),
        "{status}"
    );
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("calls itself `null`, not `team-fair`"),
        "{status}"
    );
    drop(watcher);
    tokio.block_on(live.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_and_a_python_policy_from_a_registry_both_come_back_after_a_restart() {
    let Some(tool) = support::componentize_py_or_skip("a Python policy from a registry") else {
        return;
    };
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let build = tempfile::tempdir().unwrap();
    let python = build.path().join("least_loaded.wasm");
    support::build_python_example(&tool, &python);
    let tagged = Reference::parse(&registry.reference("team/least-loaded:py")).unwrap();
    let python = registry
        .client(Credentials::none(), None)
        .push(&tagged, std::fs::read(&python).unwrap().into())
        .await
        .unwrap();
    let rust = push(&registry, "null", "team/null:1").await;
    let dir = tempfile::tempdir().unwrap();
    let limit = 64 << 20;
    let live = start(config(
        Some(dir.path()),
        access(&registry, Credentials::none(), limit),
    ))
    .await;
    for pushed in [&rust, &python] {
        let (status, body) = live
            .post(
                "/v1/policies",
                json!({"reference": pushed.reference.to_string()}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["persistence"]["survives_restart"], true, "{body}");
    }
    live.stop().await;

    let live = start(config(
        Some(dir.path()),
        access(&registry, Credentials::none(), limit),
    ))
    .await;
    let (_, list) = live.get("/v1/policies").await;
    let sources: Vec<&str> = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["source"].as_str())
        .collect();
    for pushed in [&rust, &python] {
        assert!(
            sources.contains(&pushed.reference.to_string().as_str()),
            "{} came back: {list}",
            pushed.reference
        );
    }
    live.stop().await;
}
