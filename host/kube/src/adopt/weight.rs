//! The CPU weight of an adopted job's pods, read from its owner's pod templates
//! ([`TemplateCpu`]): which container of a role is resized, the CPU request its template
//! gives it (weight 1), and whether the kubelet would restart it to resize it. A weight
//! is always relative to the template's request, never to the pod's current one, which
//! an earlier resize changed. It reads templates and pods; it must not write either.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use super::shape::{Shape, TemplateCpu};
use crate::quantity;

impl TemplateCpu {
    /// Why a CPU weight cannot be carried out on this role's pods: `None` when it can.
    pub(crate) fn refusal(&self) -> Option<String> {
        if self.millis == 0 {
            return Some(format!(
                "its container `{}` requests no CPU in the pod template, so there is no request to resize",
                self.container
            ));
        }
        if self.restarts {
            return Some(format!(
                "its container `{}` has resizePolicy RestartContainer for cpu: a resize would restart the training process without a checkpoint",
                self.container
            ));
        }
        None
    }
}

/// The training container of the pod template `template` (JSON, `{metadata, spec}`):
/// the one named `preferred` when there is one, else the first.
pub(crate) fn template_cpu(template: &Value, preferred: Option<&str>) -> Option<TemplateCpu> {
    let containers = template["spec"]["containers"].as_array()?;
    let container = preferred
        .and_then(|name| containers.iter().find(|c| c["name"] == name))
        .or_else(|| containers.first())?;
    let requests: BTreeMap<String, Quantity> =
        serde_json::from_value(container["resources"]["requests"].clone()).unwrap_or_default();
    let restarts = container["resizePolicy"]
        .as_array()
        .is_some_and(|policies| {
            policies
                .iter()
                .any(|p| p["resourceName"] == "cpu" && p["restartPolicy"] == "RestartContainer")
        });
    Some(TemplateCpu {
        container: container["name"].as_str()?.to_string(),
        millis: quantity::resources(&requests).cpu_millis,
        restarts,
    })
}

/// Keeps of a pod template (JSON) what [`template_cpu`] reads: each container's name,
/// CPU request and resize policy (fields left out rather than null, so that the result
/// is still a valid pod template).
pub(crate) fn trim_template(template: &Value) -> Value {
    let containers: Vec<Value> = template["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut kept = json!({"name": c["name"]});
            let cpu = &c["resources"]["requests"]["cpu"];
            if !cpu.is_null() {
                kept["resources"] = json!({"requests": {"cpu": cpu}});
            }
            if c["resizePolicy"].is_array() {
                kept["resizePolicy"] = c["resizePolicy"].clone();
            }
            kept
        })
        .collect();
    json!({"spec": {"containers": containers}})
}

/// The CPU request, millicores, of container `container` of `pod` as the kubelet
/// applied it (its status; the spec while the status does not say).
pub(crate) fn applied_millis(pod: &Pod, container: &str) -> Option<u64> {
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == container))
        .and_then(|c| c.resources.as_ref()?.requests.as_ref())
        .map(|r| quantity::resources(r).cpu_millis);
    status.or_else(|| asked_millis(pod, container))
}

/// The CPU request, millicores, that container `container` of `pod` asks for now (its
/// spec: what the last resize asked).
pub(crate) fn asked_millis(pod: &Pod, container: &str) -> Option<u64> {
    let requests = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?
        .resources
        .as_ref()?
        .requests
        .as_ref()?;
    Some(quantity::resources(requests).cpu_millis)
}

/// The CPU weight the pod `pod` of role `role` of a job shaped `shape` runs with: the
/// request the kubelet applied over its template's, in (0, 1]; 1 when either is unknown.
pub(crate) fn cpu_weight(shape: &Shape, role: &str, pod: &Pod) -> f64 {
    let Some(template) = shape.cpu.get(role).filter(|t| t.millis > 0) else {
        return 1.0;
    };
    match applied_millis(pod, &template.container) {
        Some(now) => (now as f64 / template.millis as f64).clamp(f64::MIN_POSITIVE, 1.0),
        None => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_training_container_is_the_named_one_else_the_first() {
        let template = json!({"spec": {"containers": [
            {"name": "sidecar", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "pytorch", "resources": {"requests": {"cpu": "2"}},
             "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]}]}});
        let named = template_cpu(&template, Some("pytorch")).unwrap();
        assert_eq!((named.container.as_str(), named.millis), ("pytorch", 2000));
        assert_eq!(named.refusal(), None);
        let first = template_cpu(&template, None).unwrap();
        assert_eq!((first.container.as_str(), first.millis), ("sidecar", 100));
        assert_eq!(
            template_cpu(&trim_template(&template), Some("pytorch")).as_ref(),
            Some(&named),
            "trimming keeps what is read"
        );
    }

    #[test]
    fn a_weight_is_refused_without_a_cpu_request_or_when_a_resize_restarts_the_container() {
        let none = json!({"spec": {"containers": [{"name": "train"}]}});
        let refusal = template_cpu(&none, None).unwrap().refusal().unwrap();
        assert!(refusal.contains("requests no CPU"), "{refusal}");
        let restarting = json!({"spec": {"containers": [{"name": "train",
            "resources": {"requests": {"cpu": "1"}},
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]}]}});
        let refusal = template_cpu(&restarting, None).unwrap().refusal().unwrap();
        assert!(refusal.contains("RestartContainer"), "{refusal}");
        assert_eq!(template_cpu(&json!({"spec": {}}), None), None);
        let hostile = json!({"spec": {"containers": [{"name": "t",
            "resources": {"requests": {"cpu": "-5"}}}]}});
        assert_eq!(template_cpu(&hostile, None).unwrap().millis, 0);
    }
}
