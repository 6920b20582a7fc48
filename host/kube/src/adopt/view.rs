//! An adopted job as the policy sees it: one task per live pod, placed where the pod is
//! bound or pinned; its gang placeable only once the owner has made every member (until
//! then the job waits and its gated tasks are not placeable); `Restarting` from the
//! checkpoint request until the evicted pods are gone; its CPU weight and replica
//! bounds as `weight` and `elastic` read them. It builds the view; it must not read the
//! caches or the cluster (the snapshot hands it the job, its eligibility sets and its
//! loss series).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use switchyard_core as model;
use switchyard_core::{JobPhase, TaskPhase};

use super::group::AdoptedJob;
use super::{elastic, weight};
use crate::pods::{held_by_placement_gate, placed_node, pod_requests};
use crate::usage::Usage;
use crate::{CHECKPOINT_ANNOTATION, QUEUE_LABEL};

/// The job label the policy sees on an adopted job: the kind of its owner (`Job`,
/// `JobSet`, `PyTorchJob`).
pub(crate) const OWNER_KIND_LABEL: &str = "switchyard.dev/owner-kind";

impl AdoptedJob {
    /// Whether the controller has asked this job's pods to checkpoint (a preemption
    /// under way, until they are evicted).
    pub(crate) fn checkpoint_asked(&self) -> bool {
        self.members
            .iter()
            .any(|m| m.pod.annotations().contains_key(CHECKPOINT_ANNOTATION))
    }

    /// Whether the owner has made every member of the gang.
    pub(crate) fn complete(&self) -> bool {
        self.members.len() >= self.shape.gang as usize
    }

    /// The job as the policy sees it; `eligible` gives a pod's eligibility set, `loss`
    /// is its series so far.
    pub(crate) fn view(
        &self,
        mut eligible: impl FnMut(&Pod) -> Option<u32>,
        usage: Option<&Usage>,
        loss: Vec<model::LossSample>,
    ) -> model::Job {
        let restarting = self.checkpoint_asked() || self.stopping > 0;
        // A task whose pod is stopping with no new pod yet is still the job's, restarting.
        let stopping = |pod: &Pod| pod.metadata.deletion_timestamp.is_some();
        let complete = self.complete();
        let tasks: Vec<model::Task> = self
            .members
            .iter()
            .chain(&self.stopping_members)
            .map(|m| {
                let pod = &*m.pod;
                let node = placed_node(pod).map(str::to_string);
                let phase = match (&node, restarting || stopping(pod)) {
                    (_, true) => TaskPhase::Restarting,
                    (Some(_), false) => TaskPhase::Running,
                    // The owner has not made every member yet: none is placeable alone.
                    (None, false) if held_by_placement_gate(pod) && complete => TaskPhase::Pending,
                    // Released without a pin, or held by another's gate: not the
                    // policy's to place.
                    (None, false) => TaskPhase::Restarting,
                };
                model::Task {
                    name: m.task.clone(),
                    role: m.role.clone(),
                    node: node.filter(|_| !restarting && !stopping(pod)),
                    phase,
                    requests: pod_requests(pod),
                    cpu_weight: weight::cpu_weight(&self.shape, &m.role, pod),
                    usage: usage.and_then(|u| {
                        u.pods
                            .get(&(pod.namespace().unwrap_or_default(), pod.name_any()))
                            .copied()
                    }),
                    eligible: eligible(pod),
                }
            })
            .collect();
        let phase = if restarting {
            JobPhase::Restarting
        } else if tasks.iter().any(|t| t.phase == TaskPhase::Running) {
            JobPhase::Running
        } else {
            JobPhase::Waiting
        };
        let start = self
            .members
            .iter()
            .filter_map(|m| m.pod.status.as_ref()?.start_time.as_ref())
            .map(|t| t.0.as_millisecond() as f64 / 1000.0)
            .reduce(f64::min);
        let priority = self
            .members
            .iter()
            .filter_map(|m| m.pod.spec.as_ref()?.priority)
            .max()
            .unwrap_or(0);
        let mut labels = BTreeMap::new();
        labels.insert(OWNER_KIND_LABEL.to_string(), self.kind.kind().to_string());
        if let Some(queue) = self
            .members
            .first()
            .and_then(|m| m.pod.labels().get(QUEUE_LABEL).cloned())
        {
            labels.insert(QUEUE_LABEL.to_string(), queue);
        }
        model::Job {
            id: self.id.clone(),
            phase,
            submit_time: self.shape.created,
            start_time: start,
            priority,
            utility: 1.0,
            tasks: tasks.into(),
            replicas: elastic::replicas(&self.shape, self.members.iter().map(|m| m.role.as_str())),
            loss: loss.into(),
            metric_rises: false,
            moves: Arc::from(Vec::new()),
            checkpointable: self.shape.checkpointable,
            labels: Arc::new(labels),
        }
    }
}
