//! The snapshot from the caches: the reflectors' watches (a dropped watch resumes where it
//! left off), every pod counted on its node, usage from the metrics server when one
//! serves, loss samples from the followed training log.
//!
//! Each scenario drives the real backend code against the scripted API server and returns
//! what it accessed, so the RBAC test can check `deploy/rbac.yaml` against the union of
//! them. Tests run with paused time, so grace periods and back-off pass at once while
//! their order is still checked.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use switchyard_core::{JobPhase, TaskPhase};
use switchyard_kube::Caches;
use switchyard_kube::LogPattern;
use switchyard_kube::{TrainingJob, TrainingJobStatus};
use switchyard_kube::{trim_job, trim_node, trim_pod};
use tokio::sync::Notify;

use crate::releases::gang;
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};

/// Serves one LIST and one WATCH of `path`, then waits for the store to hold `expect` objects.
pub(crate) async fn reflect<K>(
    api: impl FnOnce(kube::Client) -> Api<K>,
    path: &str,
    trim: fn(&mut K),
    items: Vec<Value>,
) -> (kube::runtime::reflector::Store<K>, Vec<Access>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let count = items.len();
    let (client, server) = MockServer::start(vec![
        Expect::get(path).query_has(&[]).ok(json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "10"}, "items": items})),
        Expect::get(path).query_has(&["watch=true", "resourceVersion=10"]).text(""),
        // The watcher comes back at once; that watch stays open until the test ends.
        Expect::get(path)
            .query_has(&["watch=true"])
            .after(std::time::Duration::from_secs(3600))
            .text(""),
    ]);
    let (store, driver) = switchyard_kube::reflect(
        api(client),
        watcher::Config::default(),
        trim,
        Arc::new(Notify::new()),
    );
    let task = tokio::spawn(driver);
    let seen = server.finish().await;
    wait_for(|| store.state().len() == count).await;
    task.abort();
    (store, seen)
}

async fn wait_for(mut condition: impl FnMut() -> bool) {
    tokio::time::timeout(crate::support::mock::TIMEOUT, async {
        while !condition() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the caches caught up");
}

pub(crate) async fn a_dropped_node_watch_restarts_where_it_left_off() -> Vec<Access> {
    let n1 = serde_json::to_value(node("n1", 8)).unwrap();
    let mut n2 = serde_json::to_value(node("n2", 16)).unwrap();
    n2["metadata"]["resourceVersion"] = json!("11");
    let mut cordoned = n1.clone();
    cordoned["metadata"]["resourceVersion"] = json!("12");
    cordoned["spec"] = json!({"unschedulable": true});
    let (client, server) = MockServer::start(vec![
        Expect::get("/api/v1/nodes?*").ok(json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "10"}, "items": [n1]})),
        // The first watch delivers one event, then the server drops the connection.
        Expect::get("/api/v1/nodes?*")
            .query_has(&["watch=true", "resourceVersion=10"])
            .text(&format!("{}\n", json!({"type": "ADDED", "object": n2}))),
        // The watcher comes back from the last version it saw, without listing again.
        Expect::get("/api/v1/nodes?*")
            .query_has(&["watch=true", "resourceVersion=11"])
            .text(&format!("{}\n", json!({"type": "MODIFIED", "object": cordoned}))),
        Expect::get("/api/v1/nodes?*")
            .query_has(&["watch=true", "resourceVersion=12"])
            .after(std::time::Duration::from_secs(3600))
            .text(""),
    ]);
    let changed = Arc::new(Notify::new());
    let (store, driver) = switchyard_kube::reflect(
        Api::<Node>::all(client),
        watcher::Config::default(),
        trim_node,
        changed,
    );
    let task = tokio::spawn(driver);
    let seen = server.finish().await;
    wait_for(|| {
        store.state().len() == 2
            && store
                .state()
                .iter()
                .any(|n| n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true))
    })
    .await;
    task.abort();
    seen
}

