//! Scenarios that drive [`KubeCluster`] the way the controller does (through the
//! control loop, `advance`, `apply`, loss pushes, and the live controller's API) against
//! the scripted API server. The caches are filled by hand, standing for the reflectors,
//! so each step sees exactly the cluster the test describes. The control loop is
//! synchronous and runs on a blocking thread, so these tests run in wall time, with the
//! cluster's clock set by the test.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tower::ServiceExt as _;

use super::cluster::KubeCluster;
use super::crd::{CheckpointMethod, Phase, TrainingJob, TrainingJobStatus};
use super::fixtures::{JobBuilder, NS, event_json, node, pod, terminating};
use super::mock::{Access, Expect, MockServer};
use super::observe::Caches;
use super::scenarios::{
    PODS, actor, at, bind, create, delete, migration, placement, restarting, status_write,
};
use crate::api::{self, ApiConfig, Token};
use crate::control::{
    ActivePolicy, Cluster, ComponentStore, ControlLoop, KeepError, KeptComponent, MemoryStateStore,
    PolicySlot, StateError, StateStore, Step,
};
use crate::live::{Controller, DriverHandle, Leader, LiveCluster, LiveConfig, LossAck};
use crate::model::{Action, Assignment, MigrationKind, Operation, Trigger};
use crate::registry::PolicyRef;
use crate::runtime::{Runtime, RuntimeOptions};

/// The caches, and the writers a reflector would feed them through.
struct World {
    caches: Caches,
    nodes: Writer<Node>,
    pods: Writer<Pod>,
    jobs: Writer<TrainingJob>,
    clock: Arc<Mutex<f64>>,
}

impl World {
    fn new() -> Self {
        let (nodes_store, nodes) = reflector::store();
        let (pods_store, pods) = reflector::store();
        let (jobs_store, jobs) = reflector::store();
        Self {
            caches: Caches {
                nodes: nodes_store,
                pods: pods_store,
                jobs: jobs_store,
                usage: Arc::default(),
                loss: Arc::default(),
                changed: Arc::new(Notify::new()),
            },
            nodes,
            pods,
            jobs,
            clock: Arc::new(Mutex::new(at(0).as_second() as f64)),
        }
    }

    fn node(mut self, n: Node) -> Self {
        self.nodes.apply_watcher_event(&watcher::Event::Apply(n));
        self
    }

    fn pod(&mut self, p: Pod) {
        self.pods.apply_watcher_event(&watcher::Event::Apply(p));
        self.caches.changed.notify_one();
    }

    fn pod_gone(&mut self, p: Pod) {
        self.pods.apply_watcher_event(&watcher::Event::Delete(p));
        self.caches.changed.notify_one();
    }

    fn job(&mut self, j: &JobBuilder) {
        self.jobs
            .apply_watcher_event(&watcher::Event::Apply(j.build()));
        self.caches.changed.notify_one();
    }

    fn set_clock(&self, seconds_after: i64) {
        *self.clock.lock().unwrap() = at(seconds_after).as_second() as f64;
    }

    fn cluster(&self, client: kube::Client, leader: Leader) -> KubeCluster {
        let clock = self.clock.clone();
        KubeCluster::new(
            tokio::runtime::Handle::current(),
            client.clone(),
            self.caches.clone(),
            actor(client),
            Arc::new(leader),
        )
        .with_clock(Arc::new(move || *clock.lock().unwrap()))
    }
}

/// Runs `step` on the cluster on a blocking thread, as the controller's decision thread
/// does, and hands the cluster back.
async fn blocking<T: Send + 'static>(
    mut cluster: KubeCluster,
    step: impl FnOnce(&mut KubeCluster) -> T + Send + 'static,
) -> (KubeCluster, T) {
    tokio::task::spawn_blocking(move || {
        let out = step(&mut cluster);
        (cluster, out)
    })
    .await
    .expect("the cluster step did not panic")
}

fn status_of(job: &str) -> String {
    format!("/apis/switchyard.dev/v1alpha1/namespaces/ml/trainingjobs/{job}/status")
}

fn status_write_of(job: &str, read: &JobBuilder, wanted: Value) -> [Expect; 2] {
    [
        Expect::get(&status_of(job)).ok(read.json()),
        Expect::put(&status_of(job)).body(wanted).ok(read.json()),
    ]
}

fn event_on(job: &str, reason: &str, action: &str) -> Expect {
    Expect::post("/apis/events.k8s.io/v1/namespaces/ml/events")
        .body(json!({"reason": reason, "action": action, "type": "Normal",
            "regarding": {"kind": "TrainingJob", "name": job, "namespace": NS}}))
        .respond(201, event_json())
}

fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions::default()).expect("a runtime")
}

fn default_policy(runtime: &Runtime) -> PolicySlot {
    let module = PolicyRef::parse("default")
        .unwrap()
        .load(runtime)
        .expect("the built-in default policy");
    PolicySlot::configure(module, &Default::default()).unwrap()
}

pub async fn the_control_loop_places_a_waiting_job_through_the_cluster() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let job = JobBuilder::new("a").push_progress();
    world.job(&job);
    let mut script = vec![
        create("a-main-0-0", "a", "main-0", "main"),
        bind("a-main-0-0", "n1"),
    ];
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}],
            "conditions": [{"type": "PodsCreated", "status": "True", "reason": "Created"}]}}),
    ));
    script.push(event_on("a", "Placed", "Place"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, |cluster| {
        let slot = default_policy(&runtime());
        let mut control = ControlLoop::new(slot.clone(), slot, 0);
        let Step::Round { triggers, .. } = control.wait_for_round(cluster) else {
            panic!("the new job makes a round due");
        };
        assert!(triggers.contains(&Trigger::JobArrived("ml/a".into())));
        control.decide_round(cluster, triggers).record
    })
    .await;
    assert_eq!(record.policy, "default");
    assert_eq!(record.accepted.len(), 1, "{record:?}");
    server.finish().await
}

/// Job `a` (annotation checkpoint, 30 s grace) runs on n1; job `b` waits.
fn migrating_world() -> (World, JobBuilder, JobBuilder, Pod) {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let a = JobBuilder::new("a")
        .push_progress()
        .checkpoint(CheckpointMethod::Annotation, 30)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            ..TrainingJobStatus::default()
        });
    let b = JobBuilder::new("b").push_progress();
    let old = pod("a", "main-0", 0, Some("n1"));
    world.job(&a);
    world.job(&b);
    world.pod(old.clone());
    (world, a, b, old)
}

pub async fn a_migration_waiting_out_its_grace_period_does_not_hold_up_another_jobs_placement()
-> Vec<Access> {
    let (mut world, a, b, old) = migrating_world();
    let marked = restarting(
        &a,
        TrainingJobStatus {
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            migrated: true,
            migrations: 1,
            generation: 1,
            ..TrainingJobStatus::default()
        },
        migration("a-main-0-0", "main-0", "n2", Some(at(30))),
    );
    let mut script = Vec::new();
    script.extend(status_write(
        &a,
        json!({"status": {"restart": {"deleteAfter": "2026-01-01T00:00:30Z"}}}),
        &marked,
    ));
    script.push(Expect::patch(&format!("{PODS}/a-main-0-0")).ok(json!({})));
    script.push(create("b-main-0-0", "b", "main-0", "main"));
    script.push(bind("b-main-0-0", "n2"));
    script.extend(status_write_of(
        "b",
        &b,
        json!({"status": {"placements": [{"task": "main-0", "node": "n2"}]}}),
    ));
    script.push(event_on("b", "Placed", "Place"));
    script.push(delete("a-main-0-0", None));
    script.push(create("a-main-0-1", "a", "main-0", "main"));
    script.push(bind("a-main-0-1", "n2"));
    script.extend(status_write(
        &marked,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-1", "node": "n2"}]}}),
        &marked,
    ));
    script.push(event_on("a", "Migrated", "Migrate"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let decision = vec![
        Action {
            op: Operation::Migrate {
                job: "ml/a".into(),
                task: None,
                node: "n2".into(),
                kind: MigrationKind::Reallocate,
            },
            reason: "loss flattened".into(),
        },
        Action {
            op: Operation::Place {
                job: "ml/b".into(),
                assignments: vec![Assignment {
                    task: "main-0".into(),
                    node: "n2".into(),
                }],
            },
            reason: "fits".into(),
        },
    ];
    let started = std::time::Instant::now();
    let (cluster, ()) = blocking(cluster, move |c| c.apply(&decision, &[])).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the round did not wait out a's 30 s grace period"
    );
    assert_eq!(
        server.served(),
        8,
        "b was created, bound, recorded and announced in the same round as a's checkpoint request"
    );

    // The reflector brings the status the migration wrote; 10 s in, nothing is due.
    world.job(&marked);
    world.set_clock(10);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(10).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        8,
        "a is not deleted before its grace period is over"
    );
    world.set_clock(31);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(31).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        9,
        "the grace period is over: a's pod is deleted"
    );
    world.pod(terminating(old.clone()));
    world.set_clock(35);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(35).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        9,
        "while the reflector shows the old pod terminating, no replacement is created"
    );
    world.pod_gone(old);
    world.set_clock(40);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(40).as_second() as f64))).await;
    server.finish().await
}

