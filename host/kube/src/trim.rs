//! What the caches keep of each object. A reflector stores whole objects, and most of a
//! pod or a node is of no use here: `managedFields`, environment, volumes, probes, a
//! node's image list. Each watch trims what it receives (kube-runtime's `.modify()`)
//! before the store keeps it, to the fields the snapshot, the restarts and the failure
//! handling read. It owns that list of fields; it must not decide anything from them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerState, ContainerStateTerminated, ContainerStatus, Node,
    NodeAffinity, NodeSpec, NodeStatus, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    PersistentVolumeStatus, Pod, PodSpec, PodStatus, ResourceRequirements,
    VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

use crate::crd::TrainingJob;
use crate::{CHECKPOINT_ANNOTATION, RELEASED_ANNOTATION};

/// Conditions of a pod that are read: whether the scheduler refused it, a disruption,
/// and an in-place resize's progress.
const POD_CONDITIONS: [&str; 4] = [
    "PodScheduled",
    "DisruptionTarget",
    "PodResizePending",
    "PodResizeInProgress",
];

/// Keeps of a pod its identity and owner, the controller's labels and annotations, its
/// scheduling gates and required node affinity (where its placement pinned it), where
/// it runs and what it requests, and its phase, failure reason, start time, the
/// conditions read, and each container's resources as the kubelet applied them, its
/// restarts and whether it has terminated.
pub fn pod(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    common_meta(meta);
    meta.labels = meta
        .labels
        .take()
        .map(|labels| keep_keys(labels, |k| k.starts_with("switchyard.dev/")))
        .filter(|l| !l.is_empty());
    meta.annotations = meta
        .annotations
        .take()
        .map(|a| {
            keep_keys(a, |k| {
                k == CHECKPOINT_ANNOTATION || k == RELEASED_ANNOTATION
            })
        })
        .filter(|a| !a.is_empty());
    if let Some(spec) = pod.spec.take() {
        let required = spec
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution);
        pod.spec = Some(PodSpec {
            affinity: required.map(|required| Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(required),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            containers: spec.containers.into_iter().map(container).collect(),
            init_containers: spec
                .init_containers
                .map(|c| c.into_iter().map(container).collect()),
            node_name: spec.node_name,
            overhead: spec.overhead,
            scheduling_gates: spec.scheduling_gates,
            ..PodSpec::default()
        });
    }
    if let Some(status) = pod.status.take() {
        pod.status = Some(PodStatus {
            phase: status.phase,
            reason: status.reason,
            message: status.message,
            start_time: status.start_time,
            conditions: status
                .conditions
                .map(|c| {
                    c.into_iter()
                        .filter(|c| POD_CONDITIONS.contains(&c.type_.as_str()))
                        .collect::<Vec<_>>()
                })
                .filter(|c| !c.is_empty()),
            container_statuses: status.container_statuses.map(|statuses| {
                statuses
                    .into_iter()
                    .map(|s| ContainerStatus {
                        name: s.name,
                        resources: s.resources.map(requests_only),
                        allocated_resources: s.allocated_resources,
                        restart_count: s.restart_count,
                        state: s.state.and_then(|s| s.terminated).map(|t| ContainerState {
                            terminated: Some(terminated_only(t)),
                            ..ContainerState::default()
                        }),
                        last_state: s.last_state.and_then(|s| s.terminated).map(|t| {
                            ContainerState {
                                terminated: Some(terminated_only(t)),
                                ..ContainerState::default()
                            }
                        }),
                        ..ContainerStatus::default()
                    })
                    .collect()
            }),
            ..PodStatus::default()
        });
    }
}

