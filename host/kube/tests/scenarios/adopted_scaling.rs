//! What the policy may change of an adopted job's resources. A CPU weight resizes an
//! adopted pod in place relative to its owner's pod template (not to the pod's request,
//! which an earlier resize changed), and what the kubelet did with it is told on the
//! owner (an infeasible one as a Warning, once); a weight the template cannot carry, or one the API server refuses, is a failed
//! action with its reason. An elastic PyTorchJob offers its `elasticPolicy` bounds and
//! is scaled through its own `scale` subresource: grown in a round of DRAGON, the
//! workers its operator makes arrive gated and the next pass releases them to the nodes
//! DRAGON chose; a grow whose nodes no longer fit, or kept past its time limit, leaves
//! them to the policy's placement; scaled down, the job restarts while
//! the operator deletes the workers past the new count (the test plays the operator).
//! A PyTorchJob that is not elastic keeps fixed bounds and a scale of it is refused
//! with the reason.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use switchyard_control::{Advance, Cluster, ControlLoop, Leader, PolicySlot};
use switchyard_core::{Action, Assignment, JobPhase, Operation, Settings, TaskPhase, Trigger};
use switchyard_kube::{Integration, KubeCluster};
use switchyard_runtime::PolicyRef;

use crate::adoption::view;
use crate::cluster::runtime;
use crate::support::fixtures::*;
use crate::support::mock::{Access, Expect, MockServer};
use crate::support::owners::*;
use crate::support::world::{World, blocking};

/// The `scale` subresource of PyTorchJob `name`.
fn scale_path(name: &str) -> String {
    format!("/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/{name}/scale")
}

/// PyTorchJob `name` of one master and `workers` workers, elastic between `min` and
/// `max` workers (the operator's `elasticPolicy`), at resourceVersion `version`.
fn elastic_pytorchjob(name: &str, workers: u32, (min, max): (u32, u32), version: &str) -> Value {
    let mut job = pytorchjob(name, workers, "default");
    job["spec"]["elasticPolicy"] = json!({"rdzvBackend": "c10d", "minReplicas": min,
        "maxReplicas": max, "maxRestarts": 10});
    job["metadata"]["resourceVersion"] = json!(version);
    job
}

/// The master and the first `workers` workers of `job`, bound to `node`.
fn bound_members(job: &Value, workers: u32, node: &str) -> Vec<Pod> {
    let mut pods = vec![bound(&pytorch_pod(job, "Master", 0, 0), node)];
    pods.extend((0..workers).map(|i| bound(&pytorch_pod(job, "Worker", i, 0), node)));
    pods
}

