//! What became of a job's gang, read from its pods: whether it succeeded, which members
//! it lost (failed, crash-looping, evicted, deleted by someone else, or gone), which the
//! scheduler refused, and whether its status is behind its pods. As JobSet and the
//! Kubeflow trainer treat a gang, any lost member restarts the whole gang from its
//! checkpoint: the rest of a gang whose member is gone holds its accelerators for
//! nothing, and its collective operations hang. It judges; it must not write to the
//! cluster.

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;

use crate::crd::TrainingJob;
use crate::pods::{
    container_restarts, generation_of, held_by_placement_gate, last_crash, node_of, phase_of,
    placed_node, released_at, scheduling_refusal, task_of,
};
use crate::template;

/// How long the scheduler may leave a released member unbound with a refusal before
/// the gang is taken back: long enough for a refusal that passes (the room a pod still
/// terminating on the node holds, a node the scheduler's cache has not caught up with),
/// short enough that a placement that cannot happen goes back to the policy soon.
pub const REFUSAL_GRACE: SignedDuration = SignedDuration::from_secs(30);

/// Whether `job` has succeeded: every task of the roles its success policy names has a
/// pod that exited successfully, the pod its placement names (so an old pod of a restart,
/// or one of a deleted job of the same name, never counts).
pub(crate) fn succeeded<P: Borrow<Pod>>(job: &TrainingJob, own: &[P]) -> bool {
    let Some(status) = job.status.as_ref() else {
        return false;
    };
    if status.restart.is_some() || status.placements.is_empty() {
        return false;
    }
    let needed: Vec<template::TaskSpec> = template::tasks(job)
        .into_iter()
        .filter(|t| job.spec.success_needs(&t.role))
        .collect();
    !needed.is_empty()
        && needed.iter().all(|t| {
            status
                .placements
                .iter()
                .find(|p| p.task == t.name)
                .and_then(|placed| {
                    own.iter()
                        .map(Borrow::borrow)
                        .find(|p: &&Pod| p.metadata.name.as_deref() == Some(placed.pod.as_str()))
                })
                .is_some_and(|p| phase_of(p) == Some("Succeeded"))
        })
}

/// Whether a failed pod was a disruption rather than a failure of the training process:
/// refused by its node's kubelet at admission (`OutOfcpu`, `OutOfnvidia.com/gpu`,
/// `UnexpectedAdmissionError`, ...), evicted, preempted, or stopped with its node. Such a
/// pod is replaced without counting against the job's `backoffLimit`, as a Job's
/// `podFailurePolicy` ignores the `DisruptionTarget` condition.
pub(crate) fn is_disruption(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let reason = status.reason.as_deref().unwrap_or_default();
    let admission_or_node = refused_at_admission(reason)
        || matches!(
            reason,
            "Evicted" | "Preempting" | "NodeShutdown" | "Shutdown" | "Terminated" | "NodeLost"
        );
    admission_or_node || disruption_target(pod).is_some()
}

/// Whether a failed pod's `reason` is its node's kubelet refusing it at admission
/// (`OutOfcpu`, `OutOfnvidia.com/gpu`, `UnexpectedAdmissionError` from a device plugin,
/// a node affinity or OS the node no longer matches): the node would not run it
/// though the scheduler bound it there.
fn refused_at_admission(reason: &str) -> bool {
    reason.starts_with("OutOf")
        || matches!(
            reason,
            "UnexpectedAdmissionError"
                | "NodeAffinity"
                | "NodeAffinityMismatch"
                | "InvalidNodeInfo"
                | "PodOSNotSupported"
        )
}

/// The kubelet's reason and message when `pod` failed because its node refused it at
/// admission ([`refused_at_admission`]).
fn kubelet_refusal(pod: &Pod) -> Option<(String, String)> {
    if phase_of(pod) != Some("Failed") {
        return None;
    }
    let status = pod.status.as_ref()?;
    let reason = status.reason.as_deref()?;
    refused_at_admission(reason).then(|| {
        (
            reason.to_string(),
            status.message.clone().unwrap_or_default(),
        )
    })
}

/// The reason of `pod`'s `DisruptionTarget` condition (`EvictionByEvictionAPI`,
/// `PreemptionByScheduler`, `DeletionByTaintManager`, `DeletionByPodGC`,
/// `TerminationByKubelet`), when it has one.
fn disruption_target(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        .map(|c| c.reason.as_deref().unwrap_or("DisruptionTarget"))
}

/// A member a gang lost: what happened to it, and the failures it counts against the
/// job's `backoffLimit` (none for a disruption: an eviction, a deletion, a pod the
/// kubelet refused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LostMember {
    /// The pod, its node and what became of it.
    pub(crate) what: String,
    /// Failures counted against `backoffLimit`.
    pub(crate) failures: u32,
}

/// A member the scheduler, or its node's kubelet, refused: the pod, the node it was
/// pinned to, who refused it, and their reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RefusedMember {
    pub(crate) pod: String,
    pub(crate) node: String,
    /// `the scheduler` or `the kubelet`, as the job's Event and condition name it.
    pub(crate) by: &'static str,
    pub(crate) reason: String,
    pub(crate) message: String,
}

/// The members of `job`'s current gang: its pods of the current generation that were
/// released to the scheduler or are bound, whatever became of them since.
fn members<'a, P: Borrow<Pod>>(job: &TrainingJob, own: &'a [P]) -> impl Iterator<Item = &'a Pod> {
    let generation = job.status.as_ref().map_or(0, |s| s.generation);
    own.iter()
        .map(Borrow::borrow)
        .filter(move |p| generation_of(p) == generation && !held_by_placement_gate(p))
}

