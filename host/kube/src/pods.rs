//! Plain accessors over the controller's pods and jobs: which job, task, node and
//! generation a pod belongs to, what it requests, whether it is held by the placement
//! gate, which node its placement pins it to, whether kube-scheduler refused it, how it
//! failed or stopped. Every other module reads pods through these, so this module is
//! the crate's leaf: it names only the resource ([`crate::crd`]), the quantities and the
//! crate's constants, and it must not read a cache, write to the cluster or decide
//! anything.

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use switchyard_core::Resources;

use crate::crd::TrainingJob;
use crate::{
    GENERATION_LABEL, JOB_LABEL, PLACEMENT_GATE, RELEASED_ANNOTATION, TASK_LABEL, quantity,
};

/// The taint an operator puts on a node that is shut down for good
/// (`node.kubernetes.io/out-of-service`): its pods are confirmed gone.
pub(crate) const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// A job's id in the snapshot: `namespace/name`.
pub(crate) fn job_id(job: &TrainingJob) -> String {
    format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any())
}

/// The id of the job `pod` is labelled with: `namespace/label`.
pub(crate) fn labelled_job(pod: &Pod) -> Option<String> {
    let label = pod.metadata.labels.as_ref()?.get(JOB_LABEL)?;
    Some(format!(
        "{}/{label}",
        pod.metadata.namespace.as_deref().unwrap_or_default()
    ))
}

/// `namespace/name` of a pod.
pub(crate) fn pod_key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// The key under which a delete of `pod` is remembered: its UID, else its name.
pub(crate) fn delete_key(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_else(|| pod_key(pod))
}

/// The node a pod is bound to.
pub(crate) fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// The task a pod runs (its `switchyard.dev/task` label).
pub(crate) fn task_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(TASK_LABEL)
        .map(String::as_str)
}

/// A pod's phase (`Pending`, `Running`, `Succeeded`, `Failed`).
pub(crate) fn phase_of(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

/// Whether a pod's containers have stopped for good (it holds no resources any more).
pub(crate) fn terminated(pod: &Pod) -> bool {
    matches!(phase_of(pod), Some("Succeeded" | "Failed"))
}

/// Whether a pod still holds its node's resources (it has not finished).
pub(crate) fn holds_resources(pod: &Pod) -> bool {
    !terminated(pod)
}

/// Whether the kubelet has confirmed that `pod` runs nothing any more: it finished, or
/// every container it reported on is terminated.
pub(crate) fn confirmed_stopped(pod: &Pod) -> bool {
    if terminated(pod) {
        return true;
    }
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    !statuses.is_empty()
        && statuses
            .iter()
            .all(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
}

/// What a pod takes from its node ([`spec_requests`]: containers, sidecars,
/// initialisation, overhead, with whatever the API server's admission added).
pub(crate) fn pod_requests(pod: &Pod) -> Resources {
    pod.spec.as_ref().map(spec_requests).unwrap_or_default()
}

/// What a pod with `spec` takes from its node, counted as kube-scheduler counts it: its
/// containers and its sidecars (init containers with `restartPolicy: Always`, which run
/// alongside), or the largest step of its initialisation if that is more, plus the
/// runtime class's `overhead`. Only the resources the contract has (CPU, memory, GPUs):
/// it is the policy's view, and kube-scheduler checks every resource when it binds.
pub(crate) fn spec_requests(spec: &PodSpec) -> Resources {
    let requests = |c: &Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .map(quantity::resources)
            .unwrap_or_default()
    };
    let running = spec
        .containers
        .iter()
        .fold(Resources::default(), |acc, c| acc.plus(&requests(c)));
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for init in spec.init_containers.iter().flatten() {
        if init.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.plus(&requests(init));
            init_peak = largest(&init_peak, &sidecars);
        } else {
            init_peak = largest(&init_peak, &sidecars.plus(&requests(init)));
        }
    }
    let overhead = spec
        .overhead
        .as_ref()
        .map(quantity::resources)
        .unwrap_or_default();
    largest(&running.plus(&sidecars), &init_peak).plus(&overhead)
}

/// The larger of `a` and `b` in each resource.
fn largest(a: &Resources, b: &Resources) -> Resources {
    Resources {
        cpu_millis: a.cpu_millis.max(b.cpu_millis),
        memory_bytes: a.memory_bytes.max(b.memory_bytes),
        gpus: a.gpus.max(b.gpus),
    }
}

/// The generation a pod of the controller was made for: its `switchyard.dev/generation`
/// label, else the last part of its name (`<job>-<task>-<generation>`).
pub(crate) fn generation_of(pod: &Pod) -> u32 {
    let labels = pod.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(GENERATION_LABEL))
        .map(String::as_str)
        .or_else(|| {
            pod.metadata
                .name
                .as_deref()?
                .rsplit_once('-')
                .map(|(_, g)| g)
        })
        .and_then(|g| g.parse().ok())
        .unwrap_or(0)
}

/// Whether `job` controls `pod` (its controller owner reference names the job's UID).
pub(crate) fn owned_by(pod: &Pod, job: &TrainingJob) -> bool {
    let Some(uid) = job.metadata.uid.as_deref() else {
        return false;
    };
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Those of `labelled` (a job's labelled pods, by name) that `job` controls.
pub(crate) fn own_of<P: Borrow<Pod>>(job: &TrainingJob, labelled: Vec<P>) -> Vec<P> {
    let mut own = labelled;
    own.retain(|p| owned_by(p.borrow(), job));
    own
}

/// Whether `pod` has scheduling gates, whoever put them there.
pub(crate) fn gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

/// Whether `pod` still carries the controller's placement gate ([`PLACEMENT_GATE`]):
/// made, but no node chosen for it yet.
pub(crate) fn held_by_placement_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == PLACEMENT_GATE))
}

