//! Turning a job's spec into tasks and objects: task names (`<role>-<index>`), the pod
//! made from the role's template (held by the placement gate, labelled and owned, a
//! generation in its name so a replacement never collides with the pod it replaces, the
//! task as its hostname under the job's headless Service), the node affinity that pins
//! a released pod to the node the policy chose, the job's Service and
//! PodDisruptionBudget, the pod's annotations mounted for a job asked to checkpoint by
//! annotation (`SWITCHYARD_ANNOTATIONS_FILE`), and the requests and CPU weight the
//! policy sees. It builds objects; it must not send them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, DownwardAPIVolumeFile, DownwardAPIVolumeSource, EnvVar, NodeAffinity,
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectFieldSelector, Pod,
    PodSchedulingGate, PodSpec, Service, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use kube::api::ObjectMeta;

use crate::crd::{CheckpointMethod, Role, TrainingJob};
use crate::pods::spec_requests;
use crate::{
    Error, GENERATION_LABEL, JOB_LABEL, JOB_UID_LABEL, PLACEMENT_GATE, ROLE_LABEL, Result,
    TASK_LABEL, quantity,
};
use switchyard_core::Resources;

/// One task the job's spec asks for now.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TaskSpec {
    /// `<role>-<index>`.
    pub(crate) name: String,
    /// Role name.
    pub(crate) role: String,
    /// What its pod requests (see [`spec_requests`]).
    pub(crate) requests: Resources,
}

/// The tasks `job` runs with `scalable` replicas of its scalable role (the current count
/// from the status, or as submitted).
pub(crate) fn tasks(job: &TrainingJob) -> Vec<TaskSpec> {
    let scalable = job.spec.scalable_role().map(|r| r.name.clone());
    let current = job.status.as_ref().and_then(|s| s.replicas);
    job.spec
        .roles
        .iter()
        .flat_map(|role| {
            let count = match (&scalable, current) {
                (Some(name), Some(n)) if *name == role.name => n,
                _ => role.replicas,
            };
            let requests = template_requests(role);
            (0..count).map(move |i| TaskSpec {
                name: format!("{}-{i}", role.name),
                role: role.name.clone(),
                requests,
            })
        })
        .collect()
}

/// What a pod made from the role's template requests (see [`spec_requests`]).
pub(crate) fn template_requests(role: &Role) -> Resources {
    role.template
        .spec
        .as_ref()
        .map(spec_requests)
        .unwrap_or_default()
}

fn containers(role: &Role) -> &[Container] {
    role.template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
}

/// The name of a task's pod in a given generation: `<job>-<task>-<generation>`.
pub(crate) fn pod_name(job: &str, task: &str, generation: u32) -> String {
    format!("{job}-{task}-{generation}")
}