/// `pod` whose container `container` asks for `spec` CPU and runs with `status` (an
/// in-place resize made or under way), with the kubelet's `condition` on the resize
/// (`PodResizeInProgress`, ...) when it says one.
fn with_cpu(pod: &Pod, container: &str, spec: &str, status: &str, condition: Option<Value>) -> Pod {
    let mut value = serde_json::to_value(pod).unwrap();
    value["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!(spec);
    value["status"]["containerStatuses"] = json!([{"name": container, "image": "x",
        "imageID": "", "ready": true, "restartCount": 0,
        "resources": {"requests": {"cpu": status}}}]);
    if let Some(condition) = condition {
        value["status"]["conditions"] = json!([condition]);
    }
    let version: u32 = value["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    value["metadata"]["resourceVersion"] = json!((version + 1).to_string());
    serde_json::from_value(value).unwrap()
}

/// The in-place resize of `pod`'s container `container` to `cpu`.
fn resize(pod: &Pod, container: &str, cpu: &str) -> Expect {
    let name = pod.metadata.name.as_deref().unwrap();
    Expect::patch(&format!("{PODS}/{name}/resize"))
        .body(json!({"spec": {"containers": [{"name": container,
            "resources": {"requests": {"cpu": cpu}}}]}}))
        .ok(pod_json(name))
}

/// `op` with a reason.
fn action(op: Operation) -> Action {
    Action {
        op,
        reason: "the policy's reason".into(),
    }
}

/// The one failure of `outcomes`, as its message.
fn refusal(outcomes: &[Result<(), switchyard_control::ActionFailure>]) -> String {
    match outcomes {
        [Err(failure)] => failure.message.clone(),
        other => panic!("one refused action expected: {other:?}"),
    }
}

/// Runs a pass of the leader at `seconds` after the start.
async fn pass(world: &World, cluster: KubeCluster, seconds: i64) -> KubeCluster {
    world.set_clock(seconds);
    blocking(cluster, move |c| {
        c.advance(Some(at(seconds).as_second() as f64))
    })
    .await
    .0
}

pub(crate) async fn a_weight_resizes_an_adopted_pod_relative_to_its_template() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("sweep", 2, "default");
    owners.job(&job);
    // An earlier weight of 0.5 runs: the template asks 1 CPU, the pods 500m.
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            let pod = bound(&job_pod(&job, i, 0), "n1");
            with_cpu(&pod, "train", "500m", "500m", None)
        })
        .collect();
    owners.pods(&pods);
    let script = vec![
        // A quarter of the template's 1 CPU, not of the pod's 500m.
        resize(&pods[0], "train", "250m"),
        event_on_owner("Job", "sweep", "ResizeRequested", "Normal"),
        event_on_owner("Job", "sweep", "ResizeDeferred", "Normal"),
        event_on_owner("Job", "sweep", "Resized", "Normal"),
    ];
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let weight = action(Operation::SetCpuWeight {
        job: "job:ml/sweep".into(),
        task: "job-0".into(),
        weight: 0.25,
    });
    let (cluster, (before, outcomes)) = blocking(cluster, move |c| {
        let before: Vec<f64> = view(c, "job:ml/sweep")
            .unwrap()
            .tasks
            .iter()
            .map(|t| t.cpu_weight)
            .collect();
        (before, c.apply(&[weight], &[]))
    })
    .await;
    assert_eq!(before, [0.5, 0.5], "the weight is the template's share");
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");

    // The kubelet takes its time, then applies it: the owner is told each, once.
    let cluster = pass(&world, cluster, 1).await;
    owners.pod(&with_cpu(
        &pods[0],
        "train",
        "250m",
        "500m",
        Some(json!({"type": "PodResizeInProgress", "status": "True"})),
    ));
    let cluster = pass(&world, cluster, 2).await;
    let cluster = pass(&world, cluster, 3).await;
    owners.pod(&with_cpu(&pods[0], "train", "250m", "250m", None));
    let cluster = pass(&world, cluster, 4).await;
    let mut cluster = pass(&world, cluster, 5).await;
    let after: Vec<f64> = view(&mut cluster, "job:ml/sweep")
        .unwrap()
        .tasks
        .iter()
        .map(|t| t.cpu_weight)
        .collect();
    assert_eq!(after, [0.25, 0.5]);
    server.finish().await
}

pub(crate) async fn a_weight_the_template_or_the_cluster_refuses_is_a_failed_action() -> Vec<Access>
{
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::Job], "default");
    let job = indexed_job("sweep", 1, "default");
    // Its twin requests no CPU, and a third restarts its container to resize.
    let mut no_cpu = serde_json::to_value(indexed_job("lean", 1, "default")).unwrap();
    no_cpu["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({});
    let no_cpu = serde_json::from_value(no_cpu).unwrap();
    let mut restarting = serde_json::to_value(indexed_job("strict", 1, "default")).unwrap();
    restarting["spec"]["template"]["spec"]["containers"][0]["resizePolicy"] =
        json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]);
    let restarting = serde_json::from_value(restarting).unwrap();
    for owner in [&job, &no_cpu, &restarting] {
        owners.job(owner);
        owners.pod(&bound(&job_pod(owner, 0, 0), "n1"));
    }
    let pod = bound(&job_pod(&job, 0, 0), "n1");
    let script = vec![
        Expect::patch(&format!(
            "{PODS}/{}/resize",
            pod.metadata.name.as_deref().unwrap()
        ))
        .fail(403, "Forbidden", "pod resize is forbidden by policy"),
        event_on_owner("Job", "sweep", "ResizeRefused", "Warning"),
    ];
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let weight = |job: &str| {
        action(Operation::SetCpuWeight {
            job: format!("job:ml/{job}"),
            task: "job-0".into(),
            weight: 0.5,
        })
    };
    let (_, outcomes) = blocking(cluster, move |c| {
        ["sweep", "lean", "strict"].map(|j| c.apply(&[weight(j)], &[]))
    })
    .await;
    let [refused, lean, strict] = outcomes.map(|o| refusal(&o));
    assert!(refused.contains("forbidden by policy"), "{refused}");
    assert!(lean.contains("requests no CPU"), "{lean}");
    assert!(strict.contains("RestartContainer"), "{strict}");
    server.finish().await
}

