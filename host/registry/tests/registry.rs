//! Pushing and pulling policies against a real registry on loopback (Debian's
//! `docker-registry`, started per test by `host/test-support/src/registry_server.rs`): a Rust
//! policy and, where componentize-py is installed, a Python one go up and come back byte
//! for byte by tag and by digest, in the layout `wkg` writes; every refusal (wrong
//! login, missing tag, not a component, a changed blob, too large, no TLS) names the
//! reference and what is wrong.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use oci_client::secrets::RegistryAuth;
use switchyard_registry::{
    Client, ClientOptions, Credentials, Digest, Error, NotComponent, Pushed, Reference, Size,
};
use switchyard_test_support::{self as support, TestRegistry};

/// A limit no test component comes near.
const LIMIT: u64 = 256 << 20;

/// The shipped DRAGON policy, as the runtime's build script compiled it.
fn dragon() -> Bytes {
    Bytes::from(std::fs::read(support::builtin_policy("dragon")).unwrap())
}

/// The shipped default policy: a second, different component.
fn default_policy() -> Bytes {
    Bytes::from(std::fs::read(support::builtin_policy("default")).unwrap())
}

fn reference(text: &str) -> Reference {
    Reference::parse(text).unwrap()
}

/// A client that speaks plain HTTP to `registry`, with no login and no cache.
fn client_for(registry: &TestRegistry) -> Client {
    client_with(registry, Credentials::none(), None)
}

fn client_with(registry: &TestRegistry, credentials: Credentials, cache: Option<&Path>) -> Client {
    registry.client(credentials, cache)
}

/// A registry holding DRAGON at `team/dragon:1`, pushed by the client the fixture holds
/// (which keeps pulls in `cache`, if given).
struct DragonPushed {
    registry: TestRegistry,
    client: Client,
    tagged: Reference,
    pushed: Pushed,
}

/// [`DragonPushed`], or `None` where the registry is not installed.
async fn dragon_pushed(cache: Option<&Path>) -> Option<DragonPushed> {
    let registry = TestRegistry::anonymous()?;
    let client = client_with(&registry, Credentials::none(), cache);
    let tagged = reference(&registry.reference("team/dragon:1"));
    let pushed = client.push(&tagged, dragon()).await.unwrap();
    Some(DragonPushed {
        registry,
        client,
        tagged,
        pushed,
    })
}

/// The login of a docker config written for `registry` at `path`.
fn login_config(registry: &TestRegistry, path: &Path, user: &str, password: &str) -> Credentials {
    registry.write_docker_config(path, user, password);
    Credentials::from_docker_config_file(path).unwrap()
}

/// A tagged reference in `oci-client`'s terms.
fn oci_ref(tagged: &Reference) -> oci_client::Reference {
    oci_client::Reference::with_tag(
        tagged.registry().to_string(),
        tagged.repository().to_string(),
        tagged.tag().unwrap().to_string(),
    )
}

/// Pushes one layer of `layer_type` with a config of `config_type` to `target`, as some
/// other tool would.
async fn push_raw(
    registry: &TestRegistry,
    target: &Reference,
    layer: &[u8],
    layer_type: &str,
    config_type: &str,
) {
    let tag = target.tag().unwrap();
    registry
        .push_artifact(target.repository(), tag, layer, layer_type, config_type)
        .await;
}

#[tokio::test]
async fn a_rust_policy_pushed_by_tag_pulls_back_byte_for_byte_by_tag_and_by_digest() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let client = client_for(&registry);
    let component = dragon();
    let tagged = reference(&registry.reference("team/dragon:1.4"));

    let pushed = client.push(&tagged, component.clone()).await.unwrap();
    assert_eq!(pushed.component_digest, Digest::of(&component));
    assert_eq!(pushed.size, component.len() as u64);
    assert_eq!(pushed.reference, tagged.pinned(pushed.digest));

    let by_tag = client.pull(&tagged, LIMIT).await.unwrap();
    assert_eq!(by_tag.bytes, component);
    assert_eq!(by_tag.digest, pushed.digest);
    assert_eq!(
        by_tag.reference, pushed.reference,
        "the tag resolved to the pushed digest"
    );
    assert!(!by_tag.cached);

    let digest_only = reference(&format!(
        "{}@{}",
        registry.reference("team/dragon"),
        pushed.digest
    ));
    let by_digest = client.pull(&digest_only, LIMIT).await.unwrap();
    assert_eq!(by_digest.bytes, component);
    assert_eq!(by_digest.component_digest, pushed.component_digest);
    assert_eq!(client.resolve(&tagged).await.unwrap(), pushed.digest);
}