/// The pod for `task` of `job` in `generation`: the role's template with the
/// controller's labels and owner reference, held by the placement gate
/// ([`PLACEMENT_GATE`]) until the policy's node is written into it, and left to the
/// scheduler the template names (the cluster's default one unless it names another).
/// A template without a `restartPolicy` gets `Never`: a process that fails fails its
/// pod, and the job restarts its whole gang from the checkpoint.
pub(crate) fn build(job: &TrainingJob, task: &str, generation: u32) -> Result<Pod> {
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let (role_name, _) = task.rsplit_once('-').ok_or_else(|| {
        Error::NotFound(format!(
            "task `{task}` of TrainingJob `{job_name}` is not of the form <role>-<index>"
        ))
    })?;
    let role = job
        .spec
        .roles
        .iter()
        .find(|r| r.name == role_name)
        .ok_or_else(|| {
            Error::NotFound(format!(
                "TrainingJob `{job_name}` has no role `{role_name}`"
            ))
        })?;
    let mut spec: PodSpec = role.template.spec.clone().unwrap_or_default();
    if spec.containers.is_empty() {
        return Err(Error::InvalidSpec {
            job: job_name,
            message: format!("role `{role_name}` has a template without containers"),
        });
    }
    spec.node_name = None;
    spec.scheduling_gates
        .get_or_insert_with(Vec::new)
        .push(PodSchedulingGate {
            name: PLACEMENT_GATE.to_string(),
        });
    if spec.restart_policy.is_none() {
        spec.restart_policy = Some("Never".to_string());
    }
    // Rendezvous: `<task>.<job>` resolves through the job's headless Service to whatever
    // pod runs the task now, across generations.
    spec.hostname = Some(task.to_string());
    spec.subdomain = Some(job_name.clone());
    let mut env = rendezvous_env(job, role_name, task);
    if job
        .spec
        .checkpoint
        .as_ref()
        .is_some_and(|c| c.method == CheckpointMethod::Annotation)
    {
        mount_annotations(&mut spec);
        env.push(EnvVar {
            name: ANNOTATIONS_FILE_ENV.into(),
            value: Some(format!("{ANNOTATIONS_DIR}/{ANNOTATIONS_FILE}")),
            ..EnvVar::default()
        });
    }
    for container in &mut spec.containers {
        let vars = container.env.get_or_insert_with(Vec::new);
        for var in &env {
            if !vars.iter().any(|v| v.name == var.name) {
                vars.push(var.clone());
            }
        }
    }
    let template_meta = role.template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    labels.insert(JOB_LABEL.to_string(), job_name.clone());
    labels.insert(TASK_LABEL.to_string(), task.to_string());
    labels.insert(ROLE_LABEL.to_string(), role_name.to_string());
    labels.insert(GENERATION_LABEL.to_string(), generation.to_string());
    if let Some(uid) = &job.metadata.uid {
        labels.insert(JOB_UID_LABEL.to_string(), uid.clone());
    }
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&job_name, task, generation)),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: template_meta.annotations,
            owner_references: job.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The variable naming the file that holds the pod's annotations.
pub(crate) const ANNOTATIONS_FILE_ENV: &str = "SWITCHYARD_ANNOTATIONS_FILE";
/// Where the downward-API volume of the pod's annotations is mounted.
pub(crate) const ANNOTATIONS_DIR: &str = "/etc/switchyard";
/// The file in it: one `key="value"` line per annotation.
pub(crate) const ANNOTATIONS_FILE: &str = "annotations";
/// The volume's name.
const ANNOTATIONS_VOLUME: &str = "switchyard-annotations";

/// Mounts a downward-API volume of the pod's `metadata.annotations` at
/// [`ANNOTATIONS_DIR`] in every container, so the process sees
/// `switchyard.dev/checkpoint-requested` appear in its file. A container that already
/// mounts something there keeps its own mount, and a template with a volume of the same
/// name keeps its volume.
fn mount_annotations(spec: &mut PodSpec) {
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    if volumes.iter().any(|v| v.name == ANNOTATIONS_VOLUME) {
        return;
    }
    volumes.push(Volume {
        name: ANNOTATIONS_VOLUME.into(),
        downward_api: Some(DownwardAPIVolumeSource {
            items: Some(vec![DownwardAPIVolumeFile {
                path: ANNOTATIONS_FILE.into(),
                field_ref: Some(ObjectFieldSelector {
                    field_path: "metadata.annotations".into(),
                    ..ObjectFieldSelector::default()
                }),
                ..DownwardAPIVolumeFile::default()
            }]),
            ..DownwardAPIVolumeSource::default()
        }),
        ..Volume::default()
    });
    for container in &mut spec.containers {
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        let taken = mounts.iter().any(|m| {
            let path = m.mount_path.trim_end_matches('/');
            path == ANNOTATIONS_DIR || path == format!("{ANNOTATIONS_DIR}/{ANNOTATIONS_FILE}")
        });
        if !taken {
            mounts.push(VolumeMount {
                name: ANNOTATIONS_VOLUME.into(),
                mount_path: ANNOTATIONS_DIR.into(),
                read_only: Some(true),
                ..VolumeMount::default()
            });
        }
    }
}