/// The node the controller's placement pinned `pod` to: the `metadata.name` its required
/// node affinity's first term names, alone, in `matchFields` (what the release writes).
pub(crate) fn pinned_node(pod: &Pod) -> Option<&str> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms.first()?.match_fields.iter().flatten().find_map(|r| {
        let values = r.values.as_deref()?;
        match (r.key.as_str(), r.operator.as_str(), values) {
            ("metadata.name", "In", [node]) => Some(node.as_str()),
            _ => None,
        }
    })
}

/// Where `pod` runs or is about to: the node it is bound to, else, once the placement
/// gate is lifted, the node its placement pinned it to (kube-scheduler binds it there
/// or refuses it).
pub(crate) fn placed_node(pod: &Pod) -> Option<&str> {
    node_of(pod).or_else(|| {
        if held_by_placement_gate(pod) {
            None
        } else {
            pinned_node(pod)
        }
    })
}

/// When the controller lifted `pod`'s placement gate ([`RELEASED_ANNOTATION`]).
pub(crate) fn released_at(pod: &Pod) -> Option<Timestamp> {
    pod.annotations().get(RELEASED_ANNOTATION)?.parse().ok()
}

/// Why kube-scheduler did not bind `pod`: its `PodScheduled` condition is `False` for a
/// reason other than scheduling gates (`Unschedulable`, `SchedulerError`), with the
/// scheduler's message.
pub(crate) fn scheduling_refusal(pod: &Pod) -> Option<(String, String)> {
    if node_of(pod).is_some() || gated(pod) {
        return None;
    }
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled")?;
    let reason = condition.reason.as_deref().unwrap_or_default();
    (condition.status == "False" && reason != "SchedulingGated").then(|| {
        (
            reason.to_string(),
            condition.message.clone().unwrap_or_default(),
        )
    })
}

/// How often `pod`'s containers were restarted by the kubelet (a crash loop under
/// `restartPolicy: OnFailure`); sidecars, which restart by design, are not counted.
pub(crate) fn container_restarts(pod: &Pod) -> u32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|c| c.restart_count.max(0) as u32)
        .sum()
}

/// What `pod`'s last container crash was: the container, its exit code and reason.
pub(crate) fn last_crash(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.container_statuses.as_deref()?;
    statuses.iter().find_map(|c| {
        let last = c.last_state.as_ref()?.terminated.as_ref()?;
        Some(format!(
            "container {} exited {} ({})",
            c.name,
            last.exit_code,
            last.reason.as_deref().unwrap_or("Error")
        ))
    })
}

/// Whether `node` is Ready.
pub(crate) fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// Whether new pods may be bound to `node`: Ready and not cordoned.
pub(crate) fn schedulable(node: &Node) -> bool {
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    ready(node) && !cordoned
}

/// Whether an operator declared `node` out of service (the
/// `node.kubernetes.io/out-of-service` taint): what ran there is gone.
pub(crate) fn out_of_service(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_pod_is_placed_where_it_is_bound_or_once_released_where_its_pin_says() {
        let pinned = |gates: serde_json::Value| {
            pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
                "schedulingGates": gates,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}],
                        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}}}))
        };
        let held = pinned(json!([{"name": PLACEMENT_GATE}]));
        assert_eq!(pinned_node(&held), Some("n2"));
        assert_eq!(placed_node(&held), None, "still held by the placement gate");
        let released = pinned(json!([{"name": "example.com/quota"}]));
        assert_eq!(placed_node(&released), Some("n2"), "another's gate");
        let mut bound = pinned(json!(null));
        bound.spec.as_mut().unwrap().node_name = Some("n2".into());
        assert_eq!(placed_node(&bound), Some("n2"));
        let user_pin = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                    "values": ["n1", "n2"]}]}]}}}}}));
        assert_eq!(pinned_node(&user_pin), None, "not a pin to one node");
    }

    #[test]
    fn a_refusal_is_a_false_pod_scheduled_condition_other_than_the_gate_s() {
        let with = |reason: &str| {
            pod(
                json!({"metadata": {"name": "p"}, "spec": {"containers": []},
                "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                    "reason": reason, "message": "0/3 nodes are available"}]}}),
            )
        };
        assert_eq!(
            scheduling_refusal(&with("Unschedulable")),
            Some(("Unschedulable".into(), "0/3 nodes are available".into()))
        );
        assert_eq!(scheduling_refusal(&with("SchedulingGated")), None);
    }

    #[test]
    fn container_restarts_and_a_confirmed_stop_are_read_from_the_kubelet_s_report() {
        let running = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": []},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "trainer", "image": "i", "imageID": "", "ready": false, "restartCount": 2,
                 "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
                 "state": {"running": {}}}]}}),
        );
        assert_eq!(container_restarts(&running), 2);
        assert_eq!(
            last_crash(&running).as_deref(),
            Some("container trainer exited 137 (OOMKilled)")
        );
        assert!(!confirmed_stopped(&running));
        let stopped = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": []},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "trainer", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0}}}]}}),
        );
        assert!(confirmed_stopped(&stopped));
        let unknown = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": []},
            "status": {"phase": "Running"}}),
        );
        assert!(!confirmed_stopped(&unknown), "nothing reported");
    }
}
