//! Jobs that teams already run, as their operators make them, for the adoption
//! scenarios: a `batch/v1` Job (the k8s-openapi type), a JobSet and a PyTorchJob (JSON
//! of the shapes their published CRDs in `tests/crds/` give), each with the two lines a
//! team adds (the placement gate and the queue label), and their pods with the labels,
//! annotations and owner references the Job controller, the JobSet controller and the
//! training operator put on them. The test plays the operator: it makes the gated pods,
//! and after an eviction makes them again. [`Owners`] fills the adoption caches.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::{Value, json};
use switchyard_kube::{
    Adoption, CHECKPOINT_ANNOTATION, Integration, PLACEMENT_GATE, QUEUE_LABEL, RELEASED_ANNOTATION,
};
use tokio::sync::Notify;

use super::fixtures::{EVENTS, NS, PODS, event_json, pin};
use super::mock::Expect;
use super::world::World;

/// The adoption caches of a [`World`], and the writers a reflector would feed them
/// through.
pub struct Owners {
    pods: Writer<Pod>,
    jobs: Writer<Job>,
    jobsets: Writer<DynamicObject>,
    pytorchjobs: Writer<DynamicObject>,
    changed: Arc<Notify>,
}

impl World {
    /// Adopts the pods of queue `queue` owned by `kinds`: the world's caches read the
    /// returned owners' stores, every one listed.
    pub fn adopting(&mut self, kinds: &[Integration], queue: &str) -> Owners {
        let mut pods: Writer<Pod> = Writer::default();
        let mut jobs: Writer<Job> = Writer::default();
        let mut jobsets = Writer::new(Integration::JobSet.api_resource());
        let mut pytorchjobs = Writer::new(Integration::PyTorchJob.api_resource());
        pods.apply_watcher_event(&watcher::Event::InitDone);
        jobs.apply_watcher_event(&watcher::Event::InitDone);
        jobsets.apply_watcher_event(&watcher::Event::InitDone);
        pytorchjobs.apply_watcher_event(&watcher::Event::InitDone);
        let mut adoption = Adoption::over(queue, pods.as_reader());
        for kind in kinds {
            adoption = match kind {
                Integration::Job => adoption.with_jobs(jobs.as_reader()),
                Integration::JobSet => adoption.with_jobsets(jobsets.as_reader()),
                Integration::PyTorchJob => adoption.with_pytorchjobs(pytorchjobs.as_reader()),
            };
        }
        self.caches = self.caches.clone().with_adoption(adoption);
        Owners {
            pods,
            jobs,
            jobsets,
            pytorchjobs,
            changed: self.caches.changed.clone(),
        }
    }
}

impl Owners {
    /// A pod as the API server now holds it.
    pub fn pod(&mut self, pod: &Pod) {
        self.pods
            .apply_watcher_event(&watcher::Event::Apply(pod.clone()));
        self.changed.notify_one();
    }

    /// Each of `pods` as the API server now holds it.
    pub fn pods(&mut self, pods: &[Pod]) {
        for pod in pods {
            self.pod(pod);
        }
    }

    /// A pod gone.
    pub fn pod_gone(&mut self, pod: &Pod) {
        self.pods
            .apply_watcher_event(&watcher::Event::Delete(pod.clone()));
        self.changed.notify_one();
    }

    /// A batch Job.
    pub fn job(&mut self, job: &Job) {
        self.jobs
            .apply_watcher_event(&watcher::Event::Apply(job.clone()));
        self.changed.notify_one();
    }

    /// A JobSet (JSON of its CRD's shape).
    pub fn jobset(&mut self, jobset: &Value) {
        let object: DynamicObject = serde_json::from_value(jobset.clone()).unwrap();
        self.jobsets
            .apply_watcher_event(&watcher::Event::Apply(object));
        self.changed.notify_one();
    }

    /// A PyTorchJob (JSON of its CRD's shape).
    pub fn pytorchjob(&mut self, job: &Value) {
        let object: DynamicObject = serde_json::from_value(job.clone()).unwrap();
        self.pytorchjobs
            .apply_watcher_event(&watcher::Event::Apply(object));
        self.changed.notify_one();
    }
}