/// The required node affinity of a pod pinned to `node`, made from the terms it has:
/// each term gains `metadata.name In [node]` in `matchFields` (or one term says only
/// that, when there are none). Only a tightening: the API server accepts it on a gated
/// pod (mutable scheduling directives), and kube-scheduler still checks every term the
/// template and admission wrote.
pub(crate) fn pinned_affinity(spec: Option<&PodSpec>, node: &str) -> NodeSelector {
    let pin = NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: "In".into(),
        values: Some(vec![node.to_string()]),
    };
    let existing = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let terms = if existing.is_empty() {
        vec![NodeSelectorTerm {
            match_fields: Some(vec![pin]),
            ..NodeSelectorTerm::default()
        }]
    } else {
        existing
            .into_iter()
            .map(|mut term| {
                // The pin first, so that reading it back finds it in any term.
                let mut fields = vec![pin.clone()];
                fields.extend(term.match_fields.take().unwrap_or_default());
                term.match_fields = Some(fields);
                term
            })
            .collect()
    };
    NodeSelector {
        node_selector_terms: terms,
    }
}

/// `spec`'s affinity with its required node affinity replaced by `required`.
pub(crate) fn with_required(spec: Option<&PodSpec>, required: NodeSelector) -> Affinity {
    let mut affinity = spec.and_then(|s| s.affinity.clone()).unwrap_or_default();
    affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default)
        .required_during_scheduling_ignored_during_execution = Some(required);
    affinity
}

/// What each container learns of its place in the job: `SWITCHYARD_JOB`,
/// `SWITCHYARD_ROLE`, `SWITCHYARD_TASK`, `SWITCHYARD_INDEX`, and per role
/// `SWITCHYARD_<ROLE>_HOSTS`, the task hostnames of that role now
/// (`worker-0.resnet50,worker-1.resnet50`). A variable the template sets stays.
fn rendezvous_env(job: &TrainingJob, role: &str, task: &str) -> Vec<EnvVar> {
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let var = |name: String, value: String| EnvVar {
        name,
        value: Some(value),
        ..EnvVar::default()
    };
    let index = task.rsplit_once('-').map(|(_, i)| i).unwrap_or("0");
    let mut env = vec![
        var("SWITCHYARD_JOB".into(), job_name.clone()),
        var("SWITCHYARD_ROLE".into(), role.to_string()),
        var("SWITCHYARD_TASK".into(), task.to_string()),
        var("SWITCHYARD_INDEX".into(), index.to_string()),
    ];
    let tasks = tasks(job);
    for r in &job.spec.roles {
        let hosts: Vec<String> = tasks
            .iter()
            .filter(|t| t.role == r.name)
            .map(|t| format!("{}.{job_name}", t.name))
            .collect();
        let name = format!(
            "SWITCHYARD_{}_HOSTS",
            r.name.to_ascii_uppercase().replace('-', "_")
        );
        env.push(var(name, hosts.join(",")));
    }
    env
}

/// The headless Service of `job`: named after it, selecting its pods, publishing them
/// before they are ready (the processes rendezvous before any of them is), owned by the
/// job so that it goes with it.
pub(crate) fn service(job: &TrainingJob) -> Service {
    let name = job.metadata.name.clone().unwrap_or_default();
    let selector = BTreeMap::from([(JOB_LABEL.to_string(), name.clone())]);
    Service {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: job.metadata.namespace.clone(),
            labels: Some(selector.clone()),
            owner_references: job.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector),
            publish_not_ready_addresses: Some(true),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The PodDisruptionBudget of `job`: at most one of its pods unavailable at a time, so
/// that a drain or a cluster-autoscaler scale-down evicts its members one by one
/// through the eviction API, and the controller, seeing the first eviction, restarts
/// the whole gang from its checkpoint. Pods that are not running well may always be
/// evicted (`unhealthyPodEvictionPolicy: AlwaysAllow`), so a crash-looping member never
/// blocks a drain. Selects the job's pods by its UID; owned by the job.
pub(crate) fn disruption_budget(job: &TrainingJob) -> PodDisruptionBudget {
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: job.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(JOB_LABEL.to_string(), name)])),
            owner_references: job.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(JOB_UID_LABEL.to_string(), uid)])),
                ..LabelSelector::default()
            }),
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

