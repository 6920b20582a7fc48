//! The job's status: read afresh and written back guarded by its resourceVersion (a
//! write that races another is read and applied again), merge patches for the fields
//! this controller alone writes, conditions, the policy's labels, and the placements a
//! lost write left out, written from the pods until the write lands.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::actor::{Actor, PODS_SCHEDULED_CONDITION, rfc3339, status_of};
use crate::crd::{Condition, Phase, Placement, TrainingJob, TrainingJobStatus};
use crate::pods::{node_of, placed_node, task_of};
use crate::retry::{self, Cut};
use crate::{Error, FIELD_MANAGER, Result};

impl Actor {
    /// Replaces the policy's labels on `job` (no write when they are unchanged): one
    /// merge patch, removed keys as nulls.
    pub async fn set_policy_labels(
        &self,
        job: &TrainingJob,
        labels: BTreeMap<String, String>,
    ) -> Result<()> {
        let before = status_of(job).policy_labels;
        if before == labels {
            return Ok(());
        }
        let mut patch = serde_json::Map::new();
        for key in before.keys().filter(|k| !labels.contains_key(*k)) {
            patch.insert(key.clone(), serde_json::Value::Null);
        }
        for (key, value) in &labels {
            patch.insert(key.clone(), json!(value));
        }
        self.patch_status(job, json!({"policyLabels": patch})).await
    }

    /// Merges `patch` into `job`'s status: one request, no read first. For fields this
    /// controller alone writes and that need no check against what is there (the loss
    /// series, the policy's labels); a restart's steps read and check first
    /// ([`Actor::update_status_if`]).
    pub async fn patch_status(&self, job: &TrainingJob, patch: serde_json::Value) -> Result<()> {
        let api = self.jobs(job);
        let name = job.name_any();
        let mut status = patch;
        if let (Some(fields), Some(generation)) = (status.as_object_mut(), job.metadata.generation)
        {
            fields.insert("observedGeneration".into(), json!(generation));
        }
        let body = Patch::Merge(json!({ "status": status }));
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        retry::with_backoff("status patch", || {
            self.guard.call(api.patch_status(&name, &params, &body))
        })
        .await
        .map(|_| ())
        .map_err(Error::api(format!(
            "patching the status of TrainingJob {name}"
        )))
    }

    /// Reads the job afresh, applies `change` to its status and writes it with the
    /// resourceVersion it read; on a 409 conflict, reads and applies again.
    pub async fn update_status(
        &self,
        job: &TrainingJob,
        change: impl Fn(&mut TrainingJobStatus),
    ) -> Result<TrainingJob> {
        self.update_status_if(job, |_| Ok(()), change).await
    }

    /// Like [`Actor::update_status`], but writes only when `check` accepts the status
    /// read afresh; otherwise returns [`Error::Stale`] with its message and writes
    /// nothing. This is what keeps a step that must happen once from happening twice
    /// when the cache it was decided on is behind. When this actor is fenced by a Lease
    /// term ([`Actor::with_term`]), the status written carries it, and a status that
    /// carries a later term (a newer leader wrote it) is not written at all: the call
    /// ends as [`Error::NotLeading`], a replica that lost its lead without noticing (a
    /// pause longer than its grant) stopped by the API server's resourceVersion check.
    pub async fn update_status_if(
        &self,
        job: &TrainingJob,
        check: impl Fn(&TrainingJobStatus) -> Result<(), String>,
        change: impl Fn(&mut TrainingJobStatus),
    ) -> Result<TrainingJob> {
        let api = self.jobs(job);
        let name = job.name_any();
        let refused: Mutex<Option<String>> = Mutex::new(None);
        let outcome = retry::with_backoff("status update", || async {
            let mut fresh = self.guard.call(api.get_status(&name)).await?;
            let mut status = fresh.status.clone().unwrap_or_default();
            let term = self.guard.term();
            if let (Some(ours), Some(theirs)) = (term, status.leader_term)
                && theirs > ours
            {
                return Err(kube::Error::Service(Box::new(Cut::NotLeading)));
            }
            if let Err(message) = check(&status) {
                *refused.lock().expect("refusal lock") = Some(message);
                return Ok(fresh);
            }
            change(&mut status);
            if term.is_some() {
                status.leader_term = term;
            }
            status.observed_generation = fresh.metadata.generation;
            fresh.status = Some(status);
            self.guard
                .call(api.replace_status(
                    &name,
                    &PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PostParams::default()
                    },
                    &fresh,
                ))
                .await
        })
        .await
        .map_err(Error::api(format!(
            "updating the status of TrainingJob {name}"
        )))?;
        match refused.into_inner().expect("refusal lock") {
            Some(message) => Err(Error::Stale { job: name, message }),
            None => Ok(outcome),
        }
    }

    /// Brings the status in step with `job`'s pods of its current generation
    /// (`released`: each released to the scheduler, or bound): the placements a lost
    /// write left out are written (the job runs), and a refusal is cleared once every
    /// task's pod is bound, with `PodsScheduled=True`. Called on every pass that finds
    /// the status behind, so a write lost once lands on a later pass.
    pub(crate) async fn record_placements(
        &self,
        job: &TrainingJob,
        released: &[&Pod],
        every_task_bound: bool,
        now: Timestamp,
    ) -> Result<()> {
        let found: Vec<Placement> = released
            .iter()
            .filter_map(|p| {
                Some(Placement {
                    task: task_of(p)?.to_string(),
                    pod: p.name_any(),
                    node: placed_node(p)?.to_string(),
                })
            })
            .collect();
        let generation = status_of(job).generation;
        let bound: Vec<String> = released
            .iter()
            .filter_map(|p| Some(format!("{} on {}", p.name_any(), node_of(p)?)))
            .collect();
        self.update_status_if(
            job,
            |fresh| {
                if fresh.restart.is_some() || fresh.generation != generation {
                    return Err("it restarted since".into());
                }
                Ok(())
            },
            |s| {
                for p in &found {
                    if !s.placements.contains(p) {
                        s.placements.retain(|q| q.task != p.task);
                        s.placements.push(p.clone());
                    }
                }
                if !found.is_empty() && s.phase != Some(Phase::Running) {
                    s.phase = Some(Phase::Running);
                }
                if every_task_bound && s.refusal.take().is_some() {
                    let message = format!("bound: {}", bound.join(", "));
                    set_condition(s, PODS_SCHEDULED_CONDITION, "True", "Bound", &message);
                }
            },
        )
        .await?;
        tracing::info!(
            job = job.name_any(),
            at = rfc3339(now),
            "status brought in step with the pods"
        );
        Ok(())
    }
}

/// Sets (or replaces) the condition of type `type_`, keeping its transition time when
/// the status does not change.
pub(crate) fn set_condition(
    status: &mut TrainingJobStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
) {
    let now = rfc3339(Timestamp::now());
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = now;
            }
            c.status = value.into();
            c.reason = reason.into();
            c.message = message.into();
        }
        None => status.conditions.push(Condition {
            type_: type_.into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: now,
        }),
    }
}