/// The pod template a team writes, with the two lines that hand it to switchyard: the
/// placement gate and the queue label.
pub fn adopted_template(container: &str, queue: &str) -> Value {
    json!({"metadata": {"labels": {QUEUE_LABEL: queue}},
        "spec": {"schedulingGates": [{"name": PLACEMENT_GATE}],
            "containers": [{"name": container, "image": "ghcr.io/example/train:1",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
}

/// Indexed Job `name` of `n` pods at once, ignoring disrupted pods (so an eviction is
/// not a failure).
pub fn indexed_job(name: &str, n: u32, queue: &str) -> Job {
    let mut template = adopted_template("train", queue);
    template["spec"]["restartPolicy"] = json!("Never");
    serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parallelism": n, "completions": n, "completionMode": "Indexed",
            "backoffLimit": 3,
            "podFailurePolicy": {"rules": [{"action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
            "template": template}}))
    .unwrap()
}

/// The pod the Job controller makes for index `index` of Job `job` (its `attempt`-th):
/// gated, labelled and annotated with the index, owned by the Job.
pub fn job_pod(job: &Job, index: u32, attempt: u32) -> Pod {
    let name = job.metadata.name.clone().unwrap();
    let uid = job.metadata.uid.clone().unwrap();
    let template = &serde_json::to_value(&job.spec.as_ref().unwrap().template).unwrap();
    let mut labels = template["metadata"]["labels"].clone();
    for (k, v) in [
        ("batch.kubernetes.io/job-name", name.clone()),
        ("job-name", name.clone()),
        ("batch.kubernetes.io/controller-uid", uid.clone()),
        ("controller-uid", uid.clone()),
        (
            "batch.kubernetes.io/job-completion-index",
            index.to_string(),
        ),
    ] {
        labels[k] = json!(v);
    }
    operator_pod(
        &format!("{name}-{index}-a{attempt}"),
        labels,
        json!({"batch.kubernetes.io/job-completion-index": index.to_string()}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}),
        &template["spec"],
    )
}

/// JobSet `name` of two replicated jobs: `driver` (1 Job of 1 pod) and `workers` (2
/// Jobs of 2 pods each), whose Jobs ignore disrupted pods.
pub fn jobset(name: &str, queue: &str) -> Value {
    let job = |parallelism: u32| {
        let mut template = adopted_template("train", queue);
        template["spec"]["restartPolicy"] = json!("Never");
        json!({"spec": {"parallelism": parallelism, "completions": parallelism,
            "completionMode": "Indexed", "backoffLimit": 0,
            "podFailurePolicy": {"rules": [{"action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": template}})
    };
    json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": job(1)},
                {"name": "workers", "replicas": 2, "template": job(2)}],
            "failurePolicy": {"maxRestarts": 0},
            "successPolicy": {"operator": "All"}}})
}

/// The pod the JobSet's child Job `<jobset>-<replicated>-<job_index>` makes for
/// completion index `index` (its `attempt`-th): the JobSet's labels and the Job's.
pub fn jobset_pod(
    jobset: &Value,
    replicated: &str,
    job_index: u32,
    index: u32,
    attempt: u32,
) -> Pod {
    let name = jobset["metadata"]["name"].as_str().unwrap();
    let uid = jobset["metadata"]["uid"].as_str().unwrap();
    let child = format!("{name}-{replicated}-{job_index}");
    let spec = &jobset["spec"]["replicatedJobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == replicated)
        .unwrap()["template"]["spec"]["template"];
    let mut labels = spec["metadata"]["labels"].clone();
    for (k, v) in [
        ("jobset.sigs.k8s.io/jobset-name", name.to_string()),
        (
            "jobset.sigs.k8s.io/replicatedjob-name",
            replicated.to_string(),
        ),
        ("jobset.sigs.k8s.io/replicatedjob-replicas", "1".to_string()),
        ("jobset.sigs.k8s.io/job-index", job_index.to_string()),
        ("jobset.sigs.k8s.io/jobset-uid", uid.to_string()),
        ("batch.kubernetes.io/job-name", child.clone()),
        ("batch.kubernetes.io/controller-uid", format!("uid-{child}")),
        (
            "batch.kubernetes.io/job-completion-index",
            index.to_string(),
        ),
    ] {
        labels[k] = json!(v);
    }
    operator_pod(
        &format!("{child}-{index}-a{attempt}"),
        labels,
        json!({"batch.kubernetes.io/job-completion-index": index.to_string(),
            "jobset.sigs.k8s.io/jobset-name": name}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "name": child, "uid": format!("uid-{child}")}),
        &spec["spec"],
    )
}

/// PyTorchJob `name`: one `Master` and `workers` `Worker`s, each restarted on failure.
pub fn pytorchjob(name: &str, workers: u32, queue: &str) -> Value {
    let spec = |replicas: u32| {
        json!({"replicas": replicas, "restartPolicy": "OnFailure",
            "template": adopted_template("pytorch", queue)})
    };
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(workers)},
            "runPolicy": {"cleanPodPolicy": "None"}}})
}

