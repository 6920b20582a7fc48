//! An adopted job's life past its placement: only pods switchyard holds or released are
//! adopted (an owner with a pod that never waited behind the gate is told why, once);
//! a preemption's checkpoint ends at once when every asked pod acknowledged it, by its
//! log or the API, and is told on the owner; loss samples pushed to the API join the
//! series; an eviction a PodDisruptionBudget refuses backs off as the API server asks;
//! and an Event told once stays told across leaders.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use switchyard_control::{
    AckRefused, CheckpointAck, CheckpointOutcome, Cluster, Leader, LiveCluster, LossAck,
};
use switchyard_core::{Action, Operation, Trigger};
use switchyard_kube::{
    EVICTION_REFUSED_REASON, INTEGRATION_NOT_ENABLED_REASON, Integration, KubeCluster,
    NOT_ADOPTED_REASON,
};

use crate::adoption::view;
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer, TIMEOUT};
use crate::support::owners::*;
use crate::support::world::{World, blocking};

/// Unix seconds of `2026-01-01T00:00:00Z` plus `seconds`.
fn second(seconds: i64) -> f64 {
    at(seconds).as_second() as f64
}

/// One pass of the leader at `seconds` past the start.
async fn pass_at(world: &World, cluster: KubeCluster, seconds: i64) -> (KubeCluster, Vec<Trigger>) {
    world.set_clock(seconds);
    let (cluster, advanced) = blocking(cluster, move |c| c.advance(Some(second(seconds)))).await;
    let triggers = match advanced {
        switchyard_control::Advance::Events(triggers) => triggers,
        _ => Vec::new(),
    };
    (cluster, triggers)
}

/// The name of the Event told once per stop of adopted `kind` owner `name` asked at the
/// start, for `what` (`checkpoint`, `evictionrefused`).
fn stop_event(name: &str, kind: Integration, what: &str) -> String {
    format!("{name}.{}.{what}.{}", kind.name(), at(0).as_second())
}

/// The one `NotAdopted` Event of `type_` on Job `name` (its fixture UID `uid-<name>`),
/// its note starting as `note` says.
fn not_adopted(name: &str, type_: &str, note: &str) -> Expect {
    Expect::post(EVENTS)
        .body(
            json!({"metadata": {"name": format!("{name}.notadopted.uid-{name}")},
            "reason": NOT_ADOPTED_REASON, "type": type_, "note": note,
            "regarding": {"kind": "Job", "name": name, "namespace": NS}}),
        )
        .respond(201, event_json())
}

/// The pods of indexed Job `job`, released to `n1` and asked to checkpoint at the start.
fn asked_pods(job: &k8s_openapi::api::batch::v1::Job, n: u32) -> Vec<Pod> {
    (0..n)
        .map(|i| asked(&bound(&job_pod(job, i, 0), "n1"), "2026-01-01T00:00:00Z"))
        .collect()
}

pub(crate) async fn pods_that_never_waited_behind_the_gate_are_not_adopted() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    // The team labelled the template for the queue and forgot the gate.
    let job = indexed_job("forgot", 2, "default");
    owners.job(&job);
    let pods: Vec<Pod> = (0..2)
        .map(|i| ungated(&job_pod(&job, i, 0), "n1"))
        .collect();
    owners.pods(&pods);
    let (client, server) = MockServer::start(vec![not_adopted(
        "forgot",
        "Normal",
        "its pods carry the label switchyard.dev/queue but not the scheduling gate*",
    )]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, triggers) = pass_at(&world, cluster, 0).await;
    assert!(
        !format!("{triggers:?}").contains("forgot"),
        "not news for the policy: {triggers:?}"
    );
    owners.pods(&pods);
    let (mut cluster, _) = pass_at(&world, cluster, 5).await;
    assert!(view(&mut cluster, "job:ml/forgot").is_none(), "not adopted");
    // switchyard never stops what it never held.
    let preempt = Action {
        op: Operation::Preempt {
            job: "job:ml/forgot".into(),
        },
        reason: "a more urgent job".into(),
    };
    let (_, outcomes) = blocking(cluster, move |c| c.apply(&[preempt], &[])).await;
    assert!(outcomes[0].is_err(), "{outcomes:?}");
    server.finish().await
}

