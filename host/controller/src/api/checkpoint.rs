//! The checkpoint endpoints of a training job: whether a checkpoint is asked of it now
//! (open, polled by training scripts) and a task's acknowledgement that its checkpoint
//! is completely written (behind the token), after which the cluster stops the job at
//! once instead of at its grace period's end. Both go to the decision thread through
//! the controller's one command path; the handlers change nothing themselves.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::state::ApiState;
use switchyard_control::CheckpointAck;

/// The checkpoint asked of a job now.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CheckpointState {
    /// A checkpoint is asked of the job and not yet complete: save one at the next step
    /// boundary and acknowledge it.
    pub requested: bool,
    /// When it was asked, RFC 3339 (the simulator's clock counts from the Unix epoch).
    pub requested_at: Option<String>,
    /// When the job is stopped whether or not every task acknowledged, RFC 3339.
    pub deadline: Option<String>,
    /// Tasks that have acknowledged this checkpoint so far.
    pub acknowledged: Vec<String>,
}

/// A task's word that its checkpoint is completely written.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckpointBody {
    /// Where the checkpoint is (1 to 4096 bytes).
    pub path: String,
    /// The training step it holds.
    #[serde(default)]
    pub step: Option<u64>,
    /// The task acknowledging (`SWITCHYARD_TASK`); absent: every asked task of the job.
    #[serde(default)]
    pub task: Option<String>,
}

/// An acknowledgement taken.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CheckpointTaken {
    /// Always true.
    pub acknowledged: bool,
    /// Seconds from the request to this acknowledgement.
    pub after_seconds: f64,
    /// Asked tasks still to acknowledge; empty: the job is stopped now.
    pub waiting_for: Vec<String>,
}

/// Cluster seconds as RFC 3339.
fn rfc3339(seconds: f64) -> Option<String> {
    let millis = (seconds * 1000.0).round();
    if !millis.is_finite() || millis.abs() > i64::MAX as f64 {
        return None;
    }
    Timestamp::from_millisecond(millis as i64)
        .ok()
        .map(|t| t.to_string())
}

#[utoipa::path(get, path = "/v1/jobs/{id}/checkpoint", tag = "observe",
    params(("id" = String, Path, description = "An active job's id (in a cluster `namespace/name`, the slash written `%2F`)")),
    responses(
        (status = 200, description = "Whether a checkpoint is asked of the job now, since when, until when, and which tasks acknowledged it", body = CheckpointState),
        (status = 404, description = "No such active job", body = ErrorBody),
        (status = 503, description = "The controller is shutting down", body = ErrorBody)))]
pub(super) async fn get(
    State(state): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Json<CheckpointState>, ApiError> {
    let request = state.controller.checkpoint_request(&id).await?;
    Ok(Json(CheckpointState {
        requested: request.requested,
        requested_at: request.requested_at.and_then(rfc3339),
        deadline: request.deadline.and_then(rfc3339),
        acknowledged: request.acknowledged,
    }))
}

#[utoipa::path(post, path = "/v1/jobs/{id}/checkpoint", tag = "observe",
    params(("id" = String, Path, description = "An active job's id (in a cluster `namespace/name`, the slash written `%2F`)")),
    request_body = CheckpointBody,
    responses(
        (status = 202, description = "Taken; once every asked task has acknowledged, the job is stopped at once", body = CheckpointTaken),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong bearer token", body = ErrorBody),
        (status = 404, description = "No such active job", body = ErrorBody),
        (status = 409, description = "No checkpoint is requested of the job now (a late or repeated acknowledgement), the task was not asked, or the job completes its checkpoints by itself", body = ErrorBody),
        (status = 422, description = "An empty or over-long path, or an over-long task name", body = ErrorBody),
        (status = 503, description = "This replica is not the leader", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn acknowledge(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Result<Json<CheckpointBody>, JsonRejection>,
) -> Result<(StatusCode, Json<CheckpointTaken>), ApiError> {
    let Json(body) = body?;
    let ack = CheckpointAck {
        path: body.path,
        step: body.step,
        task: body.task,
    };
    let taken = state.controller.acknowledge_checkpoint(&id, ack).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(CheckpointTaken {
            acknowledged: true,
            after_seconds: taken.after_seconds,
            waiting_for: taken.waiting_for,
        }),
    ))
}