/// The pod the training operator makes for replica `index` of type `replica` (`Master`,
/// `Worker`) of `job` (its `attempt`-th; the operator reuses the name).
pub fn pytorch_pod(job: &Value, replica: &str, index: u32, attempt: u32) -> Pod {
    let name = job["metadata"]["name"].as_str().unwrap();
    let uid = job["metadata"]["uid"].as_str().unwrap();
    let spec = &job["spec"]["pytorchReplicaSpecs"][replica]["template"];
    let kind = replica.to_ascii_lowercase();
    let mut labels = spec["metadata"]["labels"].clone();
    for (k, v) in [
        ("training.kubeflow.org/job-name", name.to_string()),
        (
            "training.kubeflow.org/operator-name",
            "pytorchjob-controller".to_string(),
        ),
        ("training.kubeflow.org/replica-type", kind.clone()),
        ("training.kubeflow.org/replica-index", index.to_string()),
    ] {
        labels[k] = json!(v);
    }
    if replica == "Master" {
        labels["training.kubeflow.org/job-role"] = json!("master");
    }
    let mut pod = operator_pod(
        &format!("{name}-{kind}-{index}"),
        labels,
        json!({}),
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name, "uid": uid}),
        &spec["spec"],
    );
    pod.metadata.uid = Some(format!("uid-{name}-{kind}-{index}-a{attempt}"));
    pod
}

/// A pod an operator made: gated as its template says, at resourceVersion 1.
fn operator_pod(name: &str, labels: Value, annotations: Value, owner: Value, spec: &Value) -> Pod {
    let mut owner = owner;
    owner["controller"] = json!(true);
    owner["blockOwnerDeletion"] = json!(true);
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels, "annotations": annotations, "ownerReferences": [owner]},
        "spec": spec, "status": {"phase": "Pending"}}))
    .unwrap()
}

/// `pod` released to `node` (its gate lifted and its release noted, as the release's
/// patch does) and bound there by kube-scheduler, its containers still starting.
pub fn bound(pod: &Pod, node: &str) -> Pod {
    let mut pod = pod.clone();
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(RELEASED_ANNOTATION.into(), "2026-01-01T00:00:01Z".into());
    let spec = pod.spec.as_mut().unwrap();
    spec.scheduling_gates = None;
    spec.node_name = Some(node.into());
    spec.affinity = Some(serde_json::from_value(pin(node)).unwrap());
    pod.metadata.resource_version = Some("2".into());
    pod.status = Some(
        serde_json::from_value(json!({"phase": "Pending",
        "startTime": "2026-01-01T00:00:05Z"}))
        .unwrap(),
    );
    pod
}

/// `pod` bound to `node` and running.
pub fn running(pod: &Pod, node: &str) -> Pod {
    let mut pod = bound(pod, node);
    pod.status.as_mut().unwrap().phase = Some("Running".into());
    pod
}

/// `pod` as kube-scheduler runs it when nobody held it: its gate never there or lifted
/// by hand, bound to `node` by the scheduler's own choice, running.
pub fn ungated(pod: &Pod, node: &str) -> Pod {
    let mut pod = pod.clone();
    let spec = pod.spec.as_mut().unwrap();
    spec.scheduling_gates = None;
    spec.node_name = Some(node.into());
    pod.metadata.resource_version = Some("2".into());
    pod.status = Some(
        serde_json::from_value(json!({"phase": "Running",
        "startTime": "2026-01-01T00:00:05Z"}))
        .unwrap(),
    );
    pod
}

