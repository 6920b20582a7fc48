//! One task per node and host ports: a job whose template asks for a host port (or for
//! required anti-affinity against its own pods per node) is offered only nodes where the
//! port is free, carries the label that says its tasks may not share a node, and the
//! validator refuses a decision that puts two of them on one.

use serde_json::json;
use switchyard_core::{
    Action, Assignment, Decision, ONE_TASK_PER_NODE_LABEL, Operation, Rejection, check_decision,
};

use switchyard_control::Leader;

use crate::cluster::default_round;
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, first_placement, status_write_of};

fn place(pairs: &[(&str, &str)]) -> Decision {
    Decision {
        actions: vec![Action {
            op: Operation::Place {
                job: "ml/a".into(),
                assignments: pairs
                    .iter()
                    .map(|(task, node)| Assignment {
                        task: task.to_string(),
                        node: node.to_string(),
                    })
                    .collect(),
            },
            reason: "test".into(),
        }],
        ..Decision::default()
    }
}

#[test]
fn a_job_with_a_host_port_avoids_nodes_where_it_is_taken_and_never_doubles_up_on_a_node() {
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
    // Job b's pod holds the port on n1.
    let b = JobBuilder::new("b").host_port(29500).push_progress();
    world.job(&b);
    let mut holder = pod("b", "main-0", 0, Some("n1"));
    holder.spec.as_mut().unwrap().containers[0].ports = Some(vec![
        serde_json::from_value(json!({"containerPort": 29500, "hostPort": 29500})).unwrap(),
    ]);
    world.pod(holder);
    let snapshot = world.caches.snapshot(0.0, vec![]);
    let job = snapshot.job("ml/a").unwrap();
    assert_eq!(
        job.labels.get(ONE_TASK_PER_NODE_LABEL).map(String::as_str),
        Some("true")
    );
    let set = job.tasks[0].eligible.expect("n1 is excluded");
    let allowed: Vec<&str> = snapshot
        .node_set(set)
        .unwrap()
        .nodes
        .iter()
        .map(|&i| snapshot.nodes[i as usize].name.as_str())
        .collect();
    assert_eq!(allowed, ["n2", "n3"]);
    let checked = check_decision(
        &snapshot,
        &place(&[("ps-0", "n1"), ("worker-0", "n2"), ("worker-1", "n3")]),
    );
    assert!(
        matches!(&checked.rejected[0].reason, Rejection::NotEligible { node, .. } if node == "n1"),
        "{checked:?}"
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

pub(crate) async fn the_default_policy_spreads_a_host_port_job_and_leaves_out_the_taken_node()
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
    let mut holder = pod("b", "main-0", 0, Some("n1"));
    holder.spec.as_mut().unwrap().containers[0].ports = Some(vec![
        serde_json::from_value(json!({"containerPort": 29500, "hostPort": 29500})).unwrap(),
    ]);
    world.pod(holder);
    // Pod by pod: ps-0 on n2, worker-0 on n3; worker-1 has no node left (n1's port is
    // taken, n2 and n3 hold its siblings) and waits.
    let mut script = first_placement(&job, "ps-0", "ps", "n2");
    script.push(create("a-worker-0-0", "a", "worker-0", "worker"));
    script.push(bind("a-worker-0-0", "n3"));
    script.extend(status_write_of(
        "a",
        &job,
        json!({"status": {"placements": [{"task": "worker-0", "node": "n3"}]}}),
    ));
    // The recorder folds a repeated Event into the first: a patch.
    script.push(Expect::patch(&format!("{EVENTS}/*")).ok(event_json()));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, record) = blocking(cluster, default_round).await;
    assert_eq!(record.arm_a.accepted.len(), 2, "{record:#?}");
    assert!(record.arm_a.rejected.is_empty(), "{record:#?}");
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_binds_a_host_port_job_one_task_per_node_off_the_node_whose_port_is_taken()
 {
    the_default_policy_spreads_a_host_port_job_and_leaves_out_the_taken_node().await;
}
