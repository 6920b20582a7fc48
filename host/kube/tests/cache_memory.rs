//! How much memory the pod caches hold at 50,000 pods, measured with a counting
//! allocator against the scripted API server: LISTs of pods as an API server sends them
//! (field managers, environment, volumes, statuses; one in ten the controller's), kept
//! whole in one store as before, trimmed in one store, and as the caches keep them now
//! (the controller's pods trimmed, the others as charges). Ignored by default (it takes
//! minutes and gigabytes of scratch); the figures are in `docs/performance.md`:
//!
//! ```sh
//! cargo test -p switchyard-kube --test cache_memory -- --ignored --nocapture
//! ```

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use switchyard_kube::Charges;
use switchyard_kube::{reflect, trim_pod};
use tokio::sync::Notify;

use support::mock::{Expect, MockServer};
use switchyard_test_support::{CountingAllocator, process_live_bytes};

// The caches are filled by tasks on the runtime's worker threads: the figure is the
// process's.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Pods listed: `CACHE_MEMORY_PODS`, 50,000 unless set.
fn pods() -> usize {
    std::env::var("CACHE_MEMORY_PODS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50_000)
}

/// Pod `i` as an API server lists it: every tenth one a training pod of the
/// controller's, the others a web Deployment's, all bound and running.
fn pod(i: usize) -> Value {
    let ours = i.is_multiple_of(10);
    let (name, labels) = if ours {
        (
            format!("job{}-worker-{}-0", i / 40, i / 10 % 4),
            json!({"switchyard.dev/job": format!("job{}", i / 40), "switchyard.dev/task": format!("worker-{}", i / 10 % 4),
                "switchyard.dev/role": "worker", "switchyard.dev/job-uid": format!("uid-job{}", i / 40),
                "switchyard.dev/generation": "0"}),
        )
    } else {
        (
            format!("web-7d9f8b6c5-{i:05}"),
            json!({"app": "web", "pod-template-hash": "7d9f8b6c5", "tier": "frontend"}),
        )
    };
    let field_manager = |manager: &str, fields: Value| {
        json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
    };
    let conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-01-01T00:00:02Z"}))
    .collect();
    json!({
        "metadata": {"name": name, "namespace": if ours { "ml" } else { "web" },
            "uid": format!("6f1c2a4e-0000-4000-8000-{i:012}"), "resourceVersion": format!("{}", 1000 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z", "labels": labels,
            "generateName": "web-7d9f8b6c5-",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5",
                "uid": "0b9f1f7e-1111-4111-8111-000000000001", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                field_manager("kube-controller-manager", json!({"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                    "f:ownerReferences": {".": {}, "k:{\"uid\":\"0b9f1f7e\"}": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:env": {}, "f:image": {}, "f:imagePullPolicy": {},
                        "f:name": {}, "f:ports": {}, "f:resources": {"f:limits": {}, "f:requests": {}}, "f:terminationMessagePath": {}}},
                    "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
                    "f:terminationGracePeriodSeconds": {}}})),
                field_manager("kubelet", json!({"f:status": {"f:conditions": {"k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {},
                    "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}, "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}},
                    "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {}}}))
            ]},
        "spec": {
            "nodeName": format!("node-{:04}", i % 1000),
            "schedulerName": if ours { "switchyard" } else { "default-scheduler" },
            "containers": [{"name": "app", "image": "registry.example.com/team/web:1.27.3",
                "args": ["--port=8080", "--log-level=info"],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability:4317"}],
                "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]}],
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0, "securityContext": {}},
        "status": {"phase": "Running", "hostIP": "10.0.3.17", "podIP": format!("10.244.{}.{}", i / 250 % 250, i % 250),
            "podIPs": [{"ip": format!("10.244.{}.{}", i / 250 % 250, i % 250)}], "hostIPs": [{"ip": "10.0.3.17"}],
            "startTime": "2026-01-01T00:00:01Z", "qosClass": "Burstable",
            "conditions": conditions,
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "started": true,
                "image": "registry.example.com/team/web:1.27.3",
                "imageID": "registry.example.com/team/web@sha256:4b1c0e5f8e2d3a1b9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b",
                "containerID": "containerd://9c1d3f0b7e2a4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d",
                "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}, "lastState": {},
                "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": true, "recursiveReadOnly": "Disabled"}]}]}
    })
}

fn live() -> isize {
    process_live_bytes()
}

/// A PodList of `pods` as the scripted server answers it.
fn listed(pods: impl Iterator<Item = Value>) -> String {
    serde_json::to_string(&json!({"apiVersion": "v1", "kind": "PodList",
        "metadata": {"resourceVersion": "100000"},
        "items": pods.collect::<Vec<_>>()}))
    .unwrap()
}

