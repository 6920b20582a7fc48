//! Policy state blobs, the active policy and kept uploads in ConfigMaps.

use serde_json::json;
use switchyard_control::{ActivePolicy, ComponentStore, KeepError, KeptComponent, StateStore};
use switchyard_core::ComponentDigest;
use tokio::runtime::Handle;

use crate::support::mock::{Access, Expect, MockServer};
use switchyard_kube::*;

const CM: &str = "/api/v1/namespaces/switchyard/configmaps/switchyard-state";

fn config_map(data: serde_json::Value) -> serde_json::Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "switchyard-state", "namespace": "switchyard", "resourceVersion": "3"}});
    cm.as_object_mut()
        .unwrap()
        .extend(data.as_object().unwrap().clone());
    cm
}

/// Saves a blob and the active policy into a ConfigMap that does not exist yet, and
/// reads both back as a restarted controller would.
pub(crate) async fn state_survives_in_a_configmap() -> Vec<Access> {
    let active = r#"{"policy":"specon","settings":{"alpha":"0.1"}}"#;
    let full = config_map(
        json!({"binaryData": {"specon.state": "AQID"}, "data": {"active.json": active}}),
    );
    let (client, server) = MockServer::start(vec![
        Expect::get(CM).fail(404, "NotFound", "configmaps \"switchyard-state\" not found"),
        Expect::patch(CM)
            .body(json!({"binaryData": {"specon.state": "AQID"}}))
            .fail(404, "NotFound", "configmaps \"switchyard-state\" not found"),
        Expect::post("/api/v1/namespaces/switchyard/configmaps")
            .body(
                json!({"metadata": {"name": "switchyard-state", "namespace": "switchyard"},
                "binaryData": {"specon.state": "AQID"}}),
            )
            .respond(
                201,
                config_map(json!({"binaryData": {"specon.state": "AQID"}})),
            ),
        Expect::patch(CM)
            .body(json!({"data": {"active.json": active}}))
            .ok(full.clone()),
        Expect::get(CM).ok(full.clone()),
        Expect::get(CM).ok(full),
    ]);
    let store = ConfigMapStateStore::new(Handle::current(), client, "switchyard", STATE_CONFIGMAP);
    tokio::task::spawn_blocking(move || {
        assert_eq!(store.load("specon").unwrap(), None, "nothing saved yet");
        store.save("specon", &[1, 2, 3]).unwrap();
        let saved = ActivePolicy {
            policy: "specon".into(),
            settings: [("alpha".to_string(), "0.1".to_string())].into(),
        };
        store.save_active(&saved).unwrap();
        assert_eq!(store.load("specon").unwrap(), Some(vec![1, 2, 3]));
        assert_eq!(store.load_active().unwrap(), Some(saved));
    })
    .await
    .unwrap();
    server.finish().await
}

const COMPONENT_CM: &str =
    "/api/v1/namespaces/switchyard/configmaps/switchyard-state-component-null";

fn component_configmap(binary_data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "switchyard-state-component-null", "namespace": "switchyard",
            "resourceVersion": "4"},
        "binaryData": binary_data})
}

/// Keeps an upload in a ConfigMap of its own and indexes it in the state ConfigMap,
/// reads it back as a restarted controller would, refuses one that does not fit (and
/// removes an older copy's index entry and bytes), and reports a component whose
/// digest is not the one indexed.
pub(crate) async fn components_survive_in_configmaps() -> Vec<Access> {
    let digest = ComponentDigest::of(&[1, 2, 3]).to_hex();
    let entry = format!(
        r#"{{"policy":"null","configmap":"switchyard-state-component-null","key":"null.wasm","digest":"{digest}"}}"#
    );
    let wrong = entry.replace(&digest, "sha256:0000");
    let indexed = |entry: &str| {
        config_map(
            json!({"data": {"active.json": r#"{"policy":"null","settings":{}}"#,
            "null.component.json": entry}}),
        )
    };
    let (client, server) = MockServer::start(vec![
        Expect::patch(COMPONENT_CM)
            .body(
                json!({"metadata": {"annotations": {"switchyard.dev/policy": "null",
                "switchyard.dev/digest": digest}},
                "binaryData": {"null.wasm": "AQID"}}),
            )
            .fail(
                404,
                "NotFound",
                "configmaps \"switchyard-state-component-null\" not found",
            ),
        Expect::post("/api/v1/namespaces/switchyard/configmaps")
            .body(
                json!({"metadata": {"name": "switchyard-state-component-null",
                "namespace": "switchyard",
                "labels": {"app.kubernetes.io/name": "switchyard"},
                "annotations": {"switchyard.dev/policy": "null", "switchyard.dev/digest": digest}},
                "binaryData": {"null.wasm": "AQID"}}),
            )
            .respond(201, component_configmap(json!({"null.wasm": "AQID"}))),
        Expect::patch(CM)
            .body(json!({"data": {"null.component.json": entry}}))
            .ok(indexed(&entry)),
        // A restart reads the index, then each component it names.
        Expect::get(CM).ok(indexed(&entry)),
        Expect::get(COMPONENT_CM).ok(component_configmap(json!({"null.wasm": "AQID"}))),
        // Too large: the older copy's index entry goes, then its bytes.
        Expect::patch(CM)
            .body(json!({"data": {"null.component.json": null}}))
            .ok(config_map(json!({}))),
        Expect::patch(COMPONENT_CM)
            .body(json!({"binaryData": {"null.wasm": null}}))
            .ok(component_configmap(json!({}))),
        Expect::get(CM).ok(indexed(&wrong)),
        Expect::get(COMPONENT_CM).ok(component_configmap(json!({"null.wasm": "AQID"}))),
    ]);
    let store = ConfigMapStateStore::new(Handle::current(), client, "switchyard", STATE_CONFIGMAP);
    tokio::task::spawn_blocking(move || {
        let place = "ConfigMap switchyard/switchyard-state-component-null";
        assert_eq!(store.keep("null", &[1, 2, 3]).unwrap(), place);
        let kept: Vec<_> = store.kept().into_iter().map(Result::unwrap).collect();
        assert_eq!(
            kept,
            vec![KeptComponent {
                location: place.into(),
                bytes: vec![1, 2, 3],
            }]
        );
        let python_sized = vec![0; 18 << 20];
        let error = store.keep("null", &python_sized).unwrap_err();
        assert!(
            matches!(error, KeepError::TooLarge { size, .. } if size == 18 << 20),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains("restart")
                && message.contains("switchyard policy push FILE.wasm oci://")
                && message.contains("ctl upload oci://"),
            "{message}"
        );
        let kept = store.kept();
        let error = kept[0].as_ref().unwrap_err();
        assert_eq!(error.place(), place);
        assert!(error.to_string().contains("sha256:0000"), "{error}");
    })
    .await
    .unwrap();
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_kept_in_a_configmap_of_its_own_indexed_in_the_state_and_read_back() {
    components_survive_in_configmaps().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_state_and_the_active_policy_are_kept_in_a_configmap_a_restart_reads_back() {
    state_survives_in_a_configmap().await;
}

#[test]
fn a_policy_name_becomes_a_valid_configmap_key() {
    assert_eq!(ConfigMapStateStore::key_of("spe/con:1"), "spe_con_1.state");
}