/// The CPU weight of a running pod: its training container's CPU request as the kubelet
/// applied it (its status; the spec when the status does not say) over the request in
/// the template (a resize lowers the request, and the kernel's CPU shares
/// follow the request). 1 when either is unknown.
pub(crate) fn cpu_weight(job: &TrainingJob, pod: &Pod) -> f64 {
    let labels = pod.metadata.labels.as_ref();
    let Some(role) = labels
        .and_then(|l| l.get(ROLE_LABEL))
        .and_then(|r| job.spec.roles.iter().find(|role| &role.name == r))
    else {
        return 1.0;
    };
    let Some(container) = containers(role).first() else {
        return 1.0;
    };
    let base = cpu_request(container);
    // What the kubelet applied (the container's status), not what the spec asks for: a
    // resize the node has not carried out does not count.
    let applied = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == container.name))
        .and_then(|c| c.resources.as_ref()?.requests.as_ref())
        .map(|r| quantity::resources(r).cpu_millis);
    let now = applied
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == container.name))
                .map(cpu_request)
        })
        .unwrap_or(base);
    if base == 0 {
        1.0
    } else {
        (now as f64 / base as f64).clamp(f64::MIN_POSITIVE, 1.0)
    }
}

/// Where an in-place resize of a pod stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ResizeState {
    /// Each container's status shows the requests its spec asks for.
    Applied,
    /// The kubelet has not carried it out yet (deferred, in progress), with why.
    Pending(String),
    /// The node cannot fit it (`PodResizePending`, reason `Infeasible`).
    Infeasible(String),
}

/// Where `pod`'s last in-place resize stands, from its conditions and container
/// statuses.
pub(crate) fn resize_state(pod: &Pod) -> ResizeState {
    let status = pod.status.as_ref();
    let conditions = status.and_then(|s| s.conditions.as_ref());
    for condition in conditions.into_iter().flatten() {
        let message = condition.message.clone().unwrap_or_default();
        match (condition.type_.as_str(), condition.reason.as_deref()) {
            ("PodResizePending", Some("Infeasible")) => return ResizeState::Infeasible(message),
            ("PodResizePending", _) | ("PodResizeInProgress", _) => {
                return ResizeState::Pending(message);
            }
            _ => {}
        }
    }
    let statuses = status.and_then(|s| s.container_statuses.as_ref());
    let spec_containers = pod.spec.iter().flat_map(|s| &s.containers);
    for container in spec_containers {
        let applied = statuses
            .and_then(|c| c.iter().find(|c| c.name == container.name))
            .and_then(|c| c.resources.as_ref()?.requests.as_ref())
            .map(|r| quantity::resources(r).cpu_millis);
        if applied.is_some_and(|cpu| cpu != cpu_request(container)) {
            return ResizeState::Pending(format!(
                "container {} does not run with its new request yet",
                container.name
            ));
        }
    }
    ResizeState::Applied
}

/// The container whose log `pod` of `job` is read: `progress.log.container`, else the
/// first container of the pod's role.
pub(crate) fn log_container(job: &TrainingJob, pod: &Pod) -> Option<String> {
    let log = job.spec.progress.log.as_ref();
    if let Some(container) = log.and_then(|l| l.container.as_ref()) {
        return Some(container.clone());
    }
    let role = pod.metadata.labels.as_ref()?.get(ROLE_LABEL)?;
    let role = job.spec.roles.iter().find(|r| &r.name == role)?;
    containers(role).first().map(|c| c.name.clone())
}

/// The training container of a role (the first) and its template CPU request, millis.
pub(crate) fn training_container(role: &Role) -> Option<(&str, u64)> {
    containers(role)
        .first()
        .map(|c| (c.name.as_str(), cpu_request(c)))
}