/// Keeps of a node its name and labels (the policy sees them), whether it is cordoned
/// or tainted, what it can allocate and whether it is ready.
pub fn node(node: &mut Node) {
    common_meta(&mut node.metadata);
    node.metadata.annotations = None;
    if let Some(spec) = node.spec.take() {
        node.spec = Some(NodeSpec {
            unschedulable: spec.unschedulable,
            taints: spec.taints,
            ..NodeSpec::default()
        });
    }
    if let Some(status) = node.status.take() {
        node.status = Some(NodeStatus {
            allocatable: status.allocatable,
            conditions: status
                .conditions
                .map(|c| c.into_iter().filter(|c| c.type_ == "Ready").collect()),
            ..NodeStatus::default()
        });
    }
}

/// Keeps all of a job but its field managers and `kubectl apply`'s copy of it.
pub fn job(job: &mut TrainingJob) {
    common_meta(&mut job.metadata);
    if let Some(annotations) = job.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Keeps of a claim its identity, its class, the volume it is bound to and its phase:
/// what the volume hints read.
pub fn claim(claim: &mut PersistentVolumeClaim) {
    common_meta(&mut claim.metadata);
    claim.metadata.labels = None;
    claim.metadata.owner_references = None;
    claim.metadata.annotations = None;
    // What matching it to a pre-provisioned volume reads, too (`volumes::matching`).
    claim.spec = claim.spec.take().map(|s| PersistentVolumeClaimSpec {
        storage_class_name: s.storage_class_name,
        volume_name: s.volume_name,
        access_modes: s.access_modes,
        volume_mode: s.volume_mode,
        selector: s.selector,
        resources: s.resources.map(|r| VolumeResourceRequirements {
            requests: r.requests.map(|q| keep_quantity(q, "storage")),
            limits: None,
        }),
        ..PersistentVolumeClaimSpec::default()
    });
    claim.status = claim.status.take().map(|s| PersistentVolumeClaimStatus {
        phase: s.phase,
        ..PersistentVolumeClaimStatus::default()
    });
}

/// Keeps of a volume its name, labels and node affinity (where it can be mounted), and
/// what matching a claim to it reads (`volumes::matching`): size, access modes, class,
/// volume mode, the claim it is bound or promised to, and its phase.
pub fn volume(volume: &mut PersistentVolume) {
    common_meta(&mut volume.metadata);
    volume.metadata.annotations = None;
    volume.spec = volume.spec.take().map(|s| PersistentVolumeSpec {
        node_affinity: s.node_affinity,
        capacity: s.capacity.map(|q| keep_quantity(q, "storage")),
        access_modes: s.access_modes,
        storage_class_name: s.storage_class_name,
        volume_mode: s.volume_mode,
        claim_ref: s.claim_ref.map(|r| ObjectReference {
            name: r.name,
            namespace: r.namespace,
            uid: r.uid,
            ..ObjectReference::default()
        }),
        ..PersistentVolumeSpec::default()
    });
    volume.status = volume.status.take().map(|s| PersistentVolumeStatus {
        phase: s.phase,
        ..PersistentVolumeStatus::default()
    });
}

/// `quantities` with only `key`.
fn keep_quantity(quantities: BTreeMap<String, Quantity>, key: &str) -> BTreeMap<String, Quantity> {
    quantities.into_iter().filter(|(k, _)| k == key).collect()
}

/// Keeps of a storage class its name, binding mode, allowed topologies and whether it
/// is the default (the class of an ephemeral volume's claim that names none).
pub fn class(class: &mut StorageClass) {
    common_meta(&mut class.metadata);
    class.metadata.labels = None;
    if let Some(annotations) = &mut class.metadata.annotations {
        annotations.retain(|k, _| k == crate::volumes::DEFAULT_CLASS_ANNOTATION);
    }
    class.parameters = None;
    class.mount_options = None;
}

/// Of a container's termination, what describing a crash reads.
fn terminated_only(t: ContainerStateTerminated) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: t.exit_code,
        reason: t.reason,
        ..ContainerStateTerminated::default()
    }
}

fn common_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.generate_name = None;
    meta.finalizers = None;
}

