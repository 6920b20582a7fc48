//! Test fixtures: builders for TrainingJobs, pods and nodes, and the JSON the scripted
//! API server answers with.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::Reporter;
use switchyard_core::{Action, Assignment, Operation, Snapshot};
use switchyard_kube::{
    Actor, Checkpoint, CheckpointMethod, MoveKindRecord, MoveRecord, PLACEMENT_GATE,
    PendingRestart, Phase, Placement, RELEASED_ANNOTATION, Refusal, RestartAction, TaskTarget,
    TrainingJob, TrainingJobStatus,
};

use super::mock::Expect;

/// Namespace of every fixture.
pub const NS: &str = "ml";

/// A TrainingJob builder: `JobBuilder::new("a").worker(2, 1, 4).checkpoint(..)`.
pub struct JobBuilder {
    value: Value,
}

impl JobBuilder {
    /// A job with one `main` role of one replica requesting 2 CPUs and 4 GiB.
    pub fn new(name: &str) -> Self {
        let value = json!({
            "apiVersion": "switchyard.dev/v1alpha1",
            "kind": "TrainingJob",
            "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
                "resourceVersion": "5", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "roles": [role("main", 1, None)],
                "progress": {"log": {"pattern": r"loss=(?P<value>[0-9.eE+-]+)", "container": "trainer"}},
            }
        });
        Self { value }
    }

    /// A builder starting from a job's JSON.
    pub fn from_json(value: Value) -> Self {
        Self { value }
    }

    /// Replaces the roles with a `ps` (one replica) and a scalable `worker` role.
    pub fn ps_worker(mut self, workers: u32, min: u32, max: u32) -> Self {
        self.value["spec"]["roles"] = json!([
            role("ps", 1, None),
            role("worker", workers, Some((min, max)))
        ]);
        self
    }

    /// Adds checkpoint support.
    pub fn checkpoint(mut self, method: CheckpointMethod, grace: u32) -> Self {
        self.value["spec"]["checkpoint"] = serde_json::to_value(Checkpoint {
            method,
            grace_period_seconds: grace,
        })
        .unwrap();
        self
    }

    /// Progress by pushes to the API only (no log to follow).
    pub fn push_progress(mut self) -> Self {
        self.value["spec"]["progress"] = json!({"push": true});
        self
    }

    /// Every role's training container asks for host port `port`.
    pub fn host_port(mut self, port: u16) -> Self {
        for role in self.value["spec"]["roles"].as_array_mut().unwrap() {
            role["template"]["spec"]["containers"][0]["ports"] =
                json!([{"containerPort": port, "hostPort": port}]);
        }
        self
    }

    /// Every role's pods mount claim `claim`.
    pub fn mounting(mut self, claim: &str) -> Self {
        for role in self.value["spec"]["roles"].as_array_mut().unwrap() {
            role["template"]["spec"]["volumes"] =
                json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
        }
        self
    }

    /// Gives every role a generic ephemeral volume `scratch` of storage class `class`.
    pub fn ephemeral(mut self, class: &str) -> Self {
        for role in self.value["spec"]["roles"].as_array_mut().unwrap() {
            role["template"]["spec"]["volumes"] = json!([{"name": "scratch", "ephemeral": {
                "volumeClaimTemplate": {"metadata": {"labels": {"kind": "scratch"}},
                    "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "10Gi"}}}}}}]);
        }
        self
    }

    /// Sets the status.
    pub fn status(mut self, status: TrainingJobStatus) -> Self {
        self.value["status"] = serde_json::to_value(status).unwrap();
        self
    }

    /// The job as the API server would return it.
    pub fn json(&self) -> Value {
        self.value.clone()
    }

    /// The typed job.
    pub fn build(&self) -> TrainingJob {
        serde_json::from_value(self.value.clone()).expect("a valid TrainingJob fixture")
    }
}

fn role(name: &str, replicas: u32, scale: Option<(u32, u32)>) -> Value {
    let mut r = json!({
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [{
            "name": "trainer", "image": "ghcr.io/example/resnet:1",
            "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}
        }]}}
    });
    if let Some((min, max)) = scale {
        r["scalable"] = json!(true);
        r["minReplicas"] = json!(min);
        r["maxReplicas"] = json!(max);
    }
    r
}

/// A controller pod of `job` running `task` on `node` (`None`: not bound, and no longer
/// held by the placement gate).
pub fn pod(job: &str, task: &str, generation: u32, node: Option<&str>) -> Pod {
    let role = task.rsplit_once('-').unwrap().0;
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{job}-{task}-{generation}"), "namespace": NS,
            "uid": format!("uid-{job}-{task}-{generation}"),
            "labels": {"switchyard.dev/job": job, "switchyard.dev/task": task, "switchyard.dev/role": role,
                "switchyard.dev/job-uid": format!("uid-{job}"), "switchyard.dev/generation": generation.to_string()},
            "ownerReferences": [{"apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                "name": job, "uid": format!("uid-{job}"), "controller": true}]},
        "spec": {"nodeName": node,
            "containers": [{"name": "trainer", "image": "ghcr.io/example/resnet:1",
                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]},
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}
    }))
    .unwrap()
}

/// `pod` held by the placement gate: made, no node chosen for it yet.
pub fn held(mut pod: Pod) -> Pod {
    let spec = pod.spec.as_mut().unwrap();
    spec.node_name = None;
    spec.scheduling_gates = Some(vec![
        serde_json::from_value(json!({"name": PLACEMENT_GATE})).unwrap(),
    ]);
    pod.status.get_or_insert_with(Default::default).phase = Some("Pending".into());
    pod
}

/// `pod` released to the scheduler pinned to `node`, not bound yet: its node affinity
/// names the node, and it says when it was released (`at`, seconds after [`at`]'s 0).
pub fn released(mut pod: Pod, node: &str, released_at: i64) -> Pod {
    let spec = pod.spec.as_mut().unwrap();
    spec.node_name = None;
    spec.scheduling_gates = None;
    spec.affinity = Some(serde_json::from_value(pin(node)).unwrap());
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(RELEASED_ANNOTATION.into(), at(released_at).to_string());
    pod.status.get_or_insert_with(Default::default).phase = Some("Pending".into());
    pod
}

/// `pod`, released and unbound, refused by the scheduler with `message`.
pub fn refused(mut pod: Pod, message: &str) -> Pod {
    pod.status.get_or_insert_with(Default::default).conditions = Some(vec![
        serde_json::from_value(json!({"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": message}))
        .unwrap(),
    ]);
    pod
}

/// The affinity that pins a pod with no node affinity of its own to `node`.
pub fn pin(node: &str) -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}})
}