pub(crate) async fn a_resize_the_node_cannot_fit_is_told_on_the_owner_once() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 8));
    let mut owners = world.adopting(&[Integration::JobSet], "default");
    let set = jobset("llm", "default");
    owners.jobset(&set);
    let driver = bound(&jobset_pod(&set, "driver", 0, 0, 0), "n1");
    owners.pod(&driver);
    let script = vec![
        // Half of the replicated job's template, 1 CPU.
        resize(&driver, "train", "500m"),
        event_on_owner("JobSet", "llm", "ResizeRequested", "Normal"),
        event_on_owner("JobSet", "llm", "ResizeInfeasible", "Warning"),
    ];
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let weight = action(Operation::SetCpuWeight {
        job: "jobset:ml/llm".into(),
        task: "driver-0-0".into(),
        weight: 0.5,
    });
    let (cluster, outcomes) = blocking(cluster, move |c| c.apply(&[weight], &[])).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let infeasible = json!({"type": "PodResizePending", "status": "True", "reason": "Infeasible",
        "message": "Node didn't have enough capacity: cpu"});
    owners.pod(&with_cpu(&driver, "train", "500m", "1", Some(infeasible)));
    let cluster = pass(&world, cluster, 1).await;
    let mut cluster = pass(&world, cluster, 2).await;
    let task = view(&mut cluster, "jobset:ml/llm").unwrap().tasks[0].clone();
    assert_eq!(
        task.cpu_weight, 1.0,
        "the weight is what runs, not what was asked"
    );
    server.finish().await
}

/// DRAGON as configured here: a resource idle at all (`mu = 0`) scales up the jobs on
/// its node at once.
fn dragon_growing_at_once() -> PolicySlot {
    let module = PolicyRef::parse("dragon")
        .unwrap()
        .load(&runtime())
        .expect("the built-in DRAGON policy");
    let settings = Settings::from([
        ("mu".to_string(), "0".to_string()),
        ("scaling".to_string(), "true".to_string()),
    ]);
    PolicySlot::configure(module, &settings).unwrap()
}

/// The operator's side of a grow of `job` to `workers` workers: the PyTorchJob at its
/// new count and resourceVersion `version`, and the new workers `new`, gated.
fn operator_grows(owners: &mut Owners, job: &Value, workers: u32, version: &str, new: &[Pod]) {
    let mut scaled = job.clone();
    scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(workers);
    scaled["metadata"]["resourceVersion"] = json!(version);
    owners.pytorchjob(&scaled);
    for pod in new {
        owners.pod(pod);
    }
}

