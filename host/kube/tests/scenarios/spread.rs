//! One task per node and host ports: a job whose template asks for a host port (or for
//! required anti-affinity against its own pods per node) carries the label that says
//! its tasks may not share a node, and the validator refuses a decision that puts two of
//! them on one. Whether another pod holds the port on a node is kube-scheduler's to
//! judge when it binds: a placement it refuses for that comes back to the policy.

use serde_json::json;
use switchyard_core::{Decision, ONE_TASK_PER_NODE_LABEL, Rejection, check_decision};

use switchyard_control::Leader;

use crate::cluster::default_round;
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::scheduler::{Scheduled, Scheduler};
use crate::support::world::{World, blocking, first_placement, status_write_of};
use switchyard_control::Cluster;
use switchyard_kube::{Phase, TrainingJobStatus};

fn place(pairs: &[(&str, &str)]) -> Decision {
    Decision {
        actions: vec![place_action("ml/a", pairs)],
        ..Decision::default()
    }
}

/// Job b's pod on n1, holding host port 29500.
fn port_holder() -> k8s_openapi::api::core::v1::Pod {
    let mut holder = pod("b", "main-0", 0, Some("n1"));
    holder.spec.as_mut().unwrap().containers[0].ports = Some(vec![
        serde_json::from_value(json!({"containerPort": 29500, "hostPort": 29500})).unwrap(),
    ]);
    holder
}

#[test]
fn a_job_with_a_host_port_never_doubles_up_on_a_node() {
    let mut world = World::new()
        .node(node("n1", 16))
        .node(node("n2", 16))
        .node(node("n3", 16));
    world.job(
        &JobBuilder::new("a")
            .ps_worker(2, 1, 4)
            .host_port(29500)
            .push_progress(),
    );
    world.pod(port_holder());
    let snapshot = world.caches.snapshot(0.0, vec![]);
    let job = snapshot.job("ml/a").unwrap();
    assert_eq!(
        job.labels.get(ONE_TASK_PER_NODE_LABEL).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        job.tasks[0].eligible, None,
        "another pod's port is the scheduler's to check, not a hint"
    );
    let checked = check_decision(
        &snapshot,
        &place(&[("ps-0", "n2"), ("worker-0", "n3"), ("worker-1", "n3")]),
    );
    assert!(
        matches!(&checked.rejected[0].reason, Rejection::SharedNode { node, .. } if node == "n3"),
        "{checked:?}"
    );
    // A job without ports or anti-affinity carries no such label and packs freely.
    let mut world = World::new().node(node("n1", 16));
    world.job(&JobBuilder::new("a").push_progress());
    let snapshot = world.caches.snapshot(0.0, vec![]);
    assert!(
        !snapshot
            .job("ml/a")
            .unwrap()
            .labels
            .contains_key(ONE_TASK_PER_NODE_LABEL)
    );
}

pub(crate) async fn a_host_port_the_scheduler_finds_taken_sends_the_gang_back_to_the_policy()
-> Vec<Access> {
    let mut world = World::new()
        .node(node("n1", 16))
        .node(node("n2", 16))
        .node(node("n3", 16));
    let job = JobBuilder::new("a")
        .ps_worker(2, 1, 4)
        .host_port(29500)
        .push_progress();
    world.job(&job);
    world.pod(port_holder());
    // Pod by pod, one task per node: ps-0 on n2, worker-0 on n3, worker-1 on n1, whose
    // port the policy cannot see is taken.
    let mut script = first_placement(&job, "ps-0", "ps", "n2");
    for (task, node) in [("worker-0", "n3"), ("worker-1", "n1")] {
        let name = format!("a-{task}-0");
        script.push(create(&name, "a", task, "worker"));
        script.push(release(&name, node));
        script.extend(status_write_of(
            "a",
            &job,
            json!({"status": {"placements": [{"task": task, "node": node}]}}),
        ));
        // The recorder folds a repeated Event into the first: a patch.
        script.push(Expect::patch(&format!("{EVENTS}/*")).ok(event_json()));
    }
    // kube-scheduler refuses worker-1: the gang is taken back, every member deleted,
    // and the refusal recorded for the policy.
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"phase": "Restarting", "generation": 1,
            "refusal": {"nodes": ["n1"], "reason": "Unschedulable", "count": 1},
            "restart": {"action": "Recover", "retryAfter": "2026-01-01T00:00:41Z"}}}),
    ));
    for pod in ["a-ps-0-0", "a-worker-0-0", "a-worker-1-0"] {
        script.push(delete(pod, None));
    }
    script.push(event("PlacementRefused", "Recover", "Warning"));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, record) = blocking(cluster, default_round).await;
    assert_eq!(record.arm_a.accepted.len(), 3, "{record:#?}");
    assert!(record.arm_a.rejected.is_empty(), "{record:#?}");
    // What the API server now holds: the placements written, the pods released.
    let placed = [("ps-0", "n2"), ("worker-0", "n3"), ("worker-1", "n1")];
    world.job(
        &job.clone_with(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: placed
                .iter()
                .map(|(task, node)| placement(task, &format!("a-{task}-0"), node))
                .collect(),
            ..TrainingJobStatus::default()
        }),
    );
    for (task, node) in placed {
        world.pod(released(pod("a", task, 0, None), node, 0));
    }
    let ports_taken = "node(s) didn't have free ports for the requested pod ports";
    let scheduled = Scheduler::new()
        .refusing("n1", ports_taken)
        .schedule(&mut world);
    assert!(scheduled.contains(&Scheduled::Bound {
        pod: "a-ps-0-0".into(),
        node: "n2".into()
    }));
    assert!(
        matches!(&scheduled[2], Scheduled::Refused { pod, message }
            if pod == "a-worker-1-0" && message.contains(ports_taken)),
        "{scheduled:?}"
    );
    let placed = server.served();
    world.set_clock(29);
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(29).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        placed,
        "a refusal may pass: not taken back yet"
    );
    world.set_clock(31);
    let (_, _) = blocking(cluster, |c| c.advance(Some(at(31).as_second() as f64))).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_port_job_placed_one_task_per_node_comes_back_when_the_scheduler_finds_a_port_taken()
{
    a_host_port_the_scheduler_finds_taken_sends_the_gang_back_to_the_policy().await;
}
