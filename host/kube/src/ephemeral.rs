//! Generic ephemeral volumes (`volumes[].ephemeral.volumeClaimTemplate`): a claim per
//! pod, made from the template, owned by the pod and gone with it.
//!
//! Kubernetes' ephemeral volume controller makes such a claim once the pod exists, and
//! kube-scheduler, for a `WaitForFirstConsumer` class, annotates it with the node it
//! chose so that the volume is provisioned there. switchyard creates and binds a pod in
//! one step, so it does both itself, between the two: it creates the claim
//! `<pod>-<volume>` as the ephemeral volume controller would (the template's labels,
//! annotations and spec; the pod as its controlling owner), annotated
//! `volume.kubernetes.io/selected-node` with the node the pod is bound to. When the
//! ephemeral volume controller was first, its claim gets the annotation. The kubelet
//! starts the pod once the volume is provisioned and bound.
//!
//! [`select_node`] is that annotation, for every claim waiting for its first consumer.
//!
//! Which classes can be used this way is judged in [`crate::volumes`]: a claim made with
//! its pod cannot wait for a pre-provisioned volume or be made before the node is
//! known, so a class that binds `Immediate`ly holds the job.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::retry::{self, Guard};
use crate::volumes::{SELECTED_NODE_ANNOTATION, ephemeral_of};
use crate::{Error, FIELD_MANAGER, Result};

/// The name Kubernetes gives the claim of `pod`'s ephemeral volume `volume`.
pub fn claim_name(pod: &str, volume: &str) -> String {
    format!("{pod}-{volume}")
}

/// The claims of `pod`'s ephemeral volumes, as the ephemeral volume controller makes
/// them, owned by the pod (`uid`) and annotated for `node`.
pub fn claims_of(pod: &Pod, uid: &str, node: &str) -> Vec<PersistentVolumeClaim> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    ephemeral_of(pod.spec.as_ref())
        .map(|(volume, template)| {
            let meta = template.metadata.clone().unwrap_or_default();
            let mut annotations = meta.annotations.unwrap_or_default();
            annotations.insert(SELECTED_NODE_ANNOTATION.to_string(), node.to_string());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(pod_name, volume)),
                    namespace: pod.metadata.namespace.clone(),
                    labels: meta.labels,
                    annotations: Some(annotations),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        name: pod_name.to_string(),
                        uid: uid.to_string(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..ObjectMeta::default()
                },
                spec: Some(template.spec.clone()),
                status: None,
            }
        })
        .collect()
}

/// Makes sure `claim` exists, owned by its pod and annotated for its node: creates it,
/// or, when the ephemeral volume controller made it first, adds the annotation. A claim
/// of that name owned by something else (an earlier pod of the same name, still being
/// collected) is an error, as it is for the ephemeral volume controller.
pub async fn ensure(
    api: &Api<PersistentVolumeClaim>,
    guard: &Guard,
    job: &str,
    claim: &PersistentVolumeClaim,
) -> Result<()> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let (pod, uid) = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .next()
        .map(|o| (o.name.clone(), o.uid.clone()))
        .unwrap_or_default();
    let node = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SELECTED_NODE_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let made = retry::with_backoff("create claim", || guard.call(api.create(&pp, claim))).await;
    let existing = match made {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => guard
            .call(api.get(&name))
            .await
            .map_err(Error::api(format!("reading PersistentVolumeClaim {name}")))?,
        Err(kube::Error::Api(s)) if matches!(s.code, 400 | 422) => {
            return Err(Error::InvalidSpec {
                job: job.to_string(),
                message: format!(
                    "the API server refused PersistentVolumeClaim {name}, made from an \
                     ephemeral volume's claim template ({}): {}",
                    s.code, s.message
                ),
            });
        }
        Err(error) => {
            return Err(Error::api(format!("creating PersistentVolumeClaim {name}"))(error));
        }
    };
    let owned = existing
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid);
    if !owned {
        return Err(Error::NotFound(format!(
            "PersistentVolumeClaim {name} exists and was not made for pod {pod} (an earlier pod \
             of the same name, still being deleted?); waiting for it to go"
        )));
    }
    let annotated = existing
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SELECTED_NODE_ANNOTATION));
    if annotated.is_some() {
        return Ok(());
    }
    select_node(api, guard, &name, &node).await
}

/// Annotates claim `name` `volume.kubernetes.io/selected-node: node`, as kube-scheduler
/// does to have its class's provisioner make the volume there.
pub async fn select_node(
    api: &Api<PersistentVolumeClaim>,
    guard: &Guard,
    name: &str,
    node: &str,
) -> Result<()> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let body = Patch::Merge(json!({"metadata": {"annotations": {
        SELECTED_NODE_ANNOTATION: node}}}));
    retry::with_backoff("claim annotation", || {
        guard.call(api.patch(name, &params, &body))
    })
    .await
    .map(drop)
    .map_err(Error::api(format!(
        "choosing node {node} for PersistentVolumeClaim {name}"
    )))
}