fn cpu_request(container: &Container) -> u64 {
    container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .map(|r| quantity::resources(r).cpu_millis)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::pinned_node;
    use serde_json::json;

    #[test]
    fn a_pin_tightens_every_term_the_pod_has_and_reads_back_as_its_node() {
        let spec: PodSpec = serde_json::from_value(json!({"containers": [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}}}}))
        .unwrap();
        let pinned = pinned_affinity(Some(&spec), "n2");
        assert_eq!(pinned.node_selector_terms.len(), 2, "no term added or lost");
        for term in &pinned.node_selector_terms {
            let fields = term.match_fields.as_ref().unwrap();
            assert_eq!(fields[0].key, "metadata.name");
            assert_eq!(fields[0].values.as_deref(), Some(&["n2".to_string()][..]));
            assert!(term.match_expressions.is_some(), "expressions kept");
        }
        assert_eq!(
            pinned.node_selector_terms[1]
                .match_fields
                .as_ref()
                .unwrap()
                .len(),
            2
        );
        let mut pod = Pod {
            spec: Some(spec.clone()),
            ..Pod::default()
        };
        pod.spec.as_mut().unwrap().affinity = Some(with_required(Some(&spec), pinned));
        assert_eq!(pinned_node(&pod), Some("n2"));
        let bare = pinned_affinity(None, "n1");
        assert_eq!(bare.node_selector_terms.len(), 1);
        assert!(bare.node_selector_terms[0].match_expressions.is_none());
    }

    /// A job whose two containers checkpoint by `method`; the second already mounts
    /// its own file at the annotations' path.
    fn job_checkpointing_by(method: &str) -> TrainingJob {
        serde_json::from_value(json!({
            "apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
            "metadata": {"name": "a", "namespace": "ml", "uid": "uid-a"},
            "spec": {"roles": [{"name": "main", "replicas": 1, "template": {"spec": {"containers": [
                {"name": "trainer", "image": "t"},
                {"name": "sidecar", "image": "s", "volumeMounts": [{"name": "own", "mountPath": "/etc/switchyard/"}]}
            ], "volumes": [{"name": "own", "emptyDir": {}}]}}}],
                "checkpoint": {"method": method, "gracePeriodSeconds": 30}}
        }))
        .unwrap()
    }

    #[test]
    fn an_annotation_job_s_containers_see_its_annotations_in_a_file_the_environment_names() {
        let pod = build(&job_checkpointing_by("Annotation"), "main-0", 0).unwrap();
        let spec = pod.spec.unwrap();
        let volume = spec
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .find(|v| v.name == ANNOTATIONS_VOLUME)
            .expect("the annotations volume");
        let item = &volume
            .downward_api
            .as_ref()
            .unwrap()
            .items
            .as_ref()
            .unwrap()[0];
        assert_eq!(item.path, "annotations");
        assert_eq!(
            item.field_ref.as_ref().unwrap().field_path,
            "metadata.annotations"
        );
        let env = |c: &Container| {
            c.env
                .as_ref()
                .unwrap()
                .iter()
                .find(|v| v.name == "SWITCHYARD_ANNOTATIONS_FILE")
                .and_then(|v| v.value.clone())
        };
        let mounts = |c: &Container| {
            c.volume_mounts
                .as_ref()
                .unwrap()
                .iter()
                .map(|m| (m.name.clone(), m.mount_path.clone()))
                .collect::<Vec<_>>()
        };
        let (trainer, sidecar) = (&spec.containers[0], &spec.containers[1]);
        assert_eq!(env(trainer).as_deref(), Some("/etc/switchyard/annotations"));
        assert_eq!(
            mounts(trainer),
            [(
                ANNOTATIONS_VOLUME.to_string(),
                "/etc/switchyard".to_string()
            )]
        );
        assert_eq!(
            mounts(sidecar),
            [("own".to_string(), "/etc/switchyard/".to_string())],
            "a mount of its own at that path is left alone"
        );
        let signal = build(&job_checkpointing_by("Signal"), "main-0", 0).unwrap();
        let spec = signal.spec.unwrap();
        assert_eq!(spec.volumes.as_ref().unwrap().len(), 1, "no volume added");
        assert_eq!(env(&spec.containers[0]), None);
    }
}
