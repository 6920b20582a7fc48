//! The live controller in kube mode (the same [`Controller`] and HTTP API as on the
//! simulator) against the scripted API server: loss samples posted to the API, a
//! follower refusing changes, uploads kept in ConfigMaps and loaded again by the next
//! leader. The caches are filled by hand, standing for the reflectors.

use crate::kube_support;
use crate::support;

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use kube_support::fixtures::{JobBuilder, node, placement, pod};
use kube_support::mock::{Expect, MockServer};
use kube_support::world::World;
use switchyard_control::{
    ActivePolicy, ComponentStore, KeepError, KeptComponent, Leader, MemoryStateStore, StateError,
    StateStore,
};
use switchyard_controller::{ApiConfig, Token};
use switchyard_controller::{Controller, DriverHandle, LiveConfig};
use switchyard_kube::{Phase, TrainingJobStatus};
use switchyard_runtime::{Runtime, RuntimeOptions};

pub(crate) fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(support::compile_cache_dir()),
        ..RuntimeOptions::default()
    })
    .expect("a runtime")
}
pub(crate) async fn live(
    world: &World,
    client: kube::Client,
    leader: Leader,
    store: Box<dyn StateStore>,
    components: Arc<dyn ComponentStore>,
) -> (Controller, axum::Router, DriverHandle) {
    let cluster = world.cluster(client, leader);
    let leader = cluster.leader();
    let (controller, driver) = tokio::task::spawn_blocking(move || {
        Controller::start(
            runtime(),
            cluster,
            LiveConfig::default(),
            store,
            components,
            leader,
        )
        .unwrap()
    })
    .await
    .unwrap();
    let router = switchyard_controller::router(
        controller.clone(),
        ApiConfig {
            token: Token::new("t0ken"),
            max_upload_bytes: 4 << 20,
            ..ApiConfig::default()
        },
    );
    (controller, router, driver)
}

/// The live controller as the one replica, leading for good, with its state in memory.
pub(crate) async fn leading(
    world: &World,
    client: kube::Client,
) -> (Controller, axum::Router, DriverHandle) {
    live(
        world,
        client,
        Leader::always("switchyard-0"),
        Box::new(MemoryStateStore),
        Arc::new(MemoryStateStore),
    )
    .await
}

pub(crate) async fn stop(driver: DriverHandle) {
    tokio::task::spawn_blocking(move || driver.shutdown())
        .await
        .unwrap();
}

