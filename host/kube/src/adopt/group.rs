//! The queue's pods grouped into adopted jobs: each pod's owner found from its
//! controller owner reference (a JobSet's pods name their JobSet in its labels, past
//! the child Job), its role and task read from the owner's labels, and the owner's
//! [`Shape`] from the owners' cache. A pod whose owner is not cached yet waits; a pod
//! that carries an older owner's UID (an owner deleted and made again under one name)
//! is not the new one's. A gated pod whose owner kind is not enabled, or that has no
//! owner, is set apart ([`Unadoptable`]) for its Event.
//!
//! Only pods switchyard holds (its placement gate) or released (the annotation its
//! release writes) are adopted: an owner with a live pod that never waited behind the
//! gate (the team left the gate out, or lifted it by hand) is not adopted at all, its
//! running pods left to count as the cluster's other usage, and set apart ([`NotHeld`])
//! for its Event. It reads the caches; it must not write.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;

use super::caches::Adoption;
use super::names::{Integration, adopted_id};
use super::shape::Shape;
use super::{job, jobset, pytorchjob};
use crate::pods::{held_by_placement_gate, terminated};
use crate::{QUEUE_LABEL, RELEASED_ANNOTATION};

/// One pod of an adopted job, as a task.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    /// Its role (a replicated job, a replica type, `job`).
    pub(crate) role: String,
    /// Its task's name, stable across the pods the owner makes for it.
    pub(crate) task: String,
    pub(crate) pod: Arc<Pod>,
}

/// A job whose pods the controller adopted.
#[derive(Clone, Debug)]
pub(crate) struct AdoptedJob {
    /// Its id in the snapshot (`<kind>:<namespace>/<name>`).
    pub(crate) id: String,
    pub(crate) kind: Integration,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The owner's UID.
    pub(crate) uid: String,
    pub(crate) shape: Shape,
    /// Its live pods (not finished, not being deleted), one per task (the newest), by
    /// task name.
    pub(crate) members: Vec<Member>,
    /// How many of its pods are being deleted and have not finished: an eviction under
    /// way.
    pub(crate) stopping: usize,
    /// Those stopping pods whose task has no live pod yet: the policy still sees their
    /// tasks, restarting.
    pub(crate) stopping_members: Vec<Member>,
}

/// A gated pod of the queue that no enabled kind owns.
#[derive(Clone, Debug)]
pub(crate) struct Unadoptable {
    pub(crate) pod: Arc<Pod>,
    /// Its owner's kind when it is one switchyard can adopt (then it is not enabled).
    pub(crate) kind: Option<Integration>,
    /// Its owner's kind and API version as the pod names them, or `no owner`.
    pub(crate) owner: String,
}

/// An owner of an enabled kind with a live pod in the queue that switchyard neither
/// holds nor released: not adopted, whatever its other pods are.
#[derive(Clone, Debug)]
pub(crate) struct NotHeld {
    pub(crate) kind: Integration,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The owner's UID.
    pub(crate) uid: String,
    /// Its live pods that never waited behind the gate, by name.
    pub(crate) ungated: Vec<String>,
    /// How many of its live pods wait behind the gate.
    pub(crate) gated: usize,
}

/// The queue's pods, grouped.
#[derive(Default)]
pub(crate) struct Grouped {
    /// The adopted jobs, by id.
    pub(crate) jobs: Vec<AdoptedJob>,
    pub(crate) unadoptable: Vec<Unadoptable>,
    /// The owners not adopted because some of their pods run without the gate.
    pub(crate) not_held: Vec<NotHeld>,
}

/// Whether switchyard holds `pod` (its placement gate) or released it (the annotation
/// its release writes). Only such a pod is switchyard's to count, stop and evict.
fn held_or_released(pod: &Pod) -> bool {
    held_by_placement_gate(pod)
        || pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(RELEASED_ANNOTATION))
}

/// An owner by kind, namespace and name.
type OwnerName = (Integration, String, String);