/// PyTorchJob `bert` of a master and two workers running on n1, elastic up to four
/// workers, with the clock at 0: its owners, its JSON, the two workers a grow to four
/// makes, and the calls of that grow: the scale, then the new workers' release to
/// `placed_on` (by whichever path).
fn bert_grown_to_four(
    world: &mut World,
    placed_on: &str,
) -> (Owners, Value, Vec<Pod>, Vec<Expect>) {
    world.set_clock(0);
    let mut owners = world.adopting(&[Integration::PyTorchJob], "default");
    let job = elastic_pytorchjob("bert", 2, (1, 4), "7");
    owners.pytorchjob(&job);
    owners.pods(&bound_members(&job, 2, "n1"));
    let new: Vec<Pod> = (2..4).map(|i| pytorch_pod(&job, "Worker", i, 0)).collect();
    let script = vec![
        Expect::patch(&scale_path("bert"))
            .body(json!({"metadata": {"resourceVersion": "7"}, "spec": {"replicas": 4}}))
            .ok(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "bert", "namespace": NS}, "spec": {"replicas": 4},
                "status": {"replicas": 2}})),
        event_on_owner("PyTorchJob", "bert", "ScaleRequested", "Normal"),
        release_adopted(&new[0], placed_on),
        release_adopted(&new[1], placed_on).either_order_with_previous(),
        event_on_owner("PyTorchJob", "bert", "Placed", "Normal"),
    ];
    (owners, job, new, script)
}

pub(crate) async fn dragon_grows_an_elastic_pytorchjob_and_its_new_workers_go_where_it_decided()
-> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let (mut owners, job, new, script) = bert_grown_to_four(&mut world, "n1");
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (cluster, record) = blocking(cluster, |c| {
        let slot = dragon_growing_at_once();
        let mut control = ControlLoop::new(slot.clone(), slot, 0);
        control.decide_round(c, vec![Trigger::Tick]).record
    })
    .await;
    let grow = Operation::Scale {
        job: "pytorchjob:ml/bert".into(),
        replicas: 4,
        nodes: vec!["n1".into(), "n1".into()],
    };
    let accepted: Vec<&Operation> = record.arm_a.accepted.iter().map(|a| &a.op).collect();
    assert_eq!(
        accepted,
        [&grow],
        "DRAGON grows the job into n1's idle room"
    );
    assert!(record.arm_a.failed.is_empty(), "{record:?}");

    // The operator makes one new worker, then the other: nothing is released before
    // both are there, then both go to the nodes of the grow, with no round between.
    operator_grows(&mut owners, &job, 4, "8", &new[..1]);
    let cluster = pass(&world, cluster, 1).await;
    owners.pod(&new[1]);
    world.set_clock(2);
    let (_, triggers) = blocking(cluster, |c| c.advance(Some(at(2).as_second() as f64))).await;
    assert!(
        !matches!(&triggers, Advance::Events(t) if t.iter().any(|t| matches!(t,
            Trigger::JobArrived(j) | Trigger::JobPreempted(j) if j == "pytorchjob:ml/bert"))),
        "the released workers are no news for the policy: {triggers:?}"
    );
    let accessed = server.finish().await;
    only_scaled_the_owner(&accessed);
    accessed
}