pub(crate) async fn call(
    router: &axum::Router,
    method: &str,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", "Bearer t0ken")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

pub(crate) async fn until_ready(controller: &Controller) {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while !controller.is_ready() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the controller became ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loss_sample_posted_to_the_api_in_kube_mode_lands_in_the_trainingjobs_status() {
    let mut world = World::new().node(node("n1", 8));
    let a = JobBuilder::new("a")
        .push_progress()
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            ..TrainingJobStatus::default()
        });
    world.job(&a);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let (client, server) = MockServer::start(vec![
        Expect::patch("/apis/switchyard.dev/v1alpha1/namespaces/ml/trainingjobs/a/status")
            .body(json!({"status": {"loss": [{"step": 7, "value": 0.25}]}}))
            .ok(a.json()),
    ]);
    let (controller, router, driver) = leading(&world, client).await;
    until_ready(&controller).await;
    let (status, body) = call(
        &router,
        "POST",
        "/v1/jobs/ml%2Fa/loss",
        json!({"step": 7, "value": 0.25}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["outcome"], "accepted");
    server.finish().await;
    stop(driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_answers_reads_and_refuses_changes_naming_the_leader() {
    let world = World::new().node(node("n1", 8));
    let follower = Leader::elected("switchyard-1");
    follower.follow(Some("switchyard-0".into()));
    // A follower makes no request at all.
    let (client, server) = MockServer::start(vec![]);
    let (controller, router, driver) = live(
        &world,
        client,
        follower,
        Box::new(MemoryStateStore),
        Arc::new(MemoryStateStore),
    )
    .await;
    until_ready(&controller).await;
    let (status, body) = call(&router, "GET", "/v1/status", Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (body["leading"].clone(), body["leader"].clone()),
        (json!(false), json!("switchyard-0"))
    );
    let (status, body) = call(&router, "POST", "/v1/policies/even/activate", json!({})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains("not the leader") && message.contains("switchyard-0"),
        "{message}"
    );
    assert_eq!(controller.status().active, "default", "nothing changed");
    stop(driver).await;
    server.finish().await;
}

/// A store that keeps only which policy is active and the kept uploads, shared with the
/// test (standing for the ConfigMaps another replica writes).
#[derive(Clone, Default)]
struct Remembered {
    active: Arc<Mutex<Option<ActivePolicy>>>,
    components: Arc<Mutex<Vec<KeptComponent>>>,
}

impl ComponentStore for Remembered {
    fn keep(&self, policy: &str, bytes: &[u8]) -> Result<String, KeepError> {
        let location = format!("memory:{policy}");
        self.components.lock().unwrap().push(KeptComponent {
            location: location.clone(),
            bytes: bytes.to_vec(),
        });
        Ok(location)
    }
    fn kept(&self) -> Vec<Result<KeptComponent, StateError>> {
        self.components
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .map(Ok)
            .collect()
    }
}

impl StateStore for Remembered {
    fn load(&self, _: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(None)
    }
    fn save(&self, _: &str, _: &[u8]) -> Result<(), StateError> {
        Ok(())
    }
    fn load_active(&self) -> Result<Option<ActivePolicy>, StateError> {
        Ok(self.active.lock().unwrap().clone())
    }
    fn save_active(&self, active: &ActivePolicy) -> Result<(), StateError> {
        *self.active.lock().unwrap() = Some(active.clone());
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_becomes_leader_resumes_the_policy_the_previous_leader_persisted() {
    let world = World::new().node(node("n1", 8));
    let store = Remembered::default();
    let (client, server) = MockServer::start(vec![]);
    let (controller, _, driver) = live(
        &world,
        client,
        Leader::elected("switchyard-1"),
        Box::new(store.clone()),
        Arc::new(MemoryStateStore),
    )
    .await;
    until_ready(&controller).await;
    assert_eq!(controller.status().active, "default");
    // Meanwhile the leader activated `even` and persisted it; then its Lease passes here.
    *store.active.lock().unwrap() = Some(ActivePolicy {
        policy: "even".into(),
        settings: Default::default(),
    });
    controller
        .leader()
        .lead_until(tokio::time::Instant::now() + std::time::Duration::from_secs(60));
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while controller.status().active != "even" {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the new leader resumed the persisted policy");
    stop(driver).await;
    server.finish().await;
}

/// The null test guest with a custom section of `pad` bytes appended: still a valid
/// component, as large as a test needs.
fn null_guest_padded(pad: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(support::guest("null")).expect("the null guest");
    if pad == 0 {
        return bytes;
    }
    let mut section = vec![7];
    section.extend(b"padding");
    section.resize(section.len() + pad, 0);
    bytes.push(0);
    let mut size = section.len();
    loop {
        let low = (size & 0x7f) as u8;
        size >>= 7;
        bytes.push(if size == 0 { low } else { low | 0x80 });
        if size == 0 {
            break;
        }
    }
    bytes.extend(section);
    bytes
}

async fn upload(router: &axum::Router, bytes: Vec<u8>) -> (StatusCode, Value) {
    let request = Request::builder()
        .method("POST")
        .uri("/v1/policies")
        .header("authorization", "Bearer t0ken")
        .header("content-type", "application/wasm")
        .body(Body::from(bytes))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

const STATE_CM: &str = "/api/v1/namespaces/switchyard/configmaps/switchyard-state";
const NULL_CM: &str = "/api/v1/namespaces/switchyard/configmaps/switchyard-state-component-null";

fn configmap_json(name: &str, data: Value) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "switchyard", "resourceVersion": "1"}});
    cm.as_object_mut()
        .unwrap()
        .extend(data.as_object().unwrap().clone());
    cm
}

/// The live controller in kube mode whose uploads are kept through `client` (the state
/// blobs stay in memory, so only the components' requests reach the script).
async fn live_keeping_uploads(
    world: &World,
    client: kube::Client,
) -> (Controller, axum::Router, DriverHandle) {
    let components = switchyard_kube::ConfigMapStateStore::new(
        tokio::runtime::Handle::current(),
        client,
        "switchyard",
        switchyard_kube::STATE_CONFIGMAP,
    );
    let (quiet, _) = MockServer::start(vec![]);
    live(
        world,
        quiet,
        Leader::always("switchyard-0"),
        Box::new(MemoryStateStore),
        Arc::new(components),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_in_kube_mode_is_kept_in_its_own_configmap_and_the_next_controller_loads_it() {
    let world = World::new().node(node("n1", 8));
    let bytes = null_guest_padded(0);
    let encoded = serde_json::to_value(k8s_openapi::ByteString(bytes.clone())).unwrap();
    let digest = switchyard_core::ComponentDigest::of(&bytes).to_hex();
    let entry = format!(
        r#"{{"policy":"null","configmap":"switchyard-state-component-null","key":"null.wasm","digest":"{digest}"}}"#
    );
    let not_found = |name: &str| format!("configmaps \"{name}\" not found");
    let (client, server) = MockServer::start(vec![
        // Start: nothing kept yet.
        Expect::get(STATE_CM).fail(404, "NotFound", &not_found("switchyard-state")),
        // The upload: the component's own ConfigMap, then its index entry.
        Expect::patch(NULL_CM)
            .body(json!({"binaryData": {"null.wasm": encoded}}))
            .fail(
                404,
                "NotFound",
                &not_found("switchyard-state-component-null"),
            ),
        Expect::post("/api/v1/namespaces/switchyard/configmaps")
            .body(
                json!({"metadata": {"name": "switchyard-state-component-null"},
                "binaryData": {"null.wasm": encoded}}),
            )
            .respond(
                201,
                configmap_json("switchyard-state-component-null", json!({})),
            ),
        Expect::patch(STATE_CM)
            .body(json!({"data": {"null.component.json": entry}}))
            .ok(configmap_json("switchyard-state", json!({}))),
    ]);
    let (controller, router, driver) = live_keeping_uploads(&world, client).await;
    let (status, body) = upload(&router, bytes.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["persistence"],
        json!({"survives_restart": true,
            "location": "ConfigMap switchyard/switchyard-state-component-null", "warning": null})
    );
    assert_eq!(body["policy"]["digest"], digest);
    stop(driver).await;
    drop(controller);
    server.finish().await;

    // The next controller (a restart, or another replica) reads the index and the
    // ConfigMap it names.
    let (client, server) = MockServer::start(vec![
        Expect::get(STATE_CM).ok(configmap_json(
            "switchyard-state",
            json!({"data": {"null.component.json": entry}}),
        )),
        Expect::get(NULL_CM).ok(configmap_json(
            "switchyard-state-component-null",
            json!({"binaryData": {"null.wasm": encoded}}),
        )),
    ]);
    let (controller, router, driver) = live_keeping_uploads(&world, client).await;
    server.finish().await;
    let (_, list) = call(&router, "GET", "/v1/policies", Value::Null).await;
    let null = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "null")
        .unwrap_or_else(|| panic!("the kept upload is loaded again: {list}"));
    assert_eq!(null["digest"], digest);
    assert_eq!(
        null["source"],
        "kept:ConfigMap switchyard/switchyard-state-component-null"
    );
    assert!(controller.catalog().failures().is_empty());
    stop(driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_too_large_for_a_configmap_is_used_and_the_answer_says_a_restart_loses_it_and_names_the_registry_way()
 {
    let world = World::new().node(node("n1", 8));
    let bytes = null_guest_padded(1 << 20);
    let (client, server) = MockServer::start(vec![
        Expect::get(STATE_CM).fail(404, "NotFound", "configmaps \"switchyard-state\" not found"),
        // Nothing older of that name may come back after a restart.
        Expect::patch(STATE_CM)
            .body(json!({"data": {"null.component.json": null}}))
            .ok(configmap_json("switchyard-state", json!({}))),
        Expect::patch(NULL_CM)
            .body(json!({"binaryData": {"null.wasm": null}}))
            .fail(
                404,
                "NotFound",
                "configmaps \"switchyard-state-component-null\" not found",
            ),
    ]);
    let (controller, router, driver) = live_keeping_uploads(&world, client).await;
    let (status, body) = upload(&router, bytes).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["persistence"]["survives_restart"], false, "{body}");
    let warning = body["persistence"]["warning"].as_str().unwrap();
    assert!(
        warning.contains("more than a ConfigMap can hold")
            && warning.contains("restart")
            && warning.contains("switchyard policy push FILE.wasm oci://")
            && warning.contains("ctl upload oci://"),
        "{warning}"
    );
    server.finish().await;
    let (status, applied) = call(&router, "POST", "/v1/policies/null/activate", json!({})).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the upload is used all the same: {applied}"
    );
    let (status, metrics) = {
        let request = Request::get("/metrics").body(Body::empty()).unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    };
    assert_eq!(status, StatusCode::OK);
    assert!(
        metrics.contains("switchyard_policy_uploads_not_kept_total{reason=\"too-large\"} 1"),
        "{metrics}"
    );
    assert_eq!(controller.status().active, "null");
    stop(driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_becomes_leader_loads_the_upload_the_previous_leader_kept_and_resumes_it() {
    let world = World::new().node(node("n1", 8));
    let store = Remembered::default();
    let (client, server) = MockServer::start(vec![]);
    let (controller, _, driver) = live(
        &world,
        client,
        Leader::elected("switchyard-1"),
        Box::new(store.clone()),
        Arc::new(store.clone()),
    )
    .await;
    until_ready(&controller).await;
    assert!(controller.catalog().get("null").is_err());
    // Meanwhile the leader accepted an upload, kept it and made it active.
    let bytes = null_guest_padded(0);
    store.keep("null", &bytes).unwrap();
    *store.active.lock().unwrap() = Some(ActivePolicy {
        policy: "null".into(),
        settings: Default::default(),
    });
    controller
        .leader()
        .lead_until(tokio::time::Instant::now() + std::time::Duration::from_secs(60));
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while controller.status().active != "null" {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the new leader loaded the kept upload and resumed it");
    let entry = controller.catalog().get("null").unwrap();
    assert_eq!(
        entry.slot.module.digest(),
        switchyard_core::ComponentDigest::of(&bytes)
    );
    stop(driver).await;
    server.finish().await;
}

/// Job `a` on one node, and the API server's script for its one pod: created, its
/// release denied by an admission webhook (GPU quota), the pod deleted, the job's status
/// updated and a Warning Event written.
fn a_release_refused_by_a_webhook() -> (World, Vec<Expect>) {
    use kube_support::fixtures::{EVENTS, NS, PODS, budget, create, delete, event_json, service};
    let mut world = World::new().node(node("n1", 8));
    let job = JobBuilder::new("a");
    world.job(&job);
    let status = "/apis/switchyard.dev/v1alpha1/namespaces/ml/trainingjobs/a/status";
    let script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main"),
        Expect::patch(&format!("{PODS}/a-main-0-0")).fail(
            400,
            "BadRequest",
            "admission webhook \"gpu-quota.example.com\" denied the request: team ml is over its GPU quota",
        ),
        delete("a-main-0-0", None),
        Expect::get(status).ok(job.json()),
        Expect::put(status).ok(job.json()),
        Expect::post(EVENTS)
            .body(json!({"type": "Warning", "reason": "PlacementFailed",
                "note": "admission-refused: *", "regarding": {"name": "a", "namespace": NS}}))
            .respond(201, event_json()),
    ];
    (world, script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_an_admission_webhook_denies_shows_as_failed_in_the_decisions_metrics_and_events()
{
    let (world, script) = a_release_refused_by_a_webhook();
    let (client, server) = MockServer::start(script);
    let (controller, router, driver) = leading(&world, client).await;
    until_ready(&controller).await;
    let failed = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            let (_, body) = call(&router, "GET", "/v1/decisions", Value::Null).await;
            let failed: Vec<Value> = body["decisions"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|d| d["failed"].as_array().cloned().unwrap_or_default())
                .collect();
            if !failed.is_empty() {
                return failed;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the round was decided and recorded");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["op"], "place");
    assert_eq!(failed[0]["job"], "ml/a");
    assert_eq!(failed[0]["failure"], "admission-refused");
    let because = failed[0]["failed_because"].as_str().unwrap();
    assert!(because.contains("over its GPU quota"), "{because}");
    let request = Request::builder()
        .uri("/metrics")
        .body(Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let text = String::from_utf8(
        axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(
        text.contains(
            "switchyard_failed_actions_total{policy=\"default\",operation=\"place\",reason=\"admission-refused\"} 1"
        ),
        "{text}"
    );
    stop(driver).await;
    server.finish().await;
}

/// The Kubernetes controller records through the control loop's observer, as the
/// simulated one does: the job's arrival with its spec, and the decision with its
/// failed bind and the API server's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_in_kube_mode_records_what_it_sees_and_does() {
    use switchyard_control::{RecordOptions, Recording};
    let (world, script) = a_release_refused_by_a_webhook();
    let (client, server) = MockServer::start(script);
    let dir = tempfile::tempdir().unwrap();
    let config = LiveConfig {
        record: Some(RecordOptions {
            dir: dir.path().to_path_buf(),
            max_bytes: 64 << 20,
            cluster: "kube".into(),
            seed: 0,
        }),
        ..LiveConfig::default()
    };
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let leader = cluster.leader();
    let (controller, driver) = tokio::task::spawn_blocking(move || {
        Controller::start(
            runtime(),
            cluster,
            config,
            Box::new(MemoryStateStore),
            Arc::new(MemoryStateStore),
            leader,
        )
        .unwrap()
    })
    .await
    .unwrap();
    until_ready(&controller).await;
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while !controller
            .status()
            .decisions
            .iter()
            .any(|d| !d.arm_a.failed.is_empty())
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the round was decided");
    stop(driver).await;
    server.finish().await;

    let recording = Recording::open(dir.path()).unwrap();
    let rounds: Vec<_> = recording.rounds().map(Result::unwrap).collect();
    let first = &rounds[0];
    assert_eq!(first.header.cluster, "kube");
    assert_eq!(first.policy.active.name, "default");
    assert!(first.record.changes.reset);
    let arrived = first.record.changes.jobs.iter().find(|j| j.id == "ml/a");
    let arrived = arrived.expect("the job arrives in the recording with its spec");
    assert_eq!(arrived.tasks.len(), 1);
    assert_eq!(arrived.tasks[0].role, "main");
    assert_eq!(first.snapshot.nodes[0].name, "n1");
    let failed: Vec<_> = rounds
        .iter()
        .flat_map(|r| &r.record.decision.arm_a.failed)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].action.op.job(), "ml/a");
    assert!(failed[0].failed_because.contains("over its GPU quota"));
}
