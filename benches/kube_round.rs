//! The Kubernetes backend's own cost per round at 5,000 nodes and 50,000 pods: the
//! leader's pass between rounds (finished jobs, failed pods, restarts, loss writes, what
//! changed) and the snapshot the policy is handed, from caches filled as the reflectors
//! fill them. 2,500 TrainingJobs of two workers each, released and bound by
//! kube-scheduler (5,000 of the controller's pods), and 45,000 other schedulers' pods
//! (kept as charges). No policy runs: this is the
//! host's share of a round, whose target is in `docs/performance.md`.
//!
//! ```sh
//! cargo bench -p switchyard-kube --bench kube_round
//! ```
//!
//! Rows: `steady` (nothing changed since the last round), `one-pod-changed` (one
//! worker's pod has a new resourceVersion each round, as a status update gives it, fed
//! to the caches as its watch event).
//! The API client answers every call with 500 and counts them: a steady round makes
//! none, which the bench checks before it measures. Before measuring, it prints what the
//! caches and the kept views hold after the first round (live bytes, counted by the
//! bench's global allocator).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::events::Reporter;
use kube::runtime::{reflector, watcher};
use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_kube::Actor;
use switchyard_kube::Caches;
use switchyard_kube::KubeCluster;
use switchyard_kube::TrainingJob;
use switchyard_test_support::{CountingAllocator, process_live_bytes};

// The caches are filled on the runtime's worker threads: the figures are the process's.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

const NODES: usize = 5_000;
const JOBS: usize = 2_500;
const WORKERS: usize = 2;
const OTHER_PODS: usize = 45_000;
const NS: &str = "ml";

fn node(i: usize) -> Node {
    let mut spec = json!({});
    if i.is_multiple_of(10) {
        spec = json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]});
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i:05}"), "resourceVersion": "1",
            "labels": {"kubernetes.io/hostname": format!("node-{i:05}"),
                "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
                "gpu.example.com/type": if i.is_multiple_of(2) { "a100" } else { "v100" }}},
        "spec": spec,
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("a node")
}