/// A grow to the nodes `decided` whose new workers all arrive at `seconds` after it,
/// when their release is no longer due (too late, or the nodes gone): they wait
/// behind the gate, and the policy's placement on n2 is carried out.
async fn a_grow_not_honoured_leaves_its_new_workers_to_a_later_placement(
    decided: &str,
    seconds: i64,
) -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64)).node(node("n2", 64));
    let (mut owners, job, new, script) = bert_grown_to_four(&mut world, "n2");
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let scale = action(Operation::Scale {
        job: "pytorchjob:ml/bert".into(),
        replicas: 4,
        nodes: vec![decided.into(), decided.into()],
    });
    let (cluster, (offered, outcomes)) = blocking(cluster, move |c| {
        let offered = view(c, "pytorchjob:ml/bert").unwrap().replicas;
        (offered, c.apply(&[scale], &[]))
    })
    .await;
    assert_eq!(
        (
            offered.role.as_str(),
            offered.current,
            offered.min,
            offered.max
        ),
        ("worker", 2, 1, 4),
        "the workers' elasticPolicy bounds; the master is not counted"
    );
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");

    // The operator makes the new workers: they wait behind the gate, placeable.
    operator_grows(&mut owners, &job, 4, "8", &new[..1]);
    let (cluster, partial) = blocking(cluster, |c| view(c, "pytorchjob:ml/bert").unwrap()).await;
    assert_eq!(partial.replicas.current, 4);
    assert!(
        partial.tasks.iter().all(|t| t.phase != TaskPhase::Pending),
        "no new worker is placeable before the operator made them all: {:?}",
        partial.tasks
    );
    owners.pod(&new[1]);
    let cluster = pass(&world, cluster, seconds).await;
    let (cluster, waiting) = blocking(cluster, |c| view(c, "pytorchjob:ml/bert").unwrap()).await;
    assert_eq!(
        waiting.phase,
        JobPhase::Running,
        "its first three still run"
    );
    let pending: Vec<&str> = waiting
        .tasks
        .iter()
        .filter(|t| t.phase == TaskPhase::Pending)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(pending, ["worker-2", "worker-3"]);

    // The policy's placement is carried out as any other.
    let place = action(Operation::Place {
        job: "pytorchjob:ml/bert".into(),
        assignments: ["worker-2", "worker-3"]
            .map(|task| Assignment {
                task: task.into(),
                node: "n2".into(),
            })
            .to_vec(),
    });
    let (_, outcomes) = blocking(cluster, move |c| c.apply(&[place], &[])).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let accessed = server.finish().await;
    only_scaled_the_owner(&accessed);
    accessed
}

pub(crate) async fn an_elastic_pytorchjob_scaled_down_restarts_while_its_workers_go() -> Vec<Access>
{
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::PyTorchJob], "default");
    let job = elastic_pytorchjob("bert", 4, (2, 4), "3");
    owners.pytorchjob(&job);
    let pods = bound_members(&job, 4, "n1");
    owners.pods(&pods);
    let script = vec![
        Expect::patch(&scale_path("bert"))
            .body(json!({"metadata": {"resourceVersion": "3"}, "spec": {"replicas": 2}}))
            .ok(json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "bert", "namespace": NS}, "spec": {"replicas": 2}})),
        event_on_owner("PyTorchJob", "bert", "ScaleRequested", "Normal"),
    ];
    let (client, server) = MockServer::start(script);
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let scale = |replicas| {
        action(Operation::Scale {
            job: "pytorchjob:ml/bert".into(),
            replicas,
            nodes: Vec::new(),
        })
    };
    let (cluster, outcomes) = blocking(cluster, move |c| c.apply(&[scale(2)], &[])).await;
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");

    // The operator deletes the workers at index 2 and above (a plain delete).
    let mut scaled = job.clone();
    scaled["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(2);
    owners.pytorchjob(&scaled);
    for pod in &pods[3..] {
        owners.pod(&terminating(pod.clone()));
    }
    let (cluster, (stopping, again)) = blocking(cluster, move |c| {
        let stopping = view(c, "pytorchjob:ml/bert").unwrap();
        (stopping, c.apply(&[scale(3)], &[]))
    })
    .await;
    assert_eq!(stopping.phase, JobPhase::Restarting);
    assert_eq!(stopping.replicas.current, 2);
    let again = refusal(&again);
    assert!(again.contains("restarting"), "{again}");
    for pod in &pods[3..] {
        owners.pod_gone(pod);
    }
    let (_, settled) = blocking(cluster, |c| view(c, "pytorchjob:ml/bert").unwrap()).await;
    assert_eq!(settled.phase, JobPhase::Running);
    let names: Vec<&str> = settled.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["master-0", "worker-0", "worker-1"]);
    assert_eq!(
        (
            settled.replicas.current,
            settled.replicas.min,
            settled.replicas.max
        ),
        (2, 2, 4)
    );
    let accessed = server.finish().await;
    only_scaled_the_owner(&accessed);
    accessed
}

