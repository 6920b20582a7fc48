//! Acting on a placement: a gang's pods created held, then released to kube-scheduler
//! pinned to the policy's nodes; a failed release rolled back without touching the pods
//! that were there before; a race with another write; a pod released elsewhere; a held pod
//! reused after a restart; a template the API server refuses.
//!
//! Each scenario drives the real backend code against the scripted API server and returns
//! what it accessed, so the RBAC test can check `deploy/rbac.yaml` against the union of
//! them. Tests run with paused time, so grace periods and back-off pass at once while
//! their order is still checked.

use serde_json::json;
use switchyard_kube::PLACEMENT_GATE;
use switchyard_kube::{CheckpointMethod, Phase, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};

/// Job `a`: one parameter server and two workers (scalable from 1 to 4) that checkpoint
/// on a signal.
pub(crate) fn gang() -> JobBuilder {
    JobBuilder::new("a")
        .ps_worker(2, 1, 4)
        .checkpoint(CheckpointMethod::Signal, 10)
}

fn three(task_nodes: [(&str, &str); 3]) -> Vec<(String, String)> {
    task_nodes
        .iter()
        .map(|(t, n)| (t.to_string(), n.to_string()))
        .collect()
}

pub(crate) async fn releasing_a_gang() -> Vec<Access> {
    let job = gang();
    let placed = job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![
            placement("ps-0", "a-ps-0-0", "n1"),
            placement("worker-0", "a-worker-0-0", "n1"),
            placement("worker-1", "a-worker-1-0", "n2"),
        ],
        ..TrainingJobStatus::default()
    });
    let mut script = vec![
        service("a"),
        budget("a"),
        // Every pod made held by the placement gate first, then every one released.
        create("a-ps-0-0", "a", "ps-0", "ps"),
        create("a-worker-0-0", "a", "worker-0", "worker"),
        create("a-worker-1-0", "a", "worker-1", "worker"),
        release("a-ps-0-0", "n1"),
        release("a-worker-0-0", "n1"),
        release("a-worker-1-0", "n2"),
    ];
    script.extend(status_write(
        &job,
        json!({"metadata": {"resourceVersion": "5"}, "status": {"phase": "Running", "placements": [
            {"task": "ps-0", "pod": "a-ps-0-0", "node": "n1"},
            {"task": "worker-0", "pod": "a-worker-0-0", "node": "n1"},
            {"task": "worker-1", "pod": "a-worker-1-0", "node": "n2"}],
            "conditions": [{"type": "PodsCreated", "status": "True", "reason": "Released"}]}}),
        &placed,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &three([("ps-0", "n1"), ("worker-0", "n1"), ("worker-1", "n2")]),
            "the gang fits on n1 and n2",
            at(0),
        )
        .await
        .expect("the gang is placed");
    server.finish().await
}

pub(crate) async fn rolling_back_a_failed_gang_release() -> Vec<Access> {
    let job = gang();
    let (client, server) = MockServer::start(vec![
        service("a"),
        budget("a"),
        create("a-ps-0-0", "a", "ps-0", "ps"),
        create("a-worker-0-0", "a", "worker-0", "worker"),
        create("a-worker-1-0", "a", "worker-1", "worker"),
        release("a-ps-0-0", "n1"),
        Expect::patch(&format!("{PODS}/a-worker-0-0")).fail(
            503,
            "ServiceUnavailable",
            "etcdserver: leader changed",
        ),
        // Each pod this call created or released goes, with its UID and its own grace
        // period: no member of a gang released alone.
        delete("a-ps-0-0", None),
        delete("a-worker-0-0", None),
        delete("a-worker-1-0", None),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "PlacementFailed", "message": "*", "lastTransitionTime": "*"}]}}),
            )
            .ok(job.json()),
        event("PlacementFailed", "Place", "Warning"),
    ]);
    let error = actor(client)
        .place(
            &job.build(),
            &three([("ps-0", "n1"), ("worker-0", "n1"), ("worker-1", "n2")]),
            "fits",
            at(0),
        )
        .await
        .expect_err("a failed release fails the placement");
    assert!(
        error
            .to_string()
            .contains("releasing pod a-worker-0-0 to the scheduler on node n1"),
        "{error}"
    );
    server.finish().await
}

/// A pod that already existed: released to `node` (`Some`), or still held by the
/// placement gate.
fn existing(name: &str, task: &str, node: Option<&str>) -> [Expect; 2] {
    let found = match node {
        Some(node) => released(pod("a", task, 0, None), node, 0),
        None => held(pod("a", task, 0, None)),
    };
    let mut found = serde_json::to_value(found).unwrap();
    found["metadata"]["resourceVersion"] = json!("1");
    [
        Expect::post(PODS).fail(
            409,
            "AlreadyExists",
            &format!("pods \"{name}\" already exists"),
        ),
        Expect::get(&format!("{PODS}/{name}")).ok(found),
    ]
}

pub(crate) async fn rolling_back_leaves_the_pods_that_were_there_before() -> Vec<Access> {
    let job = gang();
    let mut script = vec![service("a"), budget("a")];
    // A controller stopped half-way: the ps was created and released, worker-0 created.
    script.extend(existing("a-ps-0-0", "ps-0", Some("n1")));
    script.extend(existing("a-worker-0-0", "worker-0", None));
    script.push(create("a-worker-1-0", "a", "worker-1", "worker"));
    script.push(release("a-worker-0-0", "n1"));
    script.push(Expect::patch(&format!("{PODS}/a-worker-1-0")).fail(
        404,
        "NotFound",
        "pods \"a-worker-1-0\" not found",
    ));
    // This call released worker-0 and created worker-1: those two go. The ps was
    // released before, and may run: it stays.
    script.push(delete("a-worker-0-0", None));
    script.push(delete("a-worker-1-0", None));
    script.push(Expect::get(STATUS).ok(job.json()));
    script.push(Expect::put(STATUS).ok(job.json()));
    script.push(event("PlacementFailed", "Place", "Warning"));
    let (client, server) = MockServer::start(script);
    actor(client)
        .place(
            &job.build(),
            &three([("ps-0", "n1"), ("worker-0", "n1"), ("worker-1", "n2")]),
            "fits",
            at(0),
        )
        .await
        .expect_err("the failed release fails the placement");
    server.finish().await
}