#[tokio::test]
async fn the_artifact_has_the_media_types_and_config_that_wkg_writes() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let tagged = reference(&registry.reference("team/dragon:1"));
    let component = dragon();
    client_for(&registry)
        .push(&tagged, component.clone())
        .await
        .unwrap();

    let raw = registry.raw_client();
    let (manifest, _, config) = raw
        .pull_manifest_and_config(&oci_ref(&tagged), &RegistryAuth::Anonymous)
        .await
        .unwrap();
    assert_eq!(
        manifest.media_type.as_deref(),
        Some("application/vnd.oci.image.manifest.v1+json")
    );
    assert_eq!(
        manifest.config.media_type,
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest.layers.len(), 1);
    assert_eq!(manifest.layers[0].media_type, "application/wasm");
    assert_eq!(manifest.layers[0].size, component.len() as i64);
    let annotations = manifest.layers[0].annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("org.opencontainers.image.title")
            .map(String::as_str),
        Some("dragon.wasm"),
        "oras pull saves the layer as this file"
    );
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(
        config["layerDigests"],
        serde_json::json!([Digest::of(&component).to_string()])
    );
    let exports = config["component"]["exports"].as_array().unwrap();
    assert!(
        exports.contains(&"switchyard:policy/incremental-scheduler@0.3.0".into()),
        "the config names the policy's export: {exports:?}"
    );
    let imports = config["component"]["imports"].as_array().unwrap();
    assert!(
        imports.contains(&"switchyard:policy/types@0.3.0".into()),
        "the config names the contract's types it imports: {imports:?}"
    );
}

#[tokio::test]
async fn a_tag_pushed_again_moves_while_the_first_digest_still_pulls_the_first_component() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let client = client_for(&registry);
    let tagged = reference(&registry.reference("team/fair:stable"));
    let first = client.push(&tagged, dragon()).await.unwrap();
    let second = client.push(&tagged, default_policy()).await.unwrap();
    assert_ne!(first.digest, second.digest);
    assert_eq!(
        client.pull(&tagged, LIMIT).await.unwrap().bytes,
        default_policy()
    );
    assert_eq!(
        client.pull(&first.reference, LIMIT).await.unwrap().bytes,
        dragon()
    );
}

#[tokio::test]
async fn with_basic_auth_the_docker_config_login_pushes_and_pulls_and_anything_else_is_refused() {
    let Some(registry) = TestRegistry::with_login("ci", "s3cret") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tagged = reference(&registry.reference("team/dragon:1"));

    // `docker login` writes the login as `auth`, base64 of user:password.
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"auths": {{"{}": {{"auth": "Y2k6czNjcmV0"}}}}}}"#,
            registry.address()
        ),
    )
    .unwrap();
    let good = client_with(
        &registry,
        Credentials::from_docker_config_file(&config).unwrap(),
        None,
    );
    let pushed = good.push(&tagged, dragon()).await.unwrap();
    assert_eq!(
        good.pull(&tagged, LIMIT).await.unwrap().digest,
        pushed.digest
    );

    let wrong = login_config(&registry, &dir.path().join("wrong.json"), "ci", "guess");
    let error = client_with(&registry, wrong, None)
        .pull(&tagged, LIMIT)
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, Error::AccessDenied { status: 401, .. }),
        "{message}"
    );
    assert!(message.contains("login `ci`"), "{message}");
    assert!(message.contains("wrong.json"), "{message}");
    assert!(message.contains(&tagged.to_string()), "{message}");

    let error = client_for(&registry)
        .push(&tagged, dragon())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::AccessDenied { .. }), "{message}");
    assert!(
        message.contains(&format!("no login for {}", registry.address())),
        "{message}"
    );
}

#[tokio::test]
async fn a_tag_or_repository_that_does_not_exist_is_not_found_naming_it() {
    let Some(DragonPushed {
        registry, client, ..
    }) = dragon_pushed(None).await
    else {
        return;
    };
    for (missing, what) in [
        ("team/dragon:2", "no tag `2` in repository `team/dragon`"),
        ("team/nothing:1", "no tag `1` in repository `team/nothing`"),
    ] {
        let missing = reference(&registry.reference(missing));
        let error = client.pull(&missing, LIMIT).await.unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, Error::NotFound { .. }), "{message}");
        assert!(message.contains(what), "{message}");
        assert!(message.contains(&missing.to_string()), "{message}");
    }
    let unknown_digest = reference(&format!(
        "{}@{}",
        registry.reference("team/dragon"),
        Digest::of(b"nothing")
    ));
    let error = client.pull(&unknown_digest, LIMIT).await.unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    assert!(error.to_string().contains("no manifest sha256:"), "{error}");
}

