//! The one writer of the active policy and the parameters in kube mode: what the API
//! answered is what the state ConfigMap keeps, in the order it answered, when an
//! activation comes while a parameter change of the active policy is being persisted.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::in_cluster::{call, live, runtime, stop};
use crate::kube_support::fixtures::node;
use crate::kube_support::mock::{Expect, MockServer};
use crate::kube_support::world::World;
use switchyard_control::{
    ActivePolicy, Leader, MemoryStateStore, PolicyParameters, PolicySlot, StateError, StateStore,
};
use switchyard_core::Settings;
use switchyard_kube::{ConfigMapStateStore, STATE_CONFIGMAP};
use switchyard_runtime::{PolicyRef, Runtime};

const STATE_CM: &str = "/api/v1/namespaces/switchyard/configmaps/switchyard-state";

/// `active.json` as the controller writes it for `policy` configured with `settings`.
fn active_json(runtime: &Runtime, policy: &str, settings: &Settings) -> String {
    let module = PolicyRef::parse(policy).unwrap().load(runtime).unwrap();
    let slot = PolicySlot::configure(module, settings).unwrap();
    serde_json::to_string(&ActivePolicy {
        policy: policy.into(),
        settings: slot.settings.clone(),
    })
    .unwrap()
}

/// The state ConfigMap for the active policy and the parameters, and memory for the
/// policies' state blobs: a round may read a blob whenever the cluster gives it one, and
/// the script is about the writes the API's answers make.
struct ChoicesInConfigMap(ConfigMapStateStore);

impl StateStore for ChoicesInConfigMap {
    fn load(&self, policy: &str) -> Result<Option<Vec<u8>>, StateError> {
        MemoryStateStore.load(policy)
    }
    fn save(&self, policy: &str, blob: &[u8]) -> Result<(), StateError> {
        MemoryStateStore.save(policy, blob)
    }
    fn load_active(&self) -> Result<Option<ActivePolicy>, StateError> {
        self.0.load_active()
    }
    fn save_active(&self, active: &ActivePolicy) -> Result<(), StateError> {
        self.0.save_active(active)
    }
    fn load_parameters(&self) -> Result<PolicyParameters, StateError> {
        self.0.load_parameters()
    }
    fn save_parameters(&self, parameters: &PolicyParameters) -> Result<(), StateError> {
        self.0.save_parameters(parameters)
    }
}

fn state_configmap() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "switchyard-state", "namespace": "switchyard", "resourceVersion": "1"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activation_during_a_parameter_change_is_kept_in_the_state_configmap_after_it() {
    let runtime = runtime();
    let scoring = Settings::from([("scoring".to_string(), "most-allocated".to_string())]);
    let parameters = json!({"default": scoring}).to_string();
    let (default_with_scoring, even) = (
        active_json(&runtime, "default", &scoring),
        active_json(&runtime, "even", &Settings::new()),
    );
    let not_found = "configmaps \"switchyard-state\" not found";
    let (client, server) = MockServer::start(vec![
        // The start: the kept parameters and the active policy, none yet.
        Expect::get(STATE_CM).fail(404, "NotFound", not_found),
        Expect::get(STATE_CM).fail(404, "NotFound", not_found),
        // The parameter change of the active policy: its parameters kept (answered
        // late, so the activation arrives meanwhile), then the policy as active with them.
        Expect::patch(STATE_CM)
            .body(json!({"data": {"parameters.json": parameters}}))
            .ok(state_configmap())
            .after(Duration::from_millis(300)),
        Expect::patch(STATE_CM)
            .body(json!({"data": {"active.json": default_with_scoring}}))
            .ok(state_configmap()),
        // The activation, after it.
        Expect::patch(STATE_CM)
            .body(json!({"data": {"active.json": even}}))
            .ok(state_configmap()),
    ]);
    let store = ConfigMapStateStore::new(
        tokio::runtime::Handle::current(),
        client,
        "switchyard",
        STATE_CONFIGMAP,
    );
    let world = World::new().node(node("n1", 8));
    let (quiet, _) = MockServer::start(vec![]);
    let (controller, router, driver) = live(
        &world,
        quiet,
        Leader::always("switchyard-0"),
        Box::new(ChoicesInConfigMap(store)),
        Arc::new(MemoryStateStore),
    )
    .await;

    let set = tokio::spawn({
        let router = router.clone();
        async move {
            call(
                &router,
                "PUT",
                "/v1/policies/default/parameters",
                json!({"scoring": "most-allocated"}),
            )
            .await
        }
    });
    // The parameters are being kept: the activation comes now.
    tokio::time::timeout(Duration::from_secs(60), async {
        while server.served() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the parameters' write came");
    let (activated, applied) = call(&router, "POST", "/v1/policies/even/activate", json!({})).await;
    let (set, changed) = set.await.unwrap();
    assert_eq!(set, StatusCode::OK, "{changed}");
    assert_eq!(changed["applied"]["active"], "default", "{changed}");
    assert_eq!(activated, StatusCode::OK, "{applied}");
    assert_eq!(applied["active"], "even", "{applied}");
    assert!(
        applied["from_round"].as_u64() >= changed["applied"]["from_round"].as_u64(),
        "answered in order: {changed} then {applied}"
    );
    assert_eq!(controller.with_status(|s| s.active.clone()), "even");
    stop(driver).await;
    server.finish().await;
}
