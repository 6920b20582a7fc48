//! Adopting the jobs teams already run: a PyTorchJob (one master, four workers), an
//! indexed batch Job of eight and a JobSet of two replicated jobs, each made by its own
//! operator (the test plays it) with the placement gate and the queue label in its pod
//! template. Each is placed as a gang by the policy through the control loop, preempted
//! (a checkpoint request, then evictions once the grace is over), made again gated by
//! its operator and placed again, its loss read from its pods' logs, and its owner
//! object never written. Beside them: a kind not enabled gets one Event, a pod of
//! another queue is left alone, and a gang its owner has not made whole is not placed.

use k8s_openapi::api::core::v1::Pod;
use switchyard_control::{Cluster, ControlLoop, DecisionRecord, Leader, Step};
use switchyard_core::{Action, Assignment, JobPhase, Operation, TaskPhase, Trigger};
use switchyard_kube::{INTEGRATION_NOT_ENABLED_REASON, Integration, KubeCluster};

use crate::cluster::{default_policy, runtime};
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::owners::*;
use crate::support::world::{World, blocking};

/// One round of the built-in default policy through the control loop.
pub(crate) fn round(cluster: &mut KubeCluster) -> DecisionRecord {
    let slot = default_policy(&runtime());
    let mut control = ControlLoop::new(slot.clone(), slot, 0);
    let Step::Round { triggers, .. } = control.wait_for_round(cluster) else {
        panic!("a round is due");
    };
    control.decide_round(cluster, triggers).record
}

/// The job `id` as the next snapshot shows it.
pub(crate) fn view(cluster: &mut KubeCluster, id: &str) -> Option<switchyard_core::Job> {
    let snapshot = cluster.snapshot(Vec::new());
    snapshot
        .jobs
        .iter()
        .find(|j| j.id == id)
        .map(|j| (**j).clone())
}

/// The release of every one of `pods` to `node`, in any order (the policy's), and the
/// `Placed` Event on the owner (its first, else counted in its series).
fn placed_whole(pods: &[Pod], node: &str, owner: (&str, &str), first: bool) -> Vec<Expect> {
    let mut script: Vec<Expect> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| match i {
            0 => release_adopted(p, node),
            _ => release_adopted(p, node).either_order_with_previous(),
        })
        .collect();
    script.push(match first {
        true => event_on_owner(owner.0, owner.1, "Placed", "Normal"),
        false => event_again_on_owner(owner.1),
    });
    script
}

/// An adopted job and the pods its operator makes, first and after the eviction.
struct Adopted {
    kind: Integration,
    id: &'static str,
    /// The owner's kind and name, as Events name it.
    owner: (&'static str, &'static str),
    /// Puts the owner object in the caches.
    add_owner: Box<dyn FnOnce(&mut Owners) + Send>,
    first: Vec<Pod>,
    again: Vec<Pod>,
    /// The container whose log carries the loss.
    container: &'static str,
}