pub(crate) async fn a_gate_lifted_by_hand_mid_wait_gives_the_job_back() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("mixed", 3, "default");
    owners.job(&job);
    let pods: Vec<Pod> = (0..3).map(|i| job_pod(&job, i, 0)).collect();
    owners.pods(&pods);
    let (client, server) = MockServer::start(vec![not_adopted(
        "mixed",
        "Warning",
        "switchyard does not adopt this job: mixed-0-a0 run without*",
    )]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, triggers) = pass_at(&world, cluster, 0).await;
    assert!(triggers.contains(&Trigger::JobArrived("job:ml/mixed".into())));
    // Someone lifts the gate of one pod by hand; kube-scheduler runs it where it likes.
    owners.pod(&ungated(&pods[0], "n1"));
    let (cluster, triggers) = pass_at(&world, cluster, 5).await;
    assert!(
        triggers.contains(&Trigger::JobFinished("job:ml/mixed".into())),
        "the policy forgets the job: {triggers:?}"
    );
    let (mut cluster, _) = pass_at(&world, cluster, 10).await;
    assert!(view(&mut cluster, "job:ml/mixed").is_none());
    server.finish().await
}

pub(crate) async fn a_checkpoint_every_pod_acknowledges_in_its_log_ends_at_once() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("solo", 1, "default");
    owners.job(&job);
    let pod = asked(&running(&job_pod(&job, 0, 0), "n1"), "2026-01-01T00:00:00Z");
    owners.pod(&pod);
    // A flood of acknowledgements, then one loss line to know the log was read whole.
    let mut log: String = (0..5000)
        .map(|i| {
            format!(
                "2026-01-01T00:00:02.{i:06}Z switchyard: checkpoint-complete step={i} path=/ckpt/{i}\n"
            )
        })
        .collect();
    log.push_str("2026-01-01T00:00:03Z switchyard: step=5000 loss=0.5\n");
    let logs = format!("{PODS}/solo-0-a0/log?*");
    let (client, server) = MockServer::start(vec![
        Expect::get(&logs)
            .query_has(&["container=train", "follow=true"])
            .text(&log),
        told_once(
            "Job",
            "solo",
            "CheckpointAcknowledged",
            &stop_event("solo", Integration::Job, "checkpoint"),
            201,
        ),
        evict(&pod),
        // The log followed again, from where it was read.
        Expect::get(&logs).after(Duration::from_secs(3600)).text(""),
    ]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, _) = pass_at(&world, cluster, 5).await;
    let loss = world.caches.loss.clone();
    tokio::time::timeout(TIMEOUT, async {
        while loss
            .lock()
            .unwrap()
            .samples("job:ml/solo")
            .is_none_or(|s| s.is_empty())
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the follower read the log");
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Well within the grace: evicted now, once, and told once.
    let (cluster, _) = pass_at(&world, cluster, 6).await;
    let (mut cluster, _) = pass_at(&world, cluster, 7).await;
    let last = cluster.last_checkpoints();
    let last = &last["job:ml/solo"];
    assert_eq!(last.outcome, CheckpointOutcome::Acknowledged);
    assert_eq!(last.path.as_deref(), Some("/ckpt/4999"));
    let accessed = server.finish().await;
    assert_eq!(
        accessed
            .iter()
            .filter(|a| a.subresource == "eviction")
            .count(),
        1
    );
    accessed
}

pub(crate) async fn the_api_takes_an_adopted_jobs_acknowledgements_and_loss() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("pair", 2, "default");
    owners.job(&job);
    let pods = asked_pods(&job, 2);
    owners.pods(&pods);
    let mut script = vec![told_once(
        "Job",
        "pair",
        "CheckpointAcknowledged",
        &stop_event("pair", Integration::Job, "checkpoint"),
        201,
    )];
    script.extend(pods.iter().map(evict));
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, _) = pass_at(&world, cluster, 5).await;
    let id = "job:ml/pair";
    let ack = |task: Option<&str>| CheckpointAck {
        path: "/ckpt/1".into(),
        step: Some(100),
        task: task.map(str::to_string),
    };
    let (cluster, ()) = blocking(cluster, move |c| {
        let request = c.checkpoint_request(id);
        assert!(request.requested);
        assert_eq!(request.requested_at, Some(second(0)));
        assert_eq!(request.deadline, Some(second(30)));
        assert!(request.acknowledged.is_empty());
        // Only this job's asked tasks are taken.
        match c.acknowledge_checkpoint(id, ack(Some("job-5"))) {
            Err(AckRefused::UnknownTask { asked, .. }) => assert_eq!(asked, "job-0, job-1"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            c.acknowledge_checkpoint("job:ml/nothing-asked", ack(None)),
            Err(AckRefused::NotRequested { .. })
        ));
        let taken = c.acknowledge_checkpoint(id, ack(Some("job-0"))).unwrap();
        assert_eq!(taken.waiting_for, vec!["job-1".to_string()]);
        assert_eq!(c.checkpoint_request(id).acknowledged, vec!["job-0"]);
        // A sample pushed joins the series; a step already there is not taken twice.
        assert_eq!(c.push_loss(id, 7, 0.5), LossAck::Accepted);
        assert!(matches!(c.push_loss(id, 7, 0.4), LossAck::Ignored { .. }));
    })
    .await;
    // One task still to acknowledge: nothing is evicted.
    let (cluster, _) = pass_at(&world, cluster, 6).await;
    let (cluster, taken) =
        blocking(cluster, move |c| c.acknowledge_checkpoint(id, ack(None))).await;
    assert!(taken.unwrap().waiting_for.is_empty());
    let (mut cluster, _) = pass_at(&world, cluster, 7).await;
    assert_eq!(
        cluster.last_checkpoints()[id].outcome,
        CheckpointOutcome::Acknowledged
    );
    let restarting = view(&mut cluster, id).expect("still adopted until its pods go");
    assert_eq!(
        restarting
            .loss
            .iter()
            .map(|s| (s.step, s.value))
            .collect::<Vec<_>>(),
        vec![(7, 0.5)]
    );
    server.finish().await
}

