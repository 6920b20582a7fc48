//! Marks the replica that leads with a label on its own pod, so that the Service can
//! select the leader alone: `kubectl port-forward svc/switchyard` and every in-cluster
//! client then reach the replica that can take changes, instead of a follower that
//! answers them with 503.
//!
//! The label follows the process, not the Lease. A process starts by taking the label
//! off its own pod (a container restarted after leading would otherwise keep it) and
//! sets it only while its own grant says it leads; a replica that loses the lead takes
//! it off again before it exits. Between a lost lead and that removal, two pods may
//! carry the label for a moment: the old one answers changes with 503 naming the new
//! leader, as it did before this existed. It owns that one label; it must not touch
//! anything else on the pod.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use switchyard_control::Leader;

use crate::{Error, FIELD_MANAGER, Result};

/// The label the leader's pod carries, with the value [`LEADER_LABEL_VALUE`]; the
/// Service in `deploy/` selects on it.
pub const LEADER_LABEL: &str = "switchyard.dev/leader";

/// The value of [`LEADER_LABEL`] on the leader's pod.
pub const LEADER_LABEL_VALUE: &str = "true";

/// One replica's label on its own pod.
pub struct LeaderLabel {
    pods: Api<Pod>,
    pod: String,
}

impl LeaderLabel {
    /// The label on pod `pod` (this replica's own, from the downward API) in `pods`.
    pub fn new(pods: Api<Pod>, pod: &str) -> Self {
        Self {
            pods,
            pod: pod.to_string(),
        }
    }

    /// Sets the label (`leading`) or removes it, with one merge patch.
    pub async fn mark(&self, leading: bool) -> Result<()> {
        let value = if leading {
            json!(LEADER_LABEL_VALUE)
        } else {
            serde_json::Value::Null
        };
        let patch = json!({"metadata": {"labels": {LEADER_LABEL: value}}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.pods
            .patch(&self.pod, &params, &Patch::Merge(&patch))
            .await
            .map_err(Error::api(format!(
                "labelling pod {} with {LEADER_LABEL}={leading}",
                self.pod
            )))?;
        Ok(())
    }
}

/// Keeps the label in step with `leader`, checking every `every`: removes it at once
/// (this process does not lead yet), then patches whenever the grant changes. A patch
/// that fails is tried again at the next check, so the label catches up once the API
/// server answers. Runs until its task is aborted.
pub async fn keep_marked(label: LeaderLabel, leader: Arc<Leader>, every: Duration) {
    let mut marked: Option<bool> = None;
    loop {
        let leading = leader.is_leading();
        if marked != Some(leading) {
            match tokio::time::timeout(every.max(Duration::from_secs(1)), label.mark(leading)).await
            {
                Ok(Ok(())) => {
                    tracing::info!(leading, pod = label.pod, "leader label updated");
                    marked = Some(leading);
                }
                Ok(Err(error)) => tracing::warn!(%error, "updating the leader label"),
                Err(_) => tracing::warn!(pod = label.pod, "the leader label patch did not answer"),
            }
        }
        tokio::time::sleep(every).await;
    }
}