fn job(i: usize) -> TrainingJob {
    let name = format!("job-{i:05}");
    serde_json::from_value(json!({
        "apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"team": "vision"}},
        "spec": {
            "progress": {"push": true},
            "roles": [{"name": "worker", "replicas": WORKERS, "scalable": true,
                "minReplicas": 1, "maxReplicas": 4,
                "template": {"spec": {
                    "nodeSelector": {"gpu.example.com/type": "a100"},
                    "containers": [{"name": "trainer", "image": "ghcr.io/example/resnet:1",
                        "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                            "limits": {"nvidia.com/gpu": "1"}}}]}}}]
        },
        "status": {"phase": "Running", "replicas": WORKERS,
            "placements": (0..WORKERS).map(|t| json!({"task": format!("worker-{t}"),
                "pod": format!("{name}-worker-{t}-0"), "node": worker_node(i, t)})).collect::<Vec<_>>()}
    }))
    .expect("a job")
}

/// The node job `job`'s worker `task` was bound to.
fn worker_node(job: usize, task: usize) -> String {
    format!("node-{:05}", ((job * WORKERS + task) * 2) % NODES)
}

fn own_pod(job: usize, task: usize, version: u64) -> Pod {
    let name = format!("job-{job:05}");
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-worker-{task}-0"), "namespace": NS,
            "uid": format!("uid-{name}-worker-{task}"), "resourceVersion": version.to_string(),
            "labels": {"switchyard.dev/job": name, "switchyard.dev/task": format!("worker-{task}"),
                "switchyard.dev/role": "worker", "switchyard.dev/job-uid": format!("uid-{name}"),
                "switchyard.dev/generation": "0"},
            "ownerReferences": [{"apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                "name": name, "uid": format!("uid-{name}"), "controller": true}]},
        "spec": {"nodeName": worker_node(job, task),
            "containers": [{"name": "trainer", "image": "ghcr.io/example/resnet:1",
                "resources": {"requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:01:00Z"}
    }))
    .expect("a pod")
}

fn other_pod(i: usize) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "namespace": "web", "uid": format!("uid-web-{i}")},
        "spec": {"nodeName": format!("node-{:05}", i % NODES),
            "containers": [{"name": "app", "image": "nginx",
                "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]},
        "status": {"phase": "Running"}
    }))
    .expect("a pod")
}

/// A client whose every call fails with 500, counting the calls.
fn counting_client(calls: Arc<AtomicUsize>) -> kube::Client {
    let service = tower::service_fn(move |_request: http::Request<kube::client::Body>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "code": 500, "reason": "InternalError", "message": "bench"});
            Ok::<_, std::convert::Infallible>(
                http::Response::builder()
                    .status(500)
                    .body(kube::client::Body::from(body.to_string().into_bytes()))
                    .expect("a response"),
            )
        }
    });
    kube::Client::new(service, "default")
}

fn round(c: &mut Criterion) {
    let tokio = tokio::runtime::Runtime::new().expect("a runtime");
    let empty = process_live_bytes();
    let (nodes_store, mut nodes) = reflector::store::<Node>();
    let (pods_store, mut pods) = reflector::store::<Pod>();
    let (jobs_store, mut jobs) = reflector::store::<TrainingJob>();
    nodes.apply_watcher_event(&watcher::Event::Init);
    for i in 0..NODES {
        nodes.apply_watcher_event(&watcher::Event::InitApply(node(i)));
    }
    nodes.apply_watcher_event(&watcher::Event::InitDone);
    pods.apply_watcher_event(&watcher::Event::Init);
    jobs.apply_watcher_event(&watcher::Event::Init);
    for j in 0..JOBS {
        jobs.apply_watcher_event(&watcher::Event::InitApply(job(j)));
        for t in 0..WORKERS {
            pods.apply_watcher_event(&watcher::Event::InitApply(own_pod(j, t, 1)));
        }
    }
    pods.apply_watcher_event(&watcher::Event::InitDone);
    jobs.apply_watcher_event(&watcher::Event::InitDone);
    let mut caches = Caches::new(nodes_store, pods_store, jobs_store);
    caches.others = switchyard_kube::Charges::default();
    caches.others.apply(&watcher::Event::Init);
    for i in 0..OTHER_PODS {
        caches
            .others
            .apply(&watcher::Event::InitApply(other_pod(i)));
    }
    caches.others.apply(&watcher::Event::InitDone);

    let calls = Arc::new(AtomicUsize::new(0));
    // The client and the recorder start tower buffers on the runtime; the rounds below
    // run off it, as the controller's decision thread does.
    let entered = tokio.enter();
    let client = counting_client(calls.clone());
    let reporter = Reporter {
        controller: "switchyard".into(),
        instance: Some("bench".into()),
    };
    let actor = Actor::new(client.clone(), reporter);
    drop(entered);
    let cluster_caches = caches.clone();
    let mut cluster = KubeCluster::new(
        tokio.handle().clone(),
        client,
        caches,
        actor,
        Arc::new(Leader::always("bench")),
    )
    .with_clock(Arc::new(|| 1_767_225_900.0));

    // The round the live loop runs: a leader pass when a tick is due, then the snapshot.
    let one_round = |cluster: &mut KubeCluster| {
        let now = cluster.now();
        std::hint::black_box(cluster.advance(Some(now)));
        std::hint::black_box(cluster.snapshot(Vec::new()))
    };
    let cached = process_live_bytes();
    // The first round hears of every job and node (as after a relist); the next is
    // steady.
    let started = std::time::Instant::now();
    let first = one_round(&mut cluster);
    eprintln!(
        "kube_round: the first round (every job and node new): {:?}",
        started.elapsed()
    );
    assert_eq!(first.jobs.len(), JOBS);
    assert_eq!(first.nodes.len(), NODES);
    drop(first);
    let kept = process_live_bytes();
    eprintln!(
        "kube_round: caches {:.1} MiB ({NODES} nodes, {JOBS} jobs, {} own pods, {OTHER_PODS} others as charges); \
         after the first round, with the kept views: {:.1} MiB",
        mib(cached - empty),
        JOBS * WORKERS,
        mib(kept - empty)
    );
    let before = calls.load(Ordering::SeqCst);
    let started = std::time::Instant::now();
    one_round(&mut cluster);
    eprintln!(
        "kube_round: one steady round before measuring: {:?}",
        started.elapsed()
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "a steady round calls the API server"
    );

    let mut group = c.benchmark_group("kube_round");
    group.sample_size(20);
    group.bench_function("steady", |b| b.iter(|| one_round(&mut cluster)));
    let mut version = 1;
    let feed = cluster_caches.clone();
    group.bench_function("one-pod-changed", |b| {
        b.iter(|| {
            version += 1;
            let event = watcher::Event::Apply(own_pod(7, 0, version));
            pods.apply_watcher_event(&event);
            feed.pod_event(&event);
            one_round(&mut cluster)
        })
    });
    group.finish();
}

criterion_group!(benches, round);
criterion_main!(benches);
