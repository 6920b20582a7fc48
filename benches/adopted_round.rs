//! The snapshot's cost for adopted jobs at 500 indexed batch Jobs of 8 pods each (4,000
//! adopted pods) on 1,000 nodes: 400 jobs running (their pods released, pinned and
//! bound), 100 waiting behind the placement gate, every pod with a node selector and a
//! toleration, as a team's manifest gives them. The caches are filled as the
//! reflectors fill them; no policy runs.
//!
//! ```sh
//! cargo bench --workspace --bench adopted_round -- --noplot
//! ```
//!
//! Rows: `steady` (nothing changed since the last snapshot), `regrouped` (a change the
//! grouping must see, with every pod as it was: the pods are grouped again and every
//! view is kept), `one-pod-changed` (one running pod gets a new resourceVersion each
//! round, as a status update gives it: grouped again, one view built), `every-pod-new`
//! (a relist hands every pod over as a new object: grouped again and every view built,
//! what each round cost when nothing was kept; the relist's pods are cloned outside the
//! measure).

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::{reflector, watcher};
use serde_json::json;
use switchyard_kube::{Adoption, Caches, TrainingJob};

const NODES: usize = 1_000;
const JOBS: usize = 500;
const PODS_PER_JOB: usize = 8;
/// Jobs whose pods run; the others wait behind the gate.
const RUNNING: usize = 400;
const NS: &str = "ml";

fn node(i: usize) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i:04}"), "resourceVersion": "1",
            "labels": {"kubernetes.io/hostname": format!("node-{i:04}"),
                "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
                "pool": if i.is_multiple_of(2) { "train" } else { "serve" }}},
        "spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .expect("a node")
}

fn job(j: usize) -> Job {
    let name = format!("sweep-{j:03}");
    serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parallelism": PODS_PER_JOB, "completions": PODS_PER_JOB,
            "completionMode": "Indexed",
            "podFailurePolicy": {"rules": [{"action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {"spec": {"containers": []}}}}))
    .expect("a job")
}

/// The node pod `index` of running job `j` is pinned and bound to.
fn node_of(j: usize, index: usize) -> String {
    format!("node-{:04}", ((j * PODS_PER_JOB + index) * 2) % NODES)
}

fn pod(j: usize, index: usize, version: u64) -> Pod {
    let name = format!("sweep-{j:03}");
    let running = j < RUNNING;
    let mut spec = json!({
        "nodeSelector": {"pool": "train"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
        "containers": [{"name": "train", "image": "ghcr.io/example/train:1",
            "resources": {"requests": {"cpu": "4", "memory": "16Gi"}}}]});
    if running {
        let node = node_of(j, index);
        spec["nodeName"] = json!(node);
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
    } else {
        spec["schedulingGates"] = json!([{"name": "switchyard.dev/placement"}]);
    }
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-{index}"), "namespace": NS,
            "uid": format!("uid-{name}-{index}"), "resourceVersion": version.to_string(),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": if running {
                json!({"switchyard.dev/released-at": "2026-01-01T00:00:30Z"})
            } else {
                json!({})
            },
            "labels": {"switchyard.dev/queue": "default",
                "batch.kubernetes.io/job-name": name,
                "batch.kubernetes.io/controller-uid": format!("uid-{name}"),
                "batch.kubernetes.io/job-completion-index": index.to_string()},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                "uid": format!("uid-{name}"), "controller": true}]},
        "spec": spec,
        "status": {"phase": if running { "Running" } else { "Pending" },
            "startTime": "2026-01-01T00:01:00Z"}}))
    .expect("a pod")
}

fn round(c: &mut Criterion) {
    let (nodes_store, mut nodes) = reflector::store::<Node>();
    nodes.apply_watcher_event(&watcher::Event::Init);
    for i in 0..NODES {
        nodes.apply_watcher_event(&watcher::Event::InitApply(node(i)));
    }
    nodes.apply_watcher_event(&watcher::Event::InitDone);
    let (pods_store, mut own_pods) = reflector::store::<Pod>();
    own_pods.apply_watcher_event(&watcher::Event::InitDone);
    let (jobs_store, mut training_jobs) = reflector::store::<TrainingJob>();
    training_jobs.apply_watcher_event(&watcher::Event::InitDone);

    let (queue_store, mut queue) = reflector::store::<Pod>();
    let (owners_store, mut owners) = reflector::store::<Job>();
    let pods: Vec<Pod> = (0..JOBS)
        .flat_map(|j| (0..PODS_PER_JOB).map(move |i| pod(j, i, 1)))
        .collect();
    queue.apply_watcher_event(&watcher::Event::Init);
    for p in &pods {
        queue.apply_watcher_event(&watcher::Event::InitApply(p.clone()));
    }
    queue.apply_watcher_event(&watcher::Event::InitDone);
    owners.apply_watcher_event(&watcher::Event::Init);
    for j in 0..JOBS {
        owners.apply_watcher_event(&watcher::Event::InitApply(job(j)));
    }
    owners.apply_watcher_event(&watcher::Event::InitDone);
    let adoption = Adoption::over("default", queue_store).with_jobs(owners_store);
    let caches = Caches::new(nodes_store, pods_store, jobs_store).with_adoption(adoption.clone());

    let snapshot = |caches: &Caches| std::hint::black_box(caches.snapshot(0.0, Vec::new()));
    let started = std::time::Instant::now();
    let first = snapshot(&caches);
    eprintln!(
        "adopted_round: the first snapshot (every job new): {:?}",
        started.elapsed()
    );
    assert_eq!(first.jobs.len(), JOBS);
    assert_eq!(first.nodes.len(), NODES);
    drop(first);

    let mut group = c.benchmark_group("adopted_round");
    group.sample_size(20);
    group.bench_function("steady", |b| b.iter(|| snapshot(&caches)));
    group.bench_function("regrouped", |b| {
        b.iter(|| {
            adoption.mark_changed();
            snapshot(&caches)
        })
    });
    let mut version = 1;
    group.bench_function("one-pod-changed", |b| {
        b.iter(|| {
            version += 1;
            queue.apply_watcher_event(&watcher::Event::Apply(pod(7, 0, version)));
            adoption.mark_changed();
            snapshot(&caches)
        })
    });
    group.bench_function("every-pod-new", |b| {
        b.iter_batched(
            || pods.clone(),
            |relisted| {
                queue.apply_watcher_event(&watcher::Event::Init);
                for p in relisted {
                    queue.apply_watcher_event(&watcher::Event::InitApply(p));
                }
                queue.apply_watcher_event(&watcher::Event::InitDone);
                adoption.mark_changed();
                snapshot(&caches)
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, round);
criterion_main!(benches);