pub(crate) async fn an_acknowledgement_is_the_pods_not_its_names() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::PyTorchJob], "default");
    let job = pytorchjob("bert", 1, "default");
    owners.pytorchjob(&job);
    let asked_at = "2026-01-01T00:00:00Z";
    let master = asked(&bound(&pytorch_pod(&job, "Master", 0, 0), "n1"), asked_at);
    let worker = asked(&bound(&pytorch_pod(&job, "Worker", 0, 0), "n1"), asked_at);
    owners.pods(&[master.clone(), worker]);
    let (client, server) = MockServer::start(Vec::new());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, _) = pass_at(&world, cluster, 1).await;
    let id = "pytorchjob:ml/bert";
    let ack = |task: &str| CheckpointAck {
        path: "/ckpt/1".into(),
        step: None,
        task: Some(task.into()),
    };
    let (cluster, taken) = blocking(cluster, move |c| {
        c.acknowledge_checkpoint(id, ack("master-0"))
    })
    .await;
    assert_eq!(taken.unwrap().waiting_for, vec!["worker-0".to_string()]);
    // The operator made the master again under its name while the acknowledgement was
    // on its way; the new pod has not checkpointed.
    owners.pod_gone(&master);
    let again = asked(&bound(&pytorch_pod(&job, "Master", 0, 1), "n1"), asked_at);
    owners.pod(&again);
    let (cluster, _) = pass_at(&world, cluster, 2).await;
    let (cluster, taken) = blocking(cluster, move |c| {
        c.acknowledge_checkpoint(id, ack("worker-0"))
    })
    .await;
    assert_eq!(taken.unwrap().waiting_for, vec!["master-0".to_string()]);
    // Not every asked pod acknowledged: nothing is evicted before the grace's end.
    let _ = pass_at(&world, cluster, 5).await;
    server.finish().await
}