/// Drives `adopted` through its whole life: placed as a gang, preempted, made again by
/// its operator, placed again, its loss read. Returns what the controller accessed.
async fn a_gang_is_placed_preempted_made_again_and_placed_again(adopted: Adopted) -> Vec<Access> {
    let Adopted {
        kind,
        id,
        owner,
        add_owner,
        first,
        again,
        container,
    } = adopted;
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[kind], "default");
    add_owner(&mut owners);
    owners.pods(&first);

    let mut script = placed_whole(&first, "n1", owner, true);
    script.extend(first.iter().map(ask_checkpoint));
    script.push(event_on_owner(
        owner.0,
        owner.1,
        "CheckpointRequested",
        "Normal",
    ));
    // No pod acknowledged: the grace ends the checkpoint, told once on the owner.
    script.push(told_once(
        owner.0,
        owner.1,
        "CheckpointTimedOut",
        &format!("{}.{}.checkpoint.*", owner.1, kind.name()),
        201,
    ));
    script.extend(first.iter().map(evict));
    script.extend(placed_whole(&again, "n1", owner, false));
    let logged = again[0].metadata.name.clone().unwrap();
    script.push(
        Expect::get(&format!("{PODS}/{logged}/log?*"))
            .query_has(&[&format!("container={container}"), "follow=true"])
            .text("2026-01-01T00:02:00Z epoch 3\n2026-01-01T00:02:01Z switchyard: step=300 loss=0.75\n"),
    );
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));

    // The gang arrives once its operator made every member, and is placed whole.
    let id_owned = id.to_string();
    let (cluster, record) = blocking(cluster, move |c| {
        let waiting = view(c, &id_owned).expect("the adopted job is in the snapshot");
        assert_eq!(waiting.phase, JobPhase::Waiting);
        assert!(waiting.checkpointable, "its owner makes evicted pods again");
        assert!(waiting.tasks.iter().all(|t| t.phase == TaskPhase::Pending));
        round(c)
    })
    .await;
    assert!(
        record.triggers.contains(&Trigger::JobArrived(id.into())),
        "{:?}",
        record.triggers
    );
    placed_every_task(&record, id, first.len());
    let bound: Vec<Pod> = first.iter().map(|p| bound(p, "n1")).collect();
    owners.pods(&bound);

    // Preempted: the pods are asked to checkpoint, and evicted only once the grace is
    // over.
    let preempt = Action {
        op: Operation::Preempt { job: id.into() },
        reason: "a more urgent job".into(),
    };
    let (cluster, outcomes) = blocking(cluster, move |c| c.apply(&[preempt], &[])).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let asked: Vec<Pod> = bound
        .iter()
        .map(|p| asked(p, "2026-01-01T00:00:00Z"))
        .collect();
    owners.pods(&asked);
    world.set_clock(10);
    let served = server.served();
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(10).as_second() as f64))).await;
    assert_eq!(
        server.served(),
        served,
        "no eviction within the checkpoint grace"
    );
    world.set_clock(31);
    let (mut cluster, _) = blocking(cluster, |c| c.advance(Some(at(31).as_second() as f64))).await;

    // The API server marks the evicted pods; while they stop, the job is not placeable.
    let evicted: Vec<Pod> = asked.iter().map(evicted).collect();
    owners.pods(&evicted);
    let restarting = view(&mut cluster, id).expect("still adopted");
    assert_eq!(restarting.phase, JobPhase::Restarting);
    assert!(
        restarting
            .tasks
            .iter()
            .all(|t| t.phase != TaskPhase::Pending)
    );
    // Its operator makes the pods again, gated; the gang is placed again.
    for pod in &evicted {
        owners.pod_gone(pod);
    }
    owners.pods(&again);
    let (cluster, record) = blocking(cluster, round).await;
    assert!(
        record.triggers.contains(&Trigger::JobPreempted(id.into())),
        "{:?}",
        record.triggers
    );
    placed_every_task(&record, id, first.len());

    // Its loss comes from the log of a running pod.
    owners.pod(&running(&again[0], "n1"));
    world.set_clock(40);
    let (_cluster, _) = blocking(cluster, |c| c.advance(Some(at(40).as_second() as f64))).await;
    let loss = world.caches.loss.clone();
    tokio::time::timeout(crate::support::mock::TIMEOUT, async {
        while loss
            .lock()
            .unwrap()
            .samples(id)
            .is_none_or(|s| s.is_empty())
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the follower read the log");
    let samples = loss.lock().unwrap().samples(id).unwrap();
    assert_eq!((samples[0].step, samples[0].value), (300, 0.75));

    let accessed = server.finish().await;
    never_wrote_an_owner(&accessed);
    assert_eq!(
        accessed
            .iter()
            .filter(|a| a.subresource == "eviction")
            .count(),
        first.len(),
        "every member evicted once"
    );
    accessed
}

/// The decision placed each of `tasks` tasks of `id` (whether in one action or one per
/// task, they are released together) and nothing failed.
fn placed_every_task(record: &DecisionRecord, id: &str, tasks: usize) {
    assert!(record.arm_a.failed.is_empty(), "{record:?}");
    let placed: std::collections::BTreeSet<&str> = record
        .arm_a
        .accepted
        .iter()
        .flat_map(|a| match &a.op {
            Operation::Place { job, assignments } if job == id => assignments.as_slice(),
            _ => &[],
        })
        .map(|a| a.task.as_str())
        .collect();
    assert_eq!(placed.len(), tasks, "{record:?}");
}

/// No request of `accessed` writes a Job, a JobSet or a PyTorchJob, and no pod is
/// deleted.
fn never_wrote_an_owner(accessed: &[Access]) {
    for a in accessed {
        let owner = matches!(a.resource.as_str(), "jobs" | "jobsets" | "pytorchjobs");
        assert!(
            !owner || matches!(a.verb.as_str(), "get" | "list" | "watch"),
            "an owner was written: {a:?}"
        );
        assert!(
            !(a.resource == "pods" && a.verb == "delete"),
            "a pod was deleted: {a:?}"
        );
    }
}

pub(crate) async fn a_pytorchjob_of_a_master_and_four_workers() -> Vec<Access> {
    let job = pytorchjob("bert", 4, "default");
    let pods = |attempt| {
        let mut pods = vec![pytorch_pod(&job, "Master", 0, attempt)];
        pods.extend((0..4).map(|i| pytorch_pod(&job, "Worker", i, attempt)));
        pods
    };
    let (first, again) = (pods(0), pods(1));
    a_gang_is_placed_preempted_made_again_and_placed_again(Adopted {
        kind: Integration::PyTorchJob,
        id: "pytorchjob:ml/bert",
        owner: ("PyTorchJob", "bert"),
        add_owner: Box::new(move |o| o.pytorchjob(&job)),
        first,
        again,
        container: "pytorch",
    })
    .await
}

pub(crate) async fn an_indexed_job_of_eight() -> Vec<Access> {
    let job = indexed_job("sweep", 8, "default");
    let first = (0..8).map(|i| job_pod(&job, i, 0)).collect();
    let again = (0..8).map(|i| job_pod(&job, i, 1)).collect();
    a_gang_is_placed_preempted_made_again_and_placed_again(Adopted {
        kind: Integration::Job,
        id: "job:ml/sweep",
        owner: ("Job", "sweep"),
        add_owner: Box::new(move |o| o.job(&job)),
        first,
        again,
        container: "train",
    })
    .await
}

/// The pods of JobSet `set` (driver, then two worker Jobs of two), their `attempt`-th.
fn jobset_pods(set: &serde_json::Value, attempt: u32) -> Vec<Pod> {
    vec![
        jobset_pod(set, "driver", 0, 0, attempt),
        jobset_pod(set, "workers", 0, 0, attempt),
        jobset_pod(set, "workers", 0, 1, attempt),
        jobset_pod(set, "workers", 1, 0, attempt),
        jobset_pod(set, "workers", 1, 1, attempt),
    ]
}

pub(crate) async fn a_jobset_of_two_replicated_jobs() -> Vec<Access> {
    let set = jobset("llm", "default");
    let (first, again) = (jobset_pods(&set, 0), jobset_pods(&set, 1));
    a_gang_is_placed_preempted_made_again_and_placed_again(Adopted {
        kind: Integration::JobSet,
        id: "jobset:ml/llm",
        owner: ("JobSet", "llm"),
        add_owner: Box::new(move |o| o.jobset(&set)),
        first,
        again,
        container: "train",
    })
    .await
}

pub(crate) async fn a_kind_not_enabled_gets_one_event() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    // Only batch Jobs are adopted; a PyTorchJob's gated pod waits, and is told why.
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = pytorchjob("bert", 1, "default");
    let master = pytorch_pod(&job, "Master", 0, 0);
    owners.pytorchjob(&job);
    owners.pod(&master);
    let (client, server) = MockServer::start(vec![event_on_pod(
        "bert-master-0",
        INTEGRATION_NOT_ENABLED_REASON,
    )]);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, _) = blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    world.set_clock(5);
    owners.pod(&master);
    let (mut cluster, _) = blocking(cluster, |c| c.advance(Some(at(5).as_second() as f64))).await;
    assert!(
        view(&mut cluster, "pytorchjob:ml/bert").is_none(),
        "not adopted"
    );
    server.finish().await
}