/// Serves `list` as the first list of a pod watch, then a watch that stays open.
fn serving(list: &str) -> (kube::Client, MockServer) {
    MockServer::start(vec![
        Expect::get("/api/v1/pods?*").text(list),
        Expect::get("/api/v1/pods?*")
            .query_has(&["watch=true"])
            .after(Duration::from_secs(3600))
            .text(""),
    ])
}

async fn until(mut done: impl FnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(3600), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the pods were listed");
}

/// The bytes live after `fill` has built what it returns and everything else it made
/// is freed, and the JSON size of what it holds.
async fn held<T, F: std::future::Future<Output = (T, usize)>>(
    fill: impl FnOnce() -> F,
) -> (isize, usize) {
    let before = live();
    let (kept, json) = fill().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let bytes = live() - before;
    drop(kept);
    (bytes, json)
}

/// Lists `pods` into a reflector's store, each through `trim`.
async fn in_a_store(pods: Vec<Value>, trim: fn(&mut Pod)) -> (impl Sized, usize) {
    let count = pods.len();
    let list = listed(pods.into_iter());
    let (client, server) = serving(&list);
    drop(list);
    let (store, driver) = reflect(
        Api::<Pod>::all(client),
        watcher::Config::default(),
        trim,
        Arc::new(Notify::new()),
    );
    let task = tokio::spawn(driver);
    until(|| store.state().len() == count).await;
    server.finish().await;
    task.abort();
    let _ = task.await;
    let json = store
        .state()
        .iter()
        .map(|p| serde_json::to_vec(&**p).unwrap().len())
        .sum();
    (store, json)
}

/// Lists `pods` into [`Charges`].
async fn as_charges(pods: Vec<Value>) -> (impl Sized, usize) {
    let count = pods.len();
    let list = listed(pods.into_iter());
    let (client, server) = serving(&list);
    drop(list);
    let charges = Charges::default();
    let task = tokio::spawn(switchyard_kube::watch_charges(
        Api::<Pod>::all(client),
        watcher::Config::default(),
        charges.clone(),
        Arc::new(Notify::new()),
    ));
    until(|| charges.listed() && charges.len() == count).await;
    server.finish().await;
    task.abort();
    let _ = task.await;
    (charges, 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run it with --ignored --nocapture"]
async fn the_caches_hold_50_000_pods_in_a_fraction_of_what_whole_pods_take() {
    let mib = |b: isize| b as f64 / (1 << 20) as f64;
    let count = pods();
    let all = || (0..count).map(pod);
    let ours = || all().filter(|p| p["metadata"]["labels"]["switchyard.dev/job"].is_string());
    let others = || all().filter(|p| !p["metadata"]["labels"]["switchyard.dev/job"].is_string());
    let started = std::time::Instant::now();
    let (whole, whole_json) = held(|| in_a_store(all().collect(), |_| {})).await;
    let (trimmed, trimmed_json) = held(|| in_a_store(all().collect(), trim_pod)).await;
    let (own, own_json) = held(|| in_a_store(ours().collect(), trim_pod)).await;
    let (charged, _) = held(|| as_charges(others().collect())).await;
    let (n_ours, n_others) = (ours().count(), others().count());
    let per = |bytes: isize, n: usize| bytes / n.max(1) as isize;
    println!("{count} pods ({n_ours} the controller's, {n_others} other schedulers'):");
    println!(
        "  every pod whole in one store: {:.1} MiB ({} B/pod; {:.1} MiB as JSON)",
        mib(whole),
        per(whole, count),
        mib(whole_json as isize)
    );
    println!(
        "  every pod trimmed in one store: {:.1} MiB ({} B/pod; {:.1} MiB as JSON)",
        mib(trimmed),
        per(trimmed, count),
        mib(trimmed_json as isize)
    );
    println!(
        "  the controller's pods trimmed: {:.1} MiB ({} B/pod; {:.1} MiB as JSON)",
        mib(own),
        per(own, n_ours),
        mib(own_json as isize)
    );
    println!(
        "  other pods as charges: {:.1} MiB ({} B/pod)",
        mib(charged),
        per(charged, n_others)
    );
    println!(
        "  the caches as kept: {:.1} MiB (measured in {:.0?})",
        mib(own + charged),
        started.elapsed()
    );
    assert!(
        (own + charged) * 10 < whole,
        "the caches keep less than a tenth of the whole pods"
    );
}