/// `pod` being deleted: the API server has set its deletion timestamp and the kubelet
/// is stopping it.
pub fn terminating(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    pod
}

/// A ready node with `cpus` CPUs and 64 GiB.
pub fn node(name: &str, cpus: u32) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpus.to_string(), "memory": "64Gi"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

/// What the API server answers to a deleted pod.
pub fn pod_json(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")}})
}

/// What the API server answers to a created pod: held by the placement gate, at
/// resourceVersion 1.
pub fn created_json(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "1"},
        "spec": {"containers": [{"name": "trainer", "image": "ghcr.io/example/resnet:1"}],
            "schedulingGates": [{"name": PLACEMENT_GATE}]}})
}

/// What the API server answers to a created Event.
pub fn event_json() -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e", "namespace": NS}, "eventTime": "2026-01-01T00:00:00.000000Z"})
}

pub const PODS: &str = "/api/v1/namespaces/ml/pods";
pub const SERVICES: &str = "/api/v1/namespaces/ml/services";
pub const BUDGETS: &str = "/apis/policy/v1/namespaces/ml/poddisruptionbudgets";
pub const STATUS: &str = "/apis/switchyard.dev/v1alpha1/namespaces/ml/trainingjobs/a/status";
pub const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ml/events";

/// Places `job`'s one task, `main-0`, on `n1` ("fits", at 0 s): the placement the
/// single-task release scenarios drive.
pub async fn place_main_on_n1(
    client: kube::Client,
    job: &JobBuilder,
) -> switchyard_kube::Result<()> {
    actor(client)
        .place(
            &job.build(),
            &[("main-0".to_string(), "n1".to_string())],
            "fits",
            at(0),
        )
        .await
}

pub fn actor(client: kube::Client) -> Actor {
    Actor::new(
        client,
        Reporter {
            controller: "switchyard".into(),
            instance: Some("switchyard-0".into()),
        },
    )
}

pub fn placement(task: &str, pod: &str, node: &str) -> Placement {
    Placement {
        task: task.into(),
        pod: pod.into(),
        node: node.into(),
    }
}