pub(crate) async fn a_pod_of_another_queue_is_left_alone() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("theirs", 2, "team-b");
    owners.job(&job);
    owners.pods(&[job_pod(&job, 0, 0), job_pod(&job, 1, 0)]);
    let (client, server) = MockServer::start(Vec::new());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (mut cluster, advanced) =
        blocking(cluster, |c| c.advance(Some(at(0).as_second() as f64))).await;
    assert!(
        !format!("{advanced:?}").contains("theirs"),
        "no trigger for another queue's job: {advanced:?}"
    );
    assert!(view(&mut cluster, "job:ml/theirs").is_none());
    server.finish().await
}

pub(crate) async fn a_gang_with_a_member_missing_is_not_placed() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::JobSet], "default");
    let set = jobset("llm", "default");
    owners.jobset(&set);
    // The second worker Job has not made its second pod yet.
    let mut pods = jobset_pods(&set, 0);
    pods.pop();
    owners.pods(&pods);
    let (client, server) = MockServer::start(Vec::new());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let place = Action {
        op: Operation::Place {
            job: "jobset:ml/llm".into(),
            assignments: ["driver-0-0", "workers-0-0", "workers-0-1", "workers-1-0"]
                .iter()
                .map(|t| Assignment {
                    task: t.to_string(),
                    node: "n1".into(),
                })
                .collect(),
        },
        reason: "fits".into(),
    };
    let (_, (job, triggers, outcomes)) = blocking(cluster, move |c| {
        let advanced = c.advance(Some(at(0).as_second() as f64));
        let job = view(c, "jobset:ml/llm").expect("in the snapshot, waiting");
        (job, advanced, c.apply(&[place], &[]))
    })
    .await;
    assert_eq!(job.phase, JobPhase::Waiting);
    assert!(
        job.tasks.iter().all(|t| t.phase == TaskPhase::Restarting),
        "no member is placeable before the gang is whole: {:?}",
        job.tasks
    );
    assert!(
        !format!("{triggers:?}").contains("jobset:ml/llm"),
        "not arrived yet: {triggers:?}"
    );
    assert!(outcomes[0].is_err(), "{outcomes:?}");
    server.finish().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pytorchjob_of_a_master_and_four_workers_is_placed_preempted_and_placed_again() {
    a_pytorchjob_of_a_master_and_four_workers().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indexed_job_of_eight_is_placed_preempted_and_placed_again() {
    an_indexed_job_of_eight().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_of_two_replicated_jobs_is_placed_preempted_and_placed_again() {
    a_jobset_of_two_replicated_jobs().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_pod_of_a_kind_not_enabled_gets_one_event_not_one_per_round() {
    a_kind_not_enabled_gets_one_event().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_of_another_queue_is_neither_adopted_nor_touched() {
    a_pod_of_another_queue_is_left_alone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_whose_owner_has_not_made_every_member_waits_unplaceable() {
    a_gang_with_a_member_missing_is_not_placed().await;
}