/// The members `job` lost, and the pods its status names that are gone from `own`
/// (deleted for good, with their node or by the pod garbage collector).
/// `deleted_here` tells a delete this controller sent (not news) from someone else's;
/// `just_made` a pod this controller made that the cache has not shown yet.
pub(crate) fn lost_members<P: Borrow<Pod>>(
    job: &TrainingJob,
    own: &[P],
    deleted_here: impl Fn(&Pod) -> bool,
    just_made: impl Fn(&str) -> bool,
) -> (Vec<LostMember>, Vec<String>) {
    let mut lost = Vec::new();
    for pod in members(job, own) {
        let describe = |what: String| {
            let node = placed_node(pod).unwrap_or("no node");
            format!("pod {} on {node}: {what}", pod.name_any())
        };
        let status = pod.status.as_ref();
        if phase_of(pod) == Some("Failed") && pod.metadata.deletion_timestamp.is_none() {
            let reason = status.and_then(|s| s.reason.as_deref()).unwrap_or("Failed");
            let what = match status.and_then(|s| s.message.as_deref()) {
                Some(message) => format!("{reason} ({message})"),
                None => reason.to_string(),
            };
            lost.push(LostMember {
                what: describe(what),
                failures: u32::from(!is_disruption(pod)),
            });
        } else if pod.metadata.deletion_timestamp.is_some() && !deleted_here(pod) {
            if phase_of(pod) == Some("Succeeded") {
                continue;
            }
            let why = disruption_target(pod).unwrap_or("deleted");
            lost.push(LostMember {
                what: describe(format!("being deleted ({why})")),
                failures: 0,
            });
        } else if container_restarts(pod) > 0 && pod.metadata.deletion_timestamp.is_none() {
            let restarts = container_restarts(pod);
            let crash = last_crash(pod).unwrap_or_else(|| "a container restarted".into());
            let what = format!("crash-looping: {restarts} container restart(s), last {crash}");
            lost.push(LostMember {
                what: describe(what),
                failures: restarts,
            });
        }
    }
    let mut gone = Vec::new();
    if let Some(status) = &job.status {
        for placement in &status.placements {
            let present = own
                .iter()
                .any(|p| p.borrow().metadata.name.as_deref() == Some(placement.pod.as_str()));
            if !present && !just_made(&placement.pod) {
                lost.push(LostMember {
                    what: format!(
                        "pod {} on {}: gone (deleted, or removed with its node)",
                        placement.pod, placement.node
                    ),
                    failures: 0,
                });
                gone.push(placement.pod.clone());
            }
        }
    }
    (lost, gone)
}

/// The members of `job` the scheduler has refused for at least [`REFUSAL_GRACE`] since
/// they were released, at `now`, and those their node's kubelet refused at admission
/// (final at once: placed there again at once, the gang would be refused again, round
/// after round); and whether others are refused within their grace (the job is to be
/// looked at again).
pub(crate) fn refused_members<P: Borrow<Pod>>(
    job: &TrainingJob,
    own: &[P],
    now: Timestamp,
) -> (Vec<RefusedMember>, bool) {
    let mut due = Vec::new();
    let mut waiting = false;
    for pod in members(job, own).filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let refused = |by, (reason, message)| RefusedMember {
            pod: pod.name_any(),
            node: placed_node(pod).unwrap_or("no node").to_string(),
            by,
            reason,
            message,
        };
        if let Some(refusal) = kubelet_refusal(pod) {
            due.push(refused("the kubelet", refusal));
            continue;
        }
        let Some(refusal) = scheduling_refusal(pod) else {
            continue;
        };
        let since = released_at(pod).or_else(|| Some(pod.metadata.creation_timestamp.as_ref()?.0));
        if since.is_some_and(|t| now < t + REFUSAL_GRACE) {
            waiting = true;
            continue;
        }
        due.push(refused("the scheduler", refusal));
    }
    (due, waiting)
}

/// Whether `job`'s status is behind its gang: a member released or bound that its
/// placements do not name (the placement's write was lost), or a refusal still
/// recorded while every task's member is bound. Returns the members and whether every
/// task is bound, for [`crate::act::Actor::record_placements`].
pub(crate) fn status_behind<'a, P: Borrow<Pod>>(
    job: &TrainingJob,
    own: &'a [P],
) -> Option<(Vec<&'a Pod>, bool)> {
    let status = job.status.as_ref();
    let placements = status.map(|s| s.placements.as_slice()).unwrap_or_default();
    let members: Vec<&Pod> = members(job, own)
        .filter(|p| p.metadata.deletion_timestamp.is_none() && placed_node(p).is_some())
        .collect();
    let unrecorded = members.iter().any(|p| {
        !placements
            .iter()
            .any(|q| q.pod == p.name_any() && Some(q.task.as_str()) == task_of(p))
    });
    let tasks = template::tasks(job);
    let every_task_bound = !tasks.is_empty()
        && tasks.iter().all(|t| {
            members
                .iter()
                .any(|p| task_of(p) == Some(t.name.as_str()) && node_of(p).is_some())
        });
    let refusal_cleared = every_task_bound && status.is_some_and(|s| s.refusal.is_some());
    (unrecorded || refusal_cleared).then_some((members, every_task_bound))
}