pub(crate) async fn the_snapshot_comes_from_the_caches() -> Vec<Access> {
    let mut seen = Vec::new();
    let (nodes, s) = reflect(
        Api::<Node>::all,
        "/api/v1/nodes?*",
        trim_node,
        vec![
            serde_json::to_value(node("n1", 8)).unwrap(),
            serde_json::to_value(node("n2", 8)).unwrap(),
            tainted_control_plane(),
        ],
    )
    .await;
    seen.extend(s);
    let other: Value = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default", "resourceVersion": "3"},
        "spec": {"nodeName": "n2", "containers": [{"name": "web", "resources": {"requests": {"cpu": "500m"}}}]}, "status": {"phase": "Running"}});
    let pods_json = vec![
        serde_json::to_value(pod("a", "ps-0", 0, Some("n1"))).unwrap(),
        serde_json::to_value(pod("a", "worker-0", 0, None)).unwrap(),
        other,
    ];
    let (pods, s) = reflect(Api::<Pod>::all, "/api/v1/pods?*", trim_pod, pods_json).await;
    seen.extend(s);
    let job = gang().with_status(TrainingJobStatus {
        moves: vec![migrated_for("reallocate", "n1", "n2")],
        ..TrainingJobStatus::default()
    });
    let (jobs, s) = reflect(
        Api::<TrainingJob>::all,
        "/apis/switchyard.dev/v1alpha1/trainingjobs?*",
        trim_job,
        vec![job.json()],
    )
    .await;
    seen.extend(s);
    let caches = Caches::new(nodes, pods, jobs);
    let snapshot = caches.snapshot(100.0, vec![]);
    assert_eq!(snapshot.nodes.len(), 3);
    assert_eq!(
        snapshot.node("n1").unwrap().requested.cpu_millis,
        2000,
        "the job's bound ps counts on n1"
    );
    assert_eq!(
        snapshot.node("n2").unwrap().requested.cpu_millis,
        500,
        "another scheduler's pod counts on n2"
    );
    assert_eq!(
        snapshot.node("n1").unwrap().usage,
        None,
        "no metrics server: no usage"
    );
    let job = snapshot.job("ml/a").expect("the job is in the snapshot");
    let phases: Vec<(&str, TaskPhase)> = job
        .tasks
        .iter()
        .map(|t| (t.name.as_str(), t.phase))
        .collect();
    assert_eq!(
        phases,
        vec![
            ("ps-0", TaskPhase::Running),
            ("worker-0", TaskPhase::Pending),
            ("worker-1", TaskPhase::Pending)
        ]
    );
    assert_eq!(job.phase, JobPhase::Running);
    assert!(job.checkpointable);
    // The gang's template tolerates nothing: its tasks may run on n1 and n2 only.
    let set = job.tasks[0]
        .eligible
        .expect("the tainted node excludes something");
    assert!(job.tasks.iter().all(|t| t.eligible == Some(set)));
    let allowed: Vec<&str> = snapshot
        .node_set(set)
        .expect("the set is in the snapshot")
        .nodes
        .iter()
        .map(|&i| snapshot.nodes[i as usize].name.as_str())
        .collect();
    assert_eq!(allowed, ["n1", "n2"]);
    let moves: Vec<(&str, &[String])> = job
        .moves
        .iter()
        .map(|m| (m.purpose.as_str(), m.to_nodes.as_slice()))
        .collect();
    assert_eq!(
        moves,
        [("reallocate", &["n2".to_string()][..])],
        "the history comes from the status"
    );
    assert_eq!(
        (
            job.replicas.role.as_str(),
            job.replicas.current,
            job.replicas.min,
            job.replicas.max
        ),
        ("worker", 2, 1, 4)
    );
    seen
}

