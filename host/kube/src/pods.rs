//! Turning a job's spec into tasks and pods: task names (`<role>-<index>`), the pod made
//! from the role's template (scheduler name, labels, owner reference, a generation in
//! the name so a replacement never collides with the pod it replaces, the task as its
//! hostname under the job's headless Service), the Service, and the requests and CPU
//! weight the policy sees. It builds objects; it must not send them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, Service, ServiceSpec};
use kube::Resource;
use kube::api::ObjectMeta;

use crate::crd::{Role, TrainingJob};
use crate::{
    Error, GENERATION_LABEL, JOB_LABEL, JOB_UID_LABEL, ROLE_LABEL, Result, SCHEDULER_NAME,
    TASK_LABEL, quantity,
};
use switchyard_core::Resources;

/// One task the job's spec asks for now.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    /// `<role>-<index>`.
    pub name: String,
    /// Role name.
    pub role: String,
    /// What its pod requests (see [`spec_requests`]).
    pub requests: Resources,
}

/// The tasks `job` runs with `scalable` replicas of its scalable role (the current count
/// from the status, or as submitted).
pub fn tasks(job: &TrainingJob) -> Vec<TaskSpec> {
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
pub fn template_requests(role: &Role) -> Resources {
    role.template
        .spec
        .as_ref()
        .map(spec_requests)
        .unwrap_or_default()
}

/// What a pod with `spec` takes from its node, counted as kube-scheduler counts it: its
/// containers and its sidecars (init containers with `restartPolicy: Always`, which run
/// alongside), or the largest step of its initialisation if that is more, plus the
/// runtime class's `overhead`.
pub fn spec_requests(spec: &PodSpec) -> Resources {
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

fn containers(role: &Role) -> &[Container] {
    role.template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
}

/// The name of a task's pod in a given generation: `<job>-<task>-<generation>`.
pub fn pod_name(job: &str, task: &str, generation: u32) -> String {
    format!("{job}-{task}-{generation}")
}

/// The pod for `task` of `job` in `generation`: the role's template with the
/// controller's scheduler name, labels and owner reference, not bound to any node.
pub fn build(job: &TrainingJob, task: &str, generation: u32) -> Result<Pod> {
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
    spec.scheduler_name = Some(SCHEDULER_NAME.to_string());
    spec.node_name = None;
    if spec.restart_policy.is_none() {
        spec.restart_policy = Some("OnFailure".to_string());
    }
    // Rendezvous: `<task>.<job>` resolves through the job's headless Service to whatever
    // pod runs the task now, across generations.
    spec.hostname = Some(task.to_string());
    spec.subdomain = Some(job_name.clone());
    let env = rendezvous_env(job, role_name, task);
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
pub fn service(job: &TrainingJob) -> Service {
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

/// The generation a pod of the controller was made for: its `switchyard.dev/generation`
/// label, else the last part of its name (`<job>-<task>-<generation>`).
pub fn generation_of(pod: &Pod) -> u32 {
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

/// The CPU weight of a running pod: its training container's CPU request as the kubelet
/// applied it (its status; the spec when the status does not say) over the request in
/// the template (a resize lowers the request, and the kernel's CPU shares
/// follow the request). 1 when either is unknown.
pub fn cpu_weight(job: &TrainingJob, pod: &Pod) -> f64 {
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
pub enum ResizeState {
    /// Each container's status shows the requests its spec asks for.
    Applied,
    /// The kubelet has not carried it out yet (deferred, in progress), with why.
    Pending(String),
    /// The node cannot fit it (`PodResizePending`, reason `Infeasible`).
    Infeasible(String),
}

/// Where `pod`'s last in-place resize stands, from its conditions and container
/// statuses.
pub fn resize_state(pod: &Pod) -> ResizeState {
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
pub fn log_container(job: &TrainingJob, pod: &Pod) -> Option<String> {
    let log = job.spec.progress.log.as_ref()?;
    if let Some(container) = &log.container {
        return Some(container.clone());
    }
    let role = pod.metadata.labels.as_ref()?.get(ROLE_LABEL)?;
    let role = job.spec.roles.iter().find(|r| &r.name == role)?;
    containers(role).first().map(|c| c.name.clone())
}

/// The training container of a role (the first) and its template CPU request, millis.
pub fn training_container(role: &Role) -> Option<(&str, u64)> {
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