#[tokio::test]
async fn a_container_image_is_refused_as_not_a_component_by_its_media_type() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let image = reference(&registry.reference("team/image:1"));
    push_raw(
        &registry,
        &image,
        b"not a tarball either",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.config.v1+json",
    )
    .await;
    let error = client_for(&registry).pull(&image, LIMIT).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            &error,
            Error::NotComponent { problem: NotComponent::ConfigMediaType(t), .. }
                if t == "application/vnd.oci.image.config.v1+json"
        ),
        "{message}"
    );
    assert!(message.contains(&image.to_string()), "{message}");
    assert!(
        message.contains("application/vnd.wasm.config.v0+json"),
        "{message}"
    );
}

#[tokio::test]
async fn wasm_media_types_around_bytes_that_are_not_a_component_are_refused() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let client = client_for(&registry);
    let cases: [(&str, &[u8], NotComponent); 2] = [
        (
            "team/module:1",
            b"\0asm\x01\x00\x00\x00",
            NotComponent::CoreModule,
        ),
        ("team/text:1", b"print('hello')\n", NotComponent::NotWasm),
    ];
    for (path, bytes, problem) in cases {
        let target = reference(&registry.reference(path));
        push_raw(
            &registry,
            &target,
            bytes,
            "application/wasm",
            "application/vnd.wasm.config.v0+json",
        )
        .await;
        let error = client.pull(&target, LIMIT).await.unwrap_err();
        assert!(
            matches!(&error, Error::NotComponent { problem: p, .. } if *p == problem),
            "{error}"
        );
        // The client itself refuses to push such bytes, before sending anything.
        let other = reference(&registry.reference(&format!("{path}-again")));
        let error = client
            .push(&other, Bytes::from(bytes.to_vec()))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, Error::NotComponent { problem: p, .. } if *p == problem),
            "{error}"
        );
        let error = client.pull(&other, LIMIT).await.unwrap_err();
        assert!(
            matches!(error, Error::NotFound { .. }),
            "nothing was pushed: {error}"
        );
    }
}

#[tokio::test]
async fn a_component_changed_in_the_registry_is_refused_by_its_digest_and_not_cached() {
    let cache = tempfile::tempdir().unwrap();
    let Some(DragonPushed {
        registry,
        client,
        tagged,
        pushed,
    }) = dragon_pushed(Some(cache.path())).await
    else {
        return;
    };

    // One byte in the middle flipped: same size, same header, another digest.
    let blob = registry.blob_file(&pushed.component_digest.to_hex());
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();

    let error = client.pull(&tagged, LIMIT).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, Error::DigestMismatch { what: "component", actual, .. }
            if *actual == Digest::of(&bytes).to_string()),
        "{message}"
    );
    assert!(
        message.contains(&pushed.component_digest.to_string()),
        "{message}"
    );
    assert!(
        files_under(cache.path()).is_empty(),
        "nothing was kept: {:?}",
        files_under(cache.path())
    );
}

#[tokio::test]
async fn a_component_over_the_limit_is_refused_from_its_manifest_before_any_download() {
    let Some(DragonPushed {
        registry,
        client,
        tagged,
        pushed,
    }) = dragon_pushed(None).await
    else {
        return;
    };
    // With the blob gone from the registry's storage, only a refusal that never asked
    // for it can say how large it is.
    std::fs::remove_file(registry.blob_file(&pushed.component_digest.to_hex())).unwrap();
    let limit = pushed.size - 1;
    let error = client.pull(&tagged, limit).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, Error::TooLarge { size: Size::Exactly(s), limit: l, .. }
            if s == pushed.size && l == limit),
        "{message}"
    );
    assert!(
        message.contains(&format!("{} bytes", pushed.size)),
        "{message}"
    );
    let error = client.pull(&tagged, pushed.size).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("a blob its manifest names is missing"),
        "at the limit the pull asks for the blob, which is gone: {error}"
    );
}

#[tokio::test]
async fn a_blob_longer_than_its_manifest_declares_is_refused_when_its_length_arrives() {
    let Some(DragonPushed {
        registry,
        client,
        tagged,
        pushed,
    }) = dragon_pushed(None).await
    else {
        return;
    };
    let blob = registry.blob_file(&pushed.component_digest.to_hex());
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes.extend_from_slice(&[0; 4096]);
    std::fs::write(&blob, &bytes).unwrap();

    let error = client.pull(&tagged, LIMIT).await.unwrap_err();
    assert!(
        matches!(error, Error::SizeMismatch { declared, received: Size::Exactly(r), .. }
            if declared == pushed.size && r == pushed.size + 4096),
        "{error}"
    );
    // Under a limit between the declared and the real size, the real size is refused.
    let error = client.pull(&tagged, pushed.size + 1).await.unwrap_err();
    assert!(
        matches!(error, Error::TooLarge { size: Size::Exactly(s), .. } if s == pushed.size + 4096),
        "{error}"
    );
}