pub async fn a_pushed_loss_sample_joins_the_series_read_back_from_the_status_and_is_written_to_it()
-> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let sample = |step: u64, value: f64| super::crd::LossSample {
        time: 1.0,
        step,
        value,
    };
    // As a restarted controller finds it: two samples in the status from before.
    let a = JobBuilder::new("a")
        .push_progress()
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            loss: vec![sample(100, 2.9), sample(150, 2.8)],
            ..TrainingJobStatus::default()
        });
    world.job(&a);
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let log_only = JobBuilder::new("c");
    world.job(&log_only);
    let mut script = Vec::new();
    script.extend(status_write(
        &a,
        json!({"status": {"loss": [{"step": 100, "value": 2.9}, {"step": 150, "value": 2.8},
            {"step": 200, "value": 2.5, "time": at(0).as_second() as f64}]}}),
        &a,
    ));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, acks) = blocking(cluster, |c| {
        vec![
            c.push_loss("ml/a", 200, 2.5),
            c.push_loss("ml/a", 200, 2.4),
            c.push_loss("ml/c", 1, 1.0),
        ]
    })
    .await;
    assert_eq!(acks[0], LossAck::Accepted);
    let notes: Vec<String> = acks[1..]
        .iter()
        .map(|a| match a {
            LossAck::Ignored { note } => note.clone(),
            LossAck::Accepted => panic!("{a:?} should have been ignored"),
        })
        .collect();
    assert!(notes[0].contains("step 200 is already"), "{}", notes[0]);
    assert!(notes[1].contains("progress.push"), "{}", notes[1]);
    let (cluster, snapshot) = blocking(cluster, |c| c.snapshot(Vec::new())).await;
    let steps: Vec<u64> = snapshot
        .job("ml/a")
        .unwrap()
        .loss
        .iter()
        .map(|s| s.step)
        .collect();
    assert_eq!(
        steps,
        vec![100, 150, 200],
        "the status's samples, then the pushed one"
    );
    // The next look at the caches writes the series to the status, once.
    let now = at(0).as_second() as f64;
    let (cluster, _) = blocking(cluster, move |c| c.advance(Some(now))).await;
    let (_, _) = blocking(cluster, move |c| c.advance(Some(now))).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_loop_drives_a_real_cluster_from_a_job_arrival_to_a_bound_pod() {
    the_control_loop_places_a_waiting_job_through_the_cluster().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_in_its_grace_period_leaves_the_loop_free_and_its_replacement_waits_for_the_old_pod()
 {
    a_migration_waiting_out_its_grace_period_does_not_hold_up_another_jobs_placement().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_loss_sample_reaches_the_jobs_series_and_status_after_those_read_back() {
    a_pushed_loss_sample_joins_the_series_read_back_from_the_status_and_is_written_to_it().await;
}

/// The live controller over the cluster, its router, and its decision thread.
async fn live(
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
    let router = api::router(
        controller.clone(),
        ApiConfig {
            token: Token::new("t0ken"),
            max_upload_bytes: 4 << 20,
        },
    );
    (controller, router, driver)
}

async fn stop(driver: DriverHandle) {
    tokio::task::spawn_blocking(move || driver.shutdown())
        .await
        .unwrap();
}

async fn call(router: &axum::Router, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
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

async fn until_ready(controller: &Controller) {
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
    let (client, server) = MockServer::start(
        status_write(
            &a,
            json!({"status": {"loss": [{"step": 7, "value": 0.25}]}}),
            &a,
        )
        .into(),
    );
    let (controller, router, driver) = live(
        &world,
        client,
        Leader::always("switchyard-0"),
        Box::new(MemoryStateStore),
        Arc::new(MemoryStateStore),
    )
    .await;
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
    let mut bytes = std::fs::read(env!("SWITCHYARD_TEST_GUEST_NULL")).expect("the null guest");
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
    let components = super::state::ConfigMapStateStore::new(
        tokio::runtime::Handle::current(),
        client,
        "switchyard",
        super::state::STATE_CONFIGMAP,
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
    let digest = crate::runtime::ComponentDigest::of(&bytes).to_hex();
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
async fn an_upload_too_large_for_a_configmap_is_used_and_the_answer_says_a_restart_loses_it() {
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
            && warning.contains("--policies-dir"),
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
        crate::runtime::ComponentDigest::of(&bytes)
    );
    stop(driver).await;
    server.finish().await;
}