pub(crate) async fn usage_comes_from_metrics_when_served() -> Vec<Access> {
    let (client, server) = MockServer::start(vec![
        Expect::get("/apis/metrics.k8s.io/v1beta1/nodes").ok(json!({"items": [{"metadata": {"name": "n1"}, "usage": {"cpu": "3500m", "memory": "10Gi"}}]})),
        Expect::get("/apis/metrics.k8s.io/v1beta1/pods?labelSelector=switchyard.dev%2Fjob").ok(json!({"items": [{"metadata": {"name": "a-ps-0-0", "namespace": NS},
            "containers": [{"name": "trainer", "usage": {"cpu": "1200m", "memory": "1Gi"}}, {"name": "sidecar", "usage": {"cpu": "100m", "memory": "0"}}]}]})),
        Expect::get("/apis/metrics.k8s.io/v1beta1/nodes").fail(404, "NotFound", "the server could not find the requested resource"),
    ]);
    let usage = switchyard_kube::fetch_usage(&client)
        .await
        .unwrap()
        .expect("metrics are served");
    assert_eq!(usage.nodes["n1"].cpu_millis, 3500);
    assert_eq!(
        usage.pods[&(NS.to_string(), "a-ps-0-0".to_string())].cpu_millis,
        1300
    );
    assert_eq!(
        switchyard_kube::fetch_usage(&client).await.unwrap(),
        None,
        "without metrics-server the usage is None"
    );
    server.finish().await
}

fn empty_caches() -> Caches {
    Caches::new(
        kube::runtime::reflector::store().0,
        kube::runtime::reflector::store().0,
        kube::runtime::reflector::store().0,
    )
}

pub(crate) async fn loss_samples_come_from_the_followed_log() -> Vec<Access> {
    let first = "2026-01-01T00:00:01.250000000Z Epoch [1/90] Step [100/5005] loss=2.9812\n\
                 2026-01-01T00:00:01.500000000Z noise\n\
                 2026-01-01T00:00:01.750000000Z Epoch [1/90] Step [200/5005] loss=2.7710\n";
    // The stream ended and the pod is followed again: the API server answers from the
    // start of the second asked for, so the line at .750 comes again.
    let second = "2026-01-01T00:00:01.750000000Z Epoch [1/90] Step [200/5005] loss=2.7710\n\
                  2026-01-01T00:00:02.100000000Z Epoch [1/90] Step [300/5005] loss=2.6001\n";
    let (client, server) = MockServer::start(vec![
        Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
            .query_has(&["container=trainer", "follow=true", "timestamps=true"])
            .text(first),
        Expect::get(&format!("{PODS}/a-main-0-0/log?*"))
            .query_has(&[
                "follow=true",
                "timestamps=true",
                "sinceTime=2026-01-01T00%3A00%3A01Z",
            ])
            .text(second),
    ]);
    let caches = empty_caches();
    let pattern =
        LogPattern::compile("a", r"Step \[(?P<step>\d+)/\d+\] loss=(?P<value>[0-9.]+)").unwrap();
    let mut taken = Vec::new();
    for _ in 0..2 {
        let n = switchyard_kube::follow_log(
            Api::namespaced(client.clone(), NS),
            "a-main-0-0",
            Some("trainer".into()),
            pattern.clone(),
            &caches,
            "ml/a",
            || 42.0,
            |_| {},
        )
        .await
        .unwrap();
        taken.push(n);
    }
    assert_eq!(taken, vec![2, 1], "the re-read line is not taken again");
    let loss = caches.loss.lock().unwrap().samples("ml/a").unwrap();
    let got: Vec<(u64, f64)> = loss.iter().map(|s| (s.step, s.value)).collect();
    assert_eq!(got, vec![(100, 2.9812), (200, 2.771), (300, 2.6001)]);
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn a_dropped_watch_resumes_from_the_last_resource_version() {
    a_dropped_node_watch_restarts_where_it_left_off().await;
}

#[tokio::test(start_paused = true)]
async fn the_snapshot_counts_every_pod_on_a_node_and_the_jobs_tasks_from_its_spec() {
    the_snapshot_comes_from_the_caches().await;
}

#[tokio::test(start_paused = true)]
async fn usage_is_read_from_metrics_and_absent_without_a_metrics_server() {
    usage_comes_from_metrics_when_served().await;
}

#[tokio::test(start_paused = true)]
async fn a_log_followed_again_resumes_where_it_stopped_and_takes_no_sample_twice() {
    loss_samples_come_from_the_followed_log().await;
}

/// A control-plane node, tainted as kubeadm taints it.
fn tainted_control_plane() -> Value {
    let mut node = serde_json::to_value(node("tainted", 8)).unwrap();
    node["spec"] = json!({"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]});
    node
}