pub(crate) async fn an_eviction_a_budget_refuses_backs_off_as_the_api_server_asks() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("guarded", 1, "default");
    owners.job(&job);
    let pod = asked_pods(&job, 1).remove(0);
    owners.pod(&pod);
    let (client, server) = MockServer::start(vec![
        told_once(
            "Job",
            "guarded",
            "CheckpointTimedOut",
            &stop_event("guarded", Integration::Job, "checkpoint"),
            201,
        ),
        evict_refused(&pod, 0),
        Expect::post(EVENTS)
            .body(json!({
                "metadata": {"name": stop_event("guarded", Integration::Job, "evictionrefused")},
                "reason": EVICTION_REFUSED_REASON, "type": "Warning",
                "note": "evicting pod guarded-0-a0 (task job-0) after its checkpoint was refused by the API server: Cannot evict pod as it would violate the pod's disruption budget. The disruption budget train-pdb needs 2 healthy pods and has 2 currently; switchyard asks again in 5 s*",
                "regarding": {"kind": "Job", "name": "guarded", "namespace": NS}}))
            .respond(201, event_json()),
        // Asked again after the first back-off; now the API server asks for 20 s.
        evict_refused(&pod, 20),
        evict(&pod),
    ]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    // The grace (30 s) is over: the eviction is asked for, and refused.
    let (cluster, _) = pass_at(&world, cluster, 31).await;
    let (cluster, _) = pass_at(&world, cluster, 33).await;
    let served = server.served();
    assert_eq!(served, 3, "not asked again within the back-off");
    let (cluster, _) = pass_at(&world, cluster, 36).await;
    // The doubled back-off is 10 s, the API server's 20 s: not before 56.
    let (cluster, _) = pass_at(&world, cluster, 50).await;
    assert_eq!(server.served(), served + 1);
    let (cluster, _) = pass_at(&world, cluster, 56).await;
    let _ = pass_at(&world, cluster, 60).await;
    server.finish().await
}

pub(crate) async fn a_pod_told_its_kind_is_not_enabled_is_not_told_again_by_a_new_leader()
-> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = pytorchjob("bert", 1, "default");
    owners.pytorchjob(&job);
    owners.pod(&pytorch_pod(&job, "Master", 0, 0));
    let event = "bert-master-0.integrationnotenabled.uid-bert-master-0-a0";
    let (client, server) = MockServer::start(vec![
        told_once(
            "Pod",
            "bert-master-0",
            INTEGRATION_NOT_ENABLED_REASON,
            event,
            201,
        ),
        // The next leader (or a second one racing) sends the same Event: the cluster
        // already holds it.
        told_once(
            "Pod",
            "bert-master-0",
            INTEGRATION_NOT_ENABLED_REASON,
            event,
            409,
        ),
    ]);
    let first = world.cluster(client.clone(), Leader::always("switchyard-0"));
    let (first, _) = pass_at(&world, first, 0).await;
    let next = world.cluster(client, Leader::always("switchyard-1"));
    let (next, _) = pass_at(&world, next, 1).await;
    let (_next, _) = pass_at(&world, next, 2).await;
    let (_first, _) = pass_at(&world, first, 3).await;
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_labelled_for_the_queue_that_never_waited_behind_the_gate_are_not_adopted_and_their_owner_is_told_once()
 {
    pods_that_never_waited_behind_the_gate_are_not_adopted().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_lifted_by_hand_while_the_gang_waits_gives_the_job_back_to_its_team() {
    a_gate_lifted_by_hand_mid_wait_gives_the_job_back().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_acknowledged_in_the_log_evicts_at_once_however_many_lines_say_so() {
    a_checkpoint_every_pod_acknowledges_in_its_log_ends_at_once().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_takes_acknowledgements_and_loss_samples_for_an_adopted_id() {
    the_api_takes_an_adopted_jobs_acknowledgements_and_loss().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_heard_from_a_pod_does_not_count_for_the_pod_made_again_under_its_name()
{
    an_acknowledgement_is_the_pods_not_its_names().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_a_disruption_budget_refuses_is_asked_again_after_a_growing_back_off_and_told_once()
 {
    an_eviction_a_budget_refuses_backs_off_as_the_api_server_asks().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integration_not_enabled_is_told_once_per_pod_whichever_replica_leads() {
    a_pod_told_its_kind_is_not_enabled_is_not_told_again_by_a_new_leader().await;
}