fn container(c: Container) -> Container {
    Container {
        name: c.name,
        resources: c.resources.map(requests_only),
        restart_policy: c.restart_policy,
        // Only host ports: they keep other pods off the node.
        ports: c
            .ports
            .map(|p| {
                p.into_iter()
                    .filter(|p| p.host_port.is_some())
                    .collect::<Vec<_>>()
            })
            .filter(|p| !p.is_empty()),
        ..Container::default()
    }
}

fn requests_only(r: ResourceRequirements) -> ResourceRequirements {
    ResourceRequirements {
        requests: r.requests,
        ..ResourceRequirements::default()
    }
}

fn keep_keys(
    map: BTreeMap<String, String>,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, String> {
    map.into_iter().filter(|(k, _)| keep(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn busy_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "a-worker-0-0", "namespace": "ml", "uid": "u1",
                "labels": {"switchyard.dev/job": "a", "app": "resnet", "pod-template-hash": "x"},
                "annotations": {"switchyard.dev/checkpoint-requested": "2026-01-01T00:00:00Z",
                    "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
                "ownerReferences": [{"apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
                    "name": "a", "uid": "uid-a", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]},
            "spec": {"nodeName": "n1", "schedulerName": "switchyard",
                "overhead": {"cpu": "250m"},
                "schedulingGates": [{"name": "example.com/quota"}],
                "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}}}],
                "containers": [{"name": "trainer", "image": "resnet:1", "args": ["--epochs=90"],
                    "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                    "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}],
                    "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}],
                "volumes": [{"name": "ckpt", "emptyDir": {}}]},
            "status": {"phase": "Failed", "reason": "OutOfcpu", "message": "no room",
                "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "False"},
                    {"type": "DisruptionTarget", "status": "True"}],
                "containerStatuses": [{"name": "trainer", "image": "resnet:1", "imageID": "sha256:x",
                    "ready": false, "restartCount": 3,
                    "resources": {"requests": {"cpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_trimmed_pod_keeps_what_the_snapshot_restarts_and_failures_read_and_nothing_else() {
        let mut pod = busy_pod();
        super::pod(&mut pod);
        let meta = &pod.metadata;
        assert!(meta.managed_fields.is_none());
        assert_eq!(
            meta.labels.as_ref().unwrap().len(),
            1,
            "only switchyard.dev/ labels"
        );
        assert_eq!(
            meta.annotations
                .as_ref()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            vec![CHECKPOINT_ANNOTATION]
        );
        assert_eq!(meta.owner_references.as_ref().unwrap()[0].uid, "uid-a");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert!(spec.volumes.is_none() && spec.containers[0].env.is_none());
        assert!(
            spec.containers[0]
                .resources
                .as_ref()
                .unwrap()
                .limits
                .is_none()
        );
        assert_eq!(
            crate::pods::spec_requests(spec).cpu_millis,
            4350,
            "container, sidecar and overhead survive"
        );
        assert!(spec.scheduling_gates.is_some());
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.reason.as_deref(), Some("OutOfcpu"));
        assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
        assert!(crate::gang::is_disruption(&pod));
        let container = &status.container_statuses.as_ref().unwrap()[0];
        assert!(container.image.is_empty() && container.resources.is_some());
    }

    #[test]
    fn a_trimmed_node_keeps_its_labels_allocatable_and_readiness_but_not_its_images() {
        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"gpu": "a100"},
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24"},
            "status": {"allocatable": {"cpu": "8"}, "capacity": {"cpu": "8"},
                "images": [{"names": ["resnet:1"], "sizeBytes": 1}],
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]}
        }))
        .unwrap();
        super::node(&mut node);
        let status = node.status.as_ref().unwrap();
        assert!(status.images.is_none() && status.capacity.is_none());
        assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
        assert!(node.metadata.annotations.is_none());
        assert_eq!(node.metadata.labels.as_ref().unwrap()["gpu"], "a100");
        assert_eq!(node.spec.as_ref().unwrap().unschedulable, Some(true));
    }
}