/// Whose pod `pod` is: the kind, name and UID of its owner, or the owner as the pod
/// names it when it is no kind switchyard adopts.
fn claim(pod: &Pod) -> Result<(Integration, String, String), (Option<Integration>, String)> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    let label = |key: &str| {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
    };
    match owner {
        Some(o) if o.kind == "Job" && o.api_version == "batch/v1" => {
            match label(jobset::JOBSET_NAME_LABEL) {
                Some(set) => Ok((
                    Integration::JobSet,
                    set,
                    label(jobset::JOBSET_UID_LABEL).unwrap_or_default(),
                )),
                None => Ok((Integration::Job, o.name.clone(), o.uid.clone())),
            }
        }
        Some(o) if o.kind == "PyTorchJob" && o.api_version.starts_with("kubeflow.org/") => {
            Ok((Integration::PyTorchJob, o.name.clone(), o.uid.clone()))
        }
        Some(o) => Err((None, format!("{} ({})", o.kind, o.api_version))),
        None => Err((None, "no owner".into())),
    }
}

/// `pod`'s role and task in an owner of `kind`.
fn member_of(kind: Integration, pod: &Pod) -> (String, String) {
    let read = match kind {
        Integration::Job => Some((job::ROLE.to_string(), job::task(pod))),
        Integration::JobSet => jobset::member(pod),
        Integration::PyTorchJob => pytorchjob::member(pod),
    };
    read.unwrap_or_else(|| {
        (
            kind.name().to_string(),
            pod.metadata.name.clone().unwrap_or_default(),
        )
    })
}

impl Adoption {
    /// The owner `namespace/name` of `kind` from its cache: its shape and UID.
    fn owner(&self, kind: Integration, namespace: &str, name: &str) -> Option<(Shape, String)> {
        let dynamic =
            |store: &Option<kube::runtime::reflector::Store<kube::api::DynamicObject>>| {
                let key = ObjectRef::new_with(name, kind.api_resource()).within(namespace);
                store.as_ref()?.get(&key)
            };
        let (shape, meta) = match kind {
            Integration::Job => {
                let owner = self
                    .jobs
                    .as_ref()?
                    .get(&ObjectRef::new(name).within(namespace))?;
                (job::shape(&owner), owner.metadata.clone())
            }
            Integration::JobSet => {
                let owner = dynamic(&self.jobsets)?;
                (jobset::shape(&owner), owner.metadata.clone())
            }
            Integration::PyTorchJob => {
                let owner = dynamic(&self.pytorchjobs)?;
                (pytorchjob::shape(&owner), owner.metadata.clone())
            }
        };
        Some((shape, meta.uid.unwrap_or_default()))
    }