pub(crate) async fn a_pytorchjob_that_is_not_elastic_is_not_scaled() -> Vec<Access> {
    let mut world = World::new().node(node("n1", 64));
    let mut owners = world.adopting(&[Integration::PyTorchJob], "default");
    let fixed = pytorchjob("fixed", 4, "default");
    // Elastic, but its operator's HorizontalPodAutoscaler scales it.
    let mut autoscaled = elastic_pytorchjob("autoscaled", 2, (1, 4), "1");
    autoscaled["spec"]["elasticPolicy"]["metrics"] = json!([{"type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]);
    for (job, workers) in [(&fixed, 4), (&autoscaled, 2)] {
        owners.pytorchjob(job);
        owners.pods(&bound_members(job, workers, "n1"));
    }
    let (client, server) = MockServer::start(Vec::new());
    let cluster = world.cluster(client, Leader::always("switchyard-0"));
    let (_, (bounds, outcomes)) = blocking(cluster, move |c| {
        let bounds = view(c, "pytorchjob:ml/fixed").unwrap().replicas;
        let scale = |job: &str| {
            action(Operation::Scale {
                job: format!("pytorchjob:ml/{job}"),
                replicas: 3,
                nodes: Vec::new(),
            })
        };
        (
            bounds,
            ["fixed", "autoscaled"].map(|j| c.apply(&[scale(j)], &[])),
        )
    })
    .await;
    assert_eq!((bounds.current, bounds.min, bounds.max), (4, 4, 4));
    let [fixed, autoscaled] = outcomes.map(|o| refusal(&o));
    assert!(fixed.contains("no spec.elasticPolicy"), "{fixed}");
    assert!(
        autoscaled.contains("HorizontalPodAutoscaler"),
        "{autoscaled}"
    );
    server.finish().await
}

/// The only write to an owner in `accessed` is its `scale` subresource; no pod deleted.
fn only_scaled_the_owner(accessed: &[Access]) {
    for a in accessed {
        let owner = matches!(a.resource.as_str(), "jobs" | "jobsets" | "pytorchjobs");
        let reads = matches!(a.verb.as_str(), "get" | "list" | "watch");
        let scales = a.subresource == "scale" && a.verb == "patch";
        assert!(!owner || reads || scales, "an owner was written: {a:?}");
        assert!(
            !(a.resource == "pods" && a.verb == "delete"),
            "a pod was deleted: {a:?}"
        );
    }
    assert!(accessed.iter().any(|a| a.subresource == "scale"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_weight_resizes_an_adopted_pod_relative_to_its_owner_s_template_and_the_owner_hears_what_became_of_it()
 {
    a_weight_resizes_an_adopted_pod_relative_to_its_template().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_weight_is_refused_without_a_cpu_request_with_a_restarting_resize_policy_or_by_the_api_server()
 {
    a_weight_the_template_or_the_cluster_refuses_is_a_failed_action().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_the_node_cannot_fit_is_told_on_the_owner_as_infeasible_once() {
    a_resize_the_node_cannot_fit_is_told_on_the_owner_once().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dragon_grows_an_elastic_pytorchjob_through_its_scale_subresource_and_the_new_workers_are_released_to_the_nodes_it_chose()
 {
    dragon_grows_an_elastic_pytorchjob_and_its_new_workers_go_where_it_decided().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_workers_of_a_grow_kept_past_its_time_limit_wait_for_the_policy_s_placement() {
    // A grow's nodes are kept five minutes.
    a_grow_not_honoured_leaves_its_new_workers_to_a_later_placement("n1", 301).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_workers_of_a_grow_whose_nodes_no_longer_fit_wait_for_the_policy_s_placement() {
    a_grow_not_honoured_leaves_its_new_workers_to_a_later_placement("n9", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elastic_pytorchjob_scaled_down_restarts_until_the_operator_deleted_its_extra_workers() {
    an_elastic_pytorchjob_scaled_down_restarts_while_its_workers_go().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pytorchjob_without_elastic_bounds_or_scaled_by_an_autoscaler_is_refused_a_scale() {
    a_pytorchjob_that_is_not_elastic_is_not_scaled().await;
}