/// `pod` asked to checkpoint at `at` (RFC 3339).
pub fn asked(pod: &Pod, at: &str) -> Pod {
    let mut pod = pod.clone();
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(CHECKPOINT_ANNOTATION.into(), at.into());
    pod.metadata.resource_version = Some("3".into());
    pod
}

/// `pod` once evicted: the API server marked it `DisruptionTarget` and it is being
/// deleted.
pub fn evicted(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    pod.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("2026-01-01T00:01:00Z")).unwrap());
    let status = pod.status.get_or_insert_default();
    status.conditions = Some(vec![
        serde_json::from_value(json!({"type": "DisruptionTarget",
        "status": "True", "reason": "EvictionByEvictionAPI"}))
        .unwrap(),
    ]);
    pod.metadata.resource_version = Some("4".into());
    pod
}

/// The release of adopted pod `pod` (at resourceVersion 1) to `node`.
pub fn release_adopted(pod: &Pod, node: &str) -> Expect {
    super::fixtures::release(pod.metadata.name.as_deref().unwrap(), node)
}

/// The checkpoint request on `pod`.
pub fn ask_checkpoint(pod: &Pod) -> Expect {
    let name = pod.metadata.name.as_deref().unwrap();
    Expect::patch(&format!("{PODS}/{name}"))
        .body(json!({"metadata": {"annotations": {CHECKPOINT_ANNOTATION: "*"}}}))
        .ok(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}}))
}

/// The eviction of `pod`, its UID as the precondition.
pub fn evict(pod: &Pod) -> Expect {
    let name = pod.metadata.name.as_deref().unwrap();
    Expect::post(&format!("{PODS}/{name}/eviction"))
        .body(json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": NS},
            "deleteOptions": {"preconditions": {"uid": pod.metadata.uid.clone().unwrap()}}}))
        .respond(
            201,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
        )
}

/// The eviction of `pod` refused by a PodDisruptionBudget, as the API server's eviction
/// handler answers (429, the budget named in a cause), asking for `retry_after`
/// seconds (0: it does not say).
pub fn evict_refused(pod: &Pod, retry_after: u32) -> Expect {
    let name = pod.metadata.name.as_deref().unwrap();
    let mut details = json!({"causes": [{"reason": "DisruptionBudget",
        "message": "The disruption budget train-pdb needs 2 healthy pods and has 2 currently"}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    Expect::post(&format!("{PODS}/{name}/eviction")).respond(
        429,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "details": details}),
    )
}

/// The Event told once (named `event`) with `reason` about `kind`/`name`, answered
/// `status` (201 created, 409 already there).
pub fn told_once(kind: &str, name: &str, reason: &str, event: &str, status: u16) -> Expect {
    let answer = match status {
        409 => json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
            "reason": "AlreadyExists", "message": format!("events.events.k8s.io \"{event}\" already exists")}),
        _ => event_json(),
    };
    Expect::post(EVENTS)
        .body(
            json!({"metadata": {"name": event}, "reason": reason, "note": "*",
            "regarding": {"kind": kind, "name": name, "namespace": NS}}),
        )
        .respond(status, answer)
}

/// An Event `reason` about owner `kind`/`name`.
pub fn event_on_owner(kind: &str, name: &str, reason: &str, type_: &str) -> Expect {
    Expect::post(EVENTS)
        .body(json!({"reason": reason, "type": type_, "note": "*",
            "regarding": {"kind": kind, "name": name, "namespace": NS}}))
        .respond(201, event_json())
}

/// The same Event about owner `name` once more: the recorder counts it in the
/// Event's series (a patch of the Event it made before).
pub fn event_again_on_owner(name: &str) -> Expect {
    Expect::patch(&format!("{EVENTS}/{name}.*")).ok(event_json())
}

/// An Event `reason` about pod `name`.
pub fn event_on_pod(name: &str, reason: &str) -> Expect {
    event_on_owner("Pod", name, reason, "Warning")
}