    /// The queue's pods grouped into adopted jobs (finished owners left out), and the
    /// gated pods no enabled kind owns.
    pub(crate) fn group(&self) -> Grouped {
        // Per owner (kind, namespace, name): its pods, each with the owner UID it names.
        let mut by_owner: BTreeMap<OwnerName, Vec<(String, Arc<Pod>)>> = BTreeMap::new();
        let mut grouped = Grouped::default();
        for pod in self.pods.state() {
            let labels = pod.metadata.labels.as_ref();
            if labels.and_then(|l| l.get(QUEUE_LABEL)).map(String::as_str) != Some(&*self.queue) {
                continue;
            }
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let waiting = held_by_placement_gate(&pod)
                && pod.metadata.deletion_timestamp.is_none()
                && !terminated(&pod);
            match claim(&pod) {
                Ok((kind, name, uid)) if self.enabled(kind) => {
                    by_owner
                        .entry((kind, namespace, name))
                        .or_default()
                        .push((uid, pod));
                }
                Ok((kind, ..)) if waiting => grouped.unadoptable.push(Unadoptable {
                    pod,
                    kind: Some(kind),
                    owner: kind.kind().to_string(),
                }),
                Err((kind, owner)) if waiting => {
                    grouped.unadoptable.push(Unadoptable { pod, kind, owner })
                }
                _ => {}
            }
        }
        for ((kind, namespace, name), pods) in by_owner {
            let Some((shape, uid)) = self.owner(kind, &namespace, &name) else {
                continue;
            };
            if shape.finished {
                continue;
            }
            let pods: Vec<Arc<Pod>> = pods
                .into_iter()
                .filter(|(pod_uid, _)| pod_uid.is_empty() || uid.is_empty() || *pod_uid == uid)
                .map(|(_, pod)| pod)
                .filter(|pod| !terminated(pod))
                .collect();
            let live = |pod: &&Arc<Pod>| pod.metadata.deletion_timestamp.is_none();
            let ungated: Vec<String> = pods
                .iter()
                .filter(live)
                .filter(|pod| !held_or_released(pod))
                .map(|pod| pod.metadata.name.clone().unwrap_or_default())
                .collect();
            if !ungated.is_empty() {
                grouped.not_held.push(NotHeld {
                    gated: pods
                        .iter()
                        .filter(live)
                        .filter(|pod| held_by_placement_gate(pod))
                        .count(),
                    kind,
                    namespace,
                    name,
                    uid,
                    ungated,
                });
                continue;
            }
            let mut newest: BTreeMap<String, Member> = BTreeMap::new();
            let mut stopping_members: BTreeMap<String, Member> = BTreeMap::new();
            let mut stopping = 0;
            for pod in pods {
                let (role, task) = member_of(kind, &pod);
                if pod.metadata.deletion_timestamp.is_some() {
                    stopping += 1;
                    stopping_members.insert(task.clone(), Member { role, task, pod });
                    continue;
                }
                let newer = |kept: &Member| {
                    let age = |p: &Pod| {
                        (
                            p.metadata.creation_timestamp.clone(),
                            p.metadata.name.clone(),
                        )
                    };
                    age(pod.as_ref()) > age(kept.pod.as_ref())
                };
                if newest.get(&task).is_none_or(newer) {
                    newest.insert(task.clone(), Member { role, task, pod });
                }
            }
            grouped.jobs.push(AdoptedJob {
                id: adopted_id(kind, &namespace, &name),
                kind,
                namespace,
                name,
                uid,
                shape,
                stopping_members: stopping_members
                    .into_values()
                    .filter(|m| !newest.contains_key(&m.task))
                    .collect(),
                members: newest.into_values().collect(),
                stopping,
            });
        }
        grouped.jobs.sort_by(|a, b| a.id.cmp(&b.id));
        grouped
    }

    /// The adopted job with id `id`, as [`Adoption::group`] finds it.
    pub(crate) fn adopted(&self, id: &str) -> Option<AdoptedJob> {
        self.group().jobs.into_iter().find(|j| j.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: serde_json::Value, owner: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ml",
            "labels": labels, "ownerReferences": owner}, "spec": {"containers": []}}))
        .unwrap()
    }

    #[test]
    fn a_pod_is_claimed_by_the_kind_its_owner_chain_names() {
        let job = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]);
        assert_eq!(
            claim(&pod(json!({}), job.clone())),
            Ok((Integration::Job, "j".into(), "u".into()))
        );
        // A JobSet's child Job owns the pod; the JobSet is named in its labels.
        let child = pod(
            json!({jobset::JOBSET_NAME_LABEL: "js", jobset::JOBSET_UID_LABEL: "ujs"}),
            job,
        );
        assert_eq!(
            claim(&child),
            Ok((Integration::JobSet, "js".into(), "ujs".into()))
        );
        let tf = pod(
            json!({}),
            json!([{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "t", "uid": "u", "controller": true}]),
        );
        assert_eq!(claim(&tf), Err((None, "TFJob (kubeflow.org/v1)".into())));
        let not_controller = pod(
            json!({}),
            json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]),
        );
        assert_eq!(claim(&not_controller), Err((None, "no owner".into())));
    }
}