pub(crate) async fn a_release_that_races_another_write_pins_the_pod_as_it_is_now() -> Vec<Access> {
    let job = JobBuilder::new("a");
    // A webhook added a gate of its own after the pod was created.
    let mut changed = created_json("a-main-0-0");
    changed["metadata"]["resourceVersion"] = json!("2");
    changed["spec"]["schedulingGates"] =
        json!([{"name": PLACEMENT_GATE}, {"name": "example.com/quota"}]);
    let mut script = vec![
        service("a"),
        budget("a"),
        create("a-main-0-0", "a", "main-0", "main"),
        Expect::patch(&format!("{PODS}/a-main-0-0")).fail(
            409,
            "Conflict",
            "Operation cannot be fulfilled on pods \"a-main-0-0\": the object has been modified",
        ),
        Expect::get(&format!("{PODS}/a-main-0-0")).ok(changed),
        // Pinned again from what it is now: its other gate stays, for its owner to lift.
        Expect::patch(&format!("{PODS}/a-main-0-0"))
            .body(json!({"metadata": {"resourceVersion": "2"},
                "spec": {"schedulingGates": [{"name": "example.com/quota"}], "affinity": pin("n1")}}))
            .ok(pod_json("a-main-0-0")),
    ];
    script.extend(status_write(
        &job,
        json!({"status": {"phase": "Running", "placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}]}}),
        &job,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    place_main_on_n1(client, &job)
        .await
        .expect("the pod is released as it is now, not rolled back");
    server.finish().await
}

pub(crate) async fn a_pod_released_elsewhere_by_someone_else_fails_the_placement() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let mut script = vec![service("a"), budget("a")];
    script.extend(existing("a-main-0-0", "main-0", Some("n7")));
    // Not made here, so not deleted here either.
    script.push(Expect::get(STATUS).ok(job.json()));
    script.push(Expect::put(STATUS).ok(job.json()));
    script.push(event("PlacementFailed", "Place", "Warning"));
    let (client, server) = MockServer::start(script);
    let error = place_main_on_n1(client, &job)
        .await
        .expect_err("a pod pinned elsewhere fails the placement");
    assert!(
        error.to_string().contains("placed on n7, not n1"),
        "{error}"
    );
    server.finish().await
}

pub(crate) async fn placing_again_after_a_restart_reuses_a_held_pod() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let placed = job.clone_with(TrainingJobStatus {
        phase: Some(Phase::Running),
        placements: vec![placement("main-0", "a-main-0-0", "n1")],
        ..TrainingJobStatus::default()
    });
    let mut script = vec![service("a"), budget("a")];
    script.extend(existing("a-main-0-0", "main-0", None));
    script.push(release("a-main-0-0", "n1"));
    script.extend(status_write(
        &job,
        json!({"status": {"placements": [{"task": "main-0", "pod": "a-main-0-0", "node": "n1"}]}}),
        &placed,
    ));
    script.push(event("Placed", "Place", "Normal"));
    let (client, server) = MockServer::start(script);
    place_main_on_n1(client, &job)
        .await
        .expect("the leftover pod is released, not duplicated");
    server.finish().await
}

pub(crate) async fn a_template_the_api_server_refuses_becomes_a_condition() -> Vec<Access> {
    let job = JobBuilder::new("a");
    let (client, server) = MockServer::start(vec![
        service("a"),
        budget("a"),
        Expect::post(PODS).fail(
            422,
            "Invalid",
            "Pod \"a-main-0-0\" is invalid: spec.containers[0].image: Required value",
        ),
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(
                json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False",
                "reason": "TemplateRejected", "message": "*", "lastTransitionTime": "*"}]}}),
            )
            .ok(job.json()),
        event("TemplateRejected", "Place", "Warning"),
    ]);
    let error = place_main_on_n1(client, &job)
        .await
        .expect_err("a refused template fails the placement");
    assert!(
        error.to_string().contains("spec.containers[0].image"),
        "{error}"
    );
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn placing_a_gang_creates_every_pod_held_then_releases_each_pinned_and_records_the_placements()
 {
    releasing_a_gang().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_left_held_by_a_restarted_controller_is_released_not_created_twice() {
    placing_again_after_a_restart_reuses_a_held_pod().await;
}

#[tokio::test(start_paused = true)]
async fn a_template_the_api_server_refuses_is_reported_as_pods_created_false() {
    a_template_the_api_server_refuses_becomes_a_condition().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_release_deletes_every_pod_the_placement_created_or_released() {
    rolling_back_a_failed_gang_release().await;
}

#[tokio::test(start_paused = true)]
async fn a_rolled_back_placement_leaves_the_pods_that_were_released_before_it_alone() {
    rolling_back_leaves_the_pods_that_were_there_before().await;
}

#[tokio::test(start_paused = true)]
async fn a_release_that_conflicts_with_another_write_reads_the_pod_again_and_keeps_its_other_gates()
{
    a_release_that_races_another_write_pins_the_pod_as_it_is_now().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_found_pinned_to_another_node_fails_the_placement_and_is_left_alone() {
    a_pod_released_elsewhere_by_someone_else_fails_the_placement().await;
}
