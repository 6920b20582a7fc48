//! Every API call is bounded and fenced: a call that hangs is abandoned after its
//! deadline and the round goes on; a replica that no longer leads sends nothing; and a
//! replica that led under an earlier Lease term, and has not noticed that it no longer
//! does, writes no status a newer leader has written (the term travels in the status,
//! the resourceVersion makes the check hold at the API server).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchyard_control::{Cluster, Leader};
use switchyard_core::{Action, Assignment, Operation};
use switchyard_kube::Error;
use switchyard_kube::{CheckpointMethod, TrainingJobStatus};

use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::world::{World, blocking, status_write_of};

fn place(job: &str, node: &str) -> Action {
    Action {
        op: Operation::Place {
            job: format!("ml/{job}"),
            assignments: vec![Assignment {
                task: "main-0".into(),
                node: node.into(),
            }],
        },
        reason: "fits".into(),
    }
}

pub(crate) async fn a_hung_call_is_abandoned_and_the_round_goes_on() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8)).node(node("n2", 8));
    let (a, b) = (
        JobBuilder::new("a").push_progress(),
        JobBuilder::new("b").push_progress(),
    );
    world.job(&a);
    world.job(&b);
    let mut script = vec![
        service("a"),
        budget("a"),
        // The API server takes a's create and never answers.
        create("a-main-0-0", "a", "main-0", "main").after(Duration::from_secs(3600)),
    ];
    script.extend(status_write_of(
        "a",
        &a,
        json!({"status": {"conditions": [{"type": "PodsCreated", "status": "False", "reason": "PlacementFailed"}]}}),
    ));
    script.push(event("PlacementFailed", "Place", "Warning"));
    script.push(service("b"));
    script.push(budget("b"));
    script.push(create("b-main-0-0", "b", "main-0", "main"));
    script.push(release("b-main-0-0", "n2"));
    script.extend(status_write_of(
        "b",
        &b,
        json!({"status": {"phase": "Running"}}),
    ));
    script.push(Expect::post(EVENTS).respond(201, event_json()));
    let (client, server) = MockServer::start(script);
    let leader = Leader::elected("switchyard-0");
    leader.lead_until(tokio::time::Instant::now() + Duration::from_secs(3600));
    let cluster = world
        .cluster(client, leader)
        .with_call_timeout(Duration::from_millis(200));
    let decision = vec![place("a", "n1"), place("b", "n2")];
    let (cluster, outcomes) = blocking(cluster, move |c| c.apply(&decision, &[])).await;
    assert!(
        matches!(&outcomes[..], [Err(f), Ok(())] if f.reason == switchyard_control::FailureReason::Timeout),
        "a's placement timed out and is reported so; b's went through: {outcomes:?}"
    );
    assert!(
        cluster.leader().is_leading(),
        "the lead is the election's to keep, not the decision thread's"
    );
    server.finish().await
}

pub(crate) async fn a_replica_that_stopped_leading_sends_nothing_mid_restart() -> Vec<Access> {
    let job = restarting(
        &JobBuilder::new("a").checkpoint(CheckpointMethod::Signal, 10),
        TrainingJobStatus {
            generation: 1,
            ..TrainingJobStatus::default()
        },
        migration("a-main-0-0", "main-0", "n2", None),
    );
    let (client, server) = MockServer::start(vec![]);
    let leader = Arc::new(Leader::elected("switchyard-0"));
    leader.follow(Some("switchyard-1".into()));
    let actor = actor(client).fenced_by(leader);
    let outcome = actor
        .advance_restart(&job.build(), &[pod("a", "main-0", 0, Some("n1"))], at(0))
        .await;
    assert!(
        matches!(outcome, Err(Error::NotLeading { .. })),
        "{outcome:?}"
    );
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_call_that_hangs_is_abandoned_after_its_deadline_and_the_rest_of_the_round_is_carried_out()
 {
    a_hung_call_is_abandoned_and_the_round_goes_on().await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_no_longer_leads_sends_nothing_even_half_way_through_a_restart() {
    a_replica_that_stopped_leading_sends_nothing_mid_restart().await;
}

/// An actor whose status writes carry Lease term `term`.
fn of_term(client: kube::Client, term: u64) -> switchyard_kube::Actor {
    let lease_term = switchyard_kube::LeaderTerm::default();
    lease_term.set(term);
    actor(client).with_term(lease_term)
}

#[tokio::test(start_paused = true)]
async fn a_status_write_carries_the_writer_s_lease_term() {
    let job = running_single(CheckpointMethod::Signal, 10);
    let (client, server) = MockServer::start(vec![
        Expect::get(STATUS).ok(job.json()),
        Expect::put(STATUS)
            .body(json!({"status": {"leaderTerm": 3}}))
            .ok(job.json()),
    ]);
    of_term(client, 3)
        .update_status(&job.build(), |s| s.migrations += 1)
        .await
        .expect("written");
    server.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_replica_of_an_earlier_term_writes_no_status_a_newer_leader_wrote() {
    // The leader of term 3 was paused past its grant; the leader of term 4 has written.
    let mut newer = running_single(CheckpointMethod::Signal, 10).json();
    newer["status"]["leaderTerm"] = json!(4);
    let job = JobBuilder::from_json(newer);
    let (client, server) = MockServer::start(vec![Expect::get(STATUS).ok(job.json())]);
    let error = of_term(client, 3)
        .update_status(&job.build(), |s| s.migrations += 1)
        .await
        .expect_err("fenced");
    assert!(matches!(error, Error::NotLeading { .. }), "{error}");
    server.finish().await;
}
