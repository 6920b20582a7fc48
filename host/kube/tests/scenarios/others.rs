//! Other schedulers' pods: listed before the leader acts, charged to their nodes while
//! they are bound and hold resources, and forgotten once they finish or go.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use switchyard_kube::Charges;
use switchyard_kube::JOB_LABEL;
use switchyard_kube::OTHERS_HOLDING_RESOURCES;
use tokio::sync::Notify;

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::World;

/// Another scheduler's pod `name` on `node` asking for `cpu`, at `version`.
fn other(name: &str, node: &str, cpu: &str, version: u32, phase: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "resourceVersion": version.to_string()},
        "spec": {"nodeName": node, "containers": [{"name": "web", "image": "nginx",
            "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": phase}})
}

fn event(kind: &str, object: Value) -> String {
    format!("{}\n", json!({"type": kind, "object": object}))
}

pub(crate) async fn other_pods_are_charged_while_they_hold_resources() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    world.pod(pod("a", "main-0", 0, Some("n1")));
    let charges = Charges::default();
    world.caches.others = charges.clone();
    assert!(
        !world.caches.synced(),
        "the leader waits for the other pods' first list too"
    );
    let stream = [
        // A batch pod finishes (a watch on the selector would drop it; a re-list
        // would not show it), another scheduler binds one more, one is deleted.
        event("MODIFIED", other("batch-1", "n1", "1", 11, "Succeeded")),
        event("ADDED", other("web-2", "n2", "250m", 12, "Running")),
        event("DELETED", other("web-3", "n1", "300m", 13, "Running")),
    ]
    .concat();
    let (client, server) = MockServer::start(vec![
        Expect::get("/api/v1/pods?*").ok(json!({"apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "10"},
            "items": [other("web-1", "n2", "500m", 5, "Running"),
                other("web-3", "n1", "300m", 6, "Running"),
                other("batch-1", "n1", "1", 7, "Running")]})),
        Expect::get("/api/v1/pods?*")
            .query_has(&["watch=true", "resourceVersion=10"])
            .text(&stream),
        // The watch is taken up again after the last event; by then each is applied.
        Expect::get("/api/v1/pods?*")
            .query_has(&["watch=true", "resourceVersion=13"])
            .after(std::time::Duration::from_secs(3600))
            .text(""),
    ]);
    let task = tokio::spawn(switchyard_kube::watch_charges(
        Api::<Pod>::all(client),
        watcher::Config::default()
            .labels(&format!("!{JOB_LABEL}"))
            .fields(OTHERS_HOLDING_RESOURCES),
        charges.clone(),
        Arc::new(Notify::new()),
    ));
    let seen = server.finish().await;
    task.abort();
    assert!(world.caches.synced(), "listed once the first list is in");
    assert_eq!(charges.len(), 2, "web-1 and web-2, nothing else kept");
    let snapshot = world.caches.snapshot(0.0, vec![]);
    let cpu = |n: &str| snapshot.node(n).unwrap().requested.cpu_millis;
    assert_eq!(
        cpu("n1"),
        2000,
        "only the controller's own pod is left on n1"
    );
    assert_eq!(cpu("n2"), 750, "web-1 and web-2 count on n2");
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_schedulers_pods_count_on_their_nodes_until_they_finish_or_go() {
    other_pods_are_charged_while_they_hold_resources().await;
}