/// The creation of pod `name` of `job` for `task` of `role`, held by the placement gate
/// and left to the cluster's scheduler.
pub fn create(name: &str, job: &str, task: &str, role: &str) -> Expect {
    Expect::post(PODS)
        .body(json!({"metadata": {"name": name, "namespace": NS,
            "labels": {"switchyard.dev/job": job, "switchyard.dev/task": task, "switchyard.dev/role": role},
            "ownerReferences": [{"apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                "name": job, "uid": format!("uid-{job}"), "controller": true}]},
            "spec": {"schedulingGates": [{"name": PLACEMENT_GATE}], "restartPolicy": "Never"}}))
        .respond(201, created_json(name))
}

/// The creation of job `job`'s headless Service, the first time the controller places
/// or replaces its pods.
pub fn service(job: &str) -> Expect {
    Expect::post(SERVICES)
        .body(json!({"metadata": {"name": job, "namespace": NS,
            "ownerReferences": [{"kind": "TrainingJob", "name": job, "uid": format!("uid-{job}"), "controller": true}]},
            "spec": {"clusterIP": "None", "selector": {"switchyard.dev/job": job}, "publishNotReadyAddresses": true}}))
        .respond(201, json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": job, "namespace": NS, "uid": format!("uid-svc-{job}")}}))
}

/// The release of pod `pod` (as [`created_json`] made it) to the scheduler on `node`:
/// pinned there, the placement gate lifted, on the resourceVersion read.
pub fn release(pod: &str, node: &str) -> Expect {
    Expect::patch(&format!("{PODS}/{pod}"))
        .body(
            json!({"metadata": {"resourceVersion": "1", "annotations": {RELEASED_ANNOTATION: "*"}},
            "spec": {"schedulingGates": [], "affinity": pin(node)}}),
        )
        .ok(pod_json(pod))
}

/// The creation of job `job`'s PodDisruptionBudget, with its Service the first time
/// the controller places or replaces its pods: one member unavailable at a time.
pub fn budget(job: &str) -> Expect {
    Expect::post(BUDGETS)
        .body(json!({"metadata": {"name": job, "namespace": NS,
            "ownerReferences": [{"kind": "TrainingJob", "name": job, "uid": format!("uid-{job}"), "controller": true}]},
            "spec": {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow",
                "selector": {"matchLabels": {"switchyard.dev/job-uid": format!("uid-{job}")}}}}))
        .respond(201, json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": job, "namespace": NS, "uid": format!("uid-pdb-{job}")}}))
}

/// The delete of pod `pod` (the fixtures' UID `uid-<pod>` as its precondition), with
/// `grace` seconds or the pod's own grace period.
pub fn delete(pod: &str, grace: Option<u32>) -> Expect {
    let mut body = json!({"preconditions": {"uid": format!("uid-{pod}")}});
    if let Some(g) = grace {
        body["gracePeriodSeconds"] = json!(g);
    }
    Expect::delete(&format!("{PODS}/{pod}"))
        .body(body)
        .ok(pod_json(pod))
}

/// `pod` refused by its node's kubelet at admission (`reason`, e.g. `OutOfcpu`), or
/// failed with `reason` `Error`.
pub fn failed(mut pod: Pod, reason: &str) -> Pod {
    let status = pod.status.get_or_insert_with(Default::default);
    status.phase = Some("Failed".into());
    status.reason = Some(reason.into());
    status.message = Some(format!("Pod was rejected: {reason}"));
    pod
}

/// `pod` whose process exited successfully.
pub fn succeeded(mut pod: Pod) -> Pod {
    pod.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
    pod
}

pub fn status_write(read: &JobBuilder, wanted: Value, written: &JobBuilder) -> [Expect; 2] {
    [
        Expect::get(STATUS).ok(read.json()),
        Expect::put(STATUS).body(wanted).ok(written.json()),
    ]
}

pub fn event(reason: &str, action: &str, type_: &str) -> Expect {
    Expect::post(EVENTS)
        .body(
            json!({"reason": reason, "action": action, "type": type_, "note": "*",
            "regarding": {"kind": "TrainingJob", "name": "a", "namespace": NS}}),
        )
        .respond(201, event_json())
}

/// Job `a`: a ps on n1 and one worker on n2, both placed, checkpointing on the stop
/// signal with 20 s of grace.
pub fn ps_and_worker() -> JobBuilder {
    JobBuilder::new("a")
        .push_progress()
        .ps_worker(1, 1, 2)
        .checkpoint(CheckpointMethod::Signal, 20)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![
                placement("ps-0", "a-ps-0-0", "n1"),
                placement("worker-0", "a-worker-0-0", "n2"),
            ],
            ..TrainingJobStatus::default()
        })
}

pub fn running_single(method: CheckpointMethod, grace: u32) -> JobBuilder {
    JobBuilder::new("a")
        .checkpoint(method, grace)
        .with_status(TrainingJobStatus {
            phase: Some(Phase::Running),
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            ..TrainingJobStatus::default()
        })
}

/// The time the scenarios' actions happen at.
pub fn at(seconds_after: i64) -> Timestamp {
    Timestamp::from_second(1_767_225_600 + seconds_after).unwrap()
}

/// `job` once its first placement, on `node`, was refused at `at(t)` (`reason`, and
/// `message` per refused pod) and taken back: the refusal recorded, `stopping` being
/// stopped, and the job held until `at(t + 10)`, the first refusal's back-off. Returns
/// the job and its refusal.
pub fn refused_and_held(
    job: &JobBuilder,
    node: &str,
    reason: &str,
    message: &str,
    t: i64,
    stopping: &[&str],
) -> (JobBuilder, Refusal) {
    let refusal = Refusal {
        nodes: vec![node.into()],
        reason: reason.into(),
        message: message.into(),
        count: 1,
        time: at(t).to_string(),
    };
    let held = restarting(
        job,
        TrainingJobStatus {
            generation: 1,
            refusal: Some(refusal.clone()),
            ..TrainingJobStatus::default()
        },
        PendingRestart {
            action: RestartAction::Recover,
            stopping: stopping.iter().map(|p| p.to_string()).collect(),
            targets: vec![],
            requested_at: at(t).to_string(),
            delete_after: None,
            retry_after: Some(at(t + 10).to_string()),
            reason: message.into(),
        },
    );
    (held, refusal)
}

/// `job` with `restart` under way after its first restart was recorded.
pub fn restarting(
    job: &JobBuilder,
    mut status: TrainingJobStatus,
    restart: PendingRestart,
) -> JobBuilder {
    status.phase = Some(Phase::Restarting);
    status.restart = Some(restart);
    job.clone_with(status)
}

pub fn migration(
    stopping: &str,
    task: &str,
    node: &str,
    delete_after: Option<Timestamp>,
) -> PendingRestart {
    PendingRestart {
        action: RestartAction::Migrate,
        stopping: vec![stopping.into()],
        targets: vec![TaskTarget {
            task: task.into(),
            node: node.into(),
        }],
        requested_at: at(0).to_string(),
        delete_after: delete_after.map(|t| t.to_string()),
        retry_after: None,
        reason: "loss flattened".into(),
    }
}

/// A migration with `purpose` from `from` to `to`, as the status records it.
pub fn migrated_for(purpose: &str, from: &str, to: &str) -> MoveRecord {
    MoveRecord {
        time: 1_767_225_600.0,
        kind: MoveKindRecord::Migrated,
        purpose: purpose.into(),
        from_nodes: vec![from.into()],
        to_nodes: vec![to.into()],
    }
}

/// `job` (its `main` task on n1) restarting since `at(0)` to move that task to `to`, its
/// old pod deleted at `delete_after` at the latest (`None`: once it is gone); its status
/// holds that placement, generation 1 and what `status` adds.
pub fn moving_main(
    job: &JobBuilder,
    to: &str,
    delete_after: Option<Timestamp>,
    status: TrainingJobStatus,
) -> JobBuilder {
    restarting(
        job,
        TrainingJobStatus {
            placements: vec![placement("main-0", "a-main-0-0", "n1")],
            generation: 1,
            ..status
        },
        migration("a-main-0-0", "main-0", to, delete_after),
    )
}

/// `job` once a migration to reallocate its `main` task from n1 to `to` was recorded (the
/// move and one migration in its status) and started ([`moving_main`]).
pub fn reallocating(job: &JobBuilder, to: &str, delete_after: Option<Timestamp>) -> JobBuilder {
    moving_main(
        job,
        to,
        delete_after,
        TrainingJobStatus {
            moves: vec![migrated_for("reallocate", "n1", to)],
            migrations: 1,
            ..TrainingJobStatus::default()
        },
    )
}

/// Job `a`: one `main` task that pushes its progress and checkpoints by annotation with
/// a 30 s grace period.
pub fn annotated_single() -> JobBuilder {
    JobBuilder::new("a")
        .push_progress()
        .checkpoint(CheckpointMethod::Annotation, 30)
}

impl JobBuilder {
    pub fn clone_with(&self, status: TrainingJobStatus) -> JobBuilder {
        JobBuilder::from_json(self.json()).status(status)
    }
    pub fn with_status(self, status: TrainingJobStatus) -> JobBuilder {
        self.status(status)
    }
}

/// The policy's placement of `job`'s tasks on nodes, as (task, node) pairs.
pub fn place_action(job: &str, pairs: &[(&str, &str)]) -> Action {
    Action {
        op: Operation::Place {
            job: job.into(),
            assignments: pairs
                .iter()
                .map(|(task, node)| Assignment {
                    task: task.to_string(),
                    node: node.to_string(),
                })
                .collect(),
        },
        reason: "test".into(),
    }
}

/// The names of the nodes `task` of `job` may be placed on (every node when its task
/// has no eligibility set).
pub fn eligible_node_names(snapshot: &Snapshot, job: &str, task: &str) -> Vec<String> {
    let job = snapshot.job(job).expect("the job is in the snapshot");
    let task = job.tasks.iter().find(|t| t.name == task).expect("the task");
    match task.eligible {
        None => snapshot.nodes.iter().map(|n| n.name.clone()).collect(),
        Some(set) => snapshot
            .node_set(set)
            .expect("the set is in the snapshot")
            .nodes
            .iter()
            .map(|&i| snapshot.nodes[i as usize].name.clone())
            .collect(),
    }
}