#[tokio::test]
async fn a_pinned_policy_comes_from_the_cache_once_the_registry_is_gone_but_a_tag_needs_the_registry()
 {
    let cache = tempfile::tempdir().unwrap();
    let Some(DragonPushed {
        registry,
        client,
        tagged,
        ..
    }) = dragon_pushed(Some(cache.path())).await
    else {
        return;
    };
    let first = client.pull(&tagged, LIMIT).await.unwrap();
    assert!(!first.cached);
    let address = registry.address().to_string();
    drop(registry);

    let again = client.pull(&first.reference, LIMIT).await.unwrap();
    assert!(again.cached);
    assert_eq!(again.bytes, dragon());
    assert_eq!(again.digest, first.digest);
    let error = client.pull(&tagged, LIMIT).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error, Error::Unreachable { scheme: "http", .. }),
        "{message}"
    );
    assert!(message.contains(&format!("`{address}`")), "{message}");
}

#[tokio::test]
async fn a_damaged_cache_entry_is_dropped_and_pulled_again() {
    let cache = tempfile::tempdir().unwrap();
    // Bound, not left to `..`: the registry must outlive the statement.
    let Some(DragonPushed {
        registry: _registry,
        client,
        tagged,
        pushed,
    }) = dragon_pushed(Some(cache.path())).await
    else {
        return;
    };
    client.pull(&tagged, LIMIT).await.unwrap();
    let entry = cache
        .path()
        .join("blobs/sha256")
        .join(pushed.component_digest.to_hex());
    std::fs::write(&entry, b"damaged").unwrap();

    let pulled = client.pull(&pushed.reference, LIMIT).await.unwrap();
    assert!(!pulled.cached, "the damaged entry was not trusted");
    assert_eq!(pulled.bytes, dragon());
    assert_eq!(
        std::fs::read(&entry).unwrap(),
        dragon(),
        "and it was repaired"
    );
}

#[tokio::test]
async fn tls_is_spoken_to_every_registry_not_named_insecure() {
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let tls_only = Client::new(ClientOptions::default()).unwrap();
    let tagged = reference(&registry.reference("team/dragon:1"));
    let error = tls_only.pull(&tagged, LIMIT).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            error,
            Error::Unreachable {
                scheme: "https",
                ..
            }
        ),
        "{message}"
    );
    assert!(message.contains("named insecure"), "{message}");
    let error = tls_only.push(&tagged, dragon()).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Unreachable {
                scheme: "https",
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_registry_nobody_listens_on_is_unreachable_naming_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let client = Client::new(ClientOptions {
        insecure_registries: vec![address.clone()],
        ..Default::default()
    })
    .unwrap();
    let tagged = reference(&format!("oci://{address}/team/dragon:1"));
    let error = client.pull(&tagged, LIMIT).await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::Unreachable { .. }), "{message}");
    assert!(
        message.contains(&format!("cannot reach registry `{address}`")),
        "{message}"
    );
    assert_eq!(error.metric_label(), "unreachable");
}

#[tokio::test]
async fn a_push_to_a_digest_is_refused_before_anything_is_sent() {
    let client = Client::new(ClientOptions::default()).unwrap();
    let pinned = reference(&format!(
        "oci://registry.invalid/team/dragon@{}",
        Digest::of(b"x")
    ));
    let error = client.push(&pinned, dragon()).await.unwrap_err();
    assert!(matches!(error, Error::PushToDigest { .. }), "{error}");
}

#[tokio::test]
async fn a_python_policy_goes_up_and_comes_back_byte_for_byte() {
    let Some(component) = python_policy() else {
        return;
    };
    let Some(registry) = TestRegistry::anonymous() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let client = client_with(&registry, Credentials::none(), Some(cache.path()));
    let tagged = reference(&registry.reference("team/least-loaded:py"));
    let pushed = client.push(&tagged, component.clone()).await.unwrap();
    let pulled = client.pull(&pushed.reference, LIMIT).await.unwrap();
    assert_eq!(pulled.bytes.len(), component.len());
    assert!(pulled.bytes == component, "the same bytes came back");
    assert!(client.pull(&tagged, LIMIT).await.unwrap().cached);
}

/// The Python example policy built by componentize-py, or `None` where it is not
/// installed (`host/test-support/src/componentize_py.rs`).
fn python_policy() -> Option<Bytes> {
    let tool = support::componentize_py_or_skip("the Python policy's push and pull")?;
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("least_loaded.wasm");
    support::build_python_example(&tool, &wasm);
    Some(Bytes::from(std::fs::read(&wasm).unwrap()))
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
