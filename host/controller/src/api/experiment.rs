//! Experiment endpoints: start, inspect and stop an A/B comparison.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::state::ApiState;
use crate::live::ExperimentRequest;
use switchyard_control::{ExperimentMode, ExperimentReport, JobAssignment, LabelSelector};

/// An experiment to start. Arm A is always the active policy.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExperimentBody {
    /// `shadow` (B decides on A's snapshots, never applied) or `split` (jobs divided
    /// between the arms).
    pub mode: ModeName,
    /// Arm B's policy (a loaded policy's name).
    pub policy_b: String,
    /// Split: share of jobs assigned to B by a hash of the job id, in [0, 1].
    pub ratio: Option<f64>,
    /// Split by `ratio`: `hash` (the default; each job by the hash alone) or `balanced`
    /// (the hash held to the ratio as jobs arrive: 20 jobs at 0.5 are 10 and 10).
    pub assign: Option<String>,
    /// Split: jobs carrying this label (`key=value`) go to B instead of a hash split.
    pub job_selector: Option<String>,
    /// Split: nodes carrying this label (`key=value`) belong to B, the others to A.
    pub node_selector: Option<String>,
    /// Replace a running experiment (default false: starting one while another runs is
    /// refused with 409, so its figures are not lost by accident).
    pub replace: Option<bool>,
}

/// The two kinds of experiment.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum ModeName {
    /// Compare without applying B.
    Shadow,
    /// Divide the jobs.
    Split,
}

impl ExperimentBody {
    fn into_request(self) -> Result<ExperimentRequest, ApiError> {
        let bad = |m: String| ApiError::new(StatusCode::BAD_REQUEST, m);
        let mode = match self.mode {
            ModeName::Shadow => {
                if self.ratio.is_some()
                    || self.assign.is_some()
                    || self.job_selector.is_some()
                    || self.node_selector.is_some()
                {
                    return Err(bad(
                        "ratio, assign, job_selector and node_selector belong to a split experiment, not a shadow one".into(),
                    ));
                }
                ExperimentMode::Shadow
            }
            ModeName::Split => {
                let jobs = match (self.ratio, &self.job_selector) {
                    (Some(ratio), None) => {
                        JobAssignment::by_name(self.assign.as_deref().unwrap_or("hash"), ratio)
                            .map_err(|e| bad(e.to_string()))?
                    }
                    (None, Some(_)) if self.assign.is_some() => {
                        return Err(bad(
                            "assign (hash or balanced) goes with ratio; a job_selector split assigns by the label".into(),
                        ));
                    }
                    (None, Some(selector)) => JobAssignment::Label {
                        selector: LabelSelector::parse(selector).map_err(|e| bad(e.to_string()))?,
                    },
                    _ => {
                        return Err(bad(
                            "a split experiment needs exactly one of `ratio` (share of jobs for B) or `job_selector` (key=value)".into(),
                        ));
                    }
                };
                let nodes_b = self
                    .node_selector
                    .as_deref()
                    .map(LabelSelector::parse)
                    .transpose()
                    .map_err(|e| bad(e.to_string()))?;
                ExperimentMode::Split { jobs, nodes_b }
            }
        };
        Ok(ExperimentRequest {
            policy_b: self.policy_b,
            mode,
            replace: self.replace.unwrap_or(false),
        })
    }
}

#[utoipa::path(get, path = "/v1/experiment", tag = "experiments",
    responses(
        (status = 200, description = "The running experiment's figures (shadow: agreement rate and differing decisions; split: per-arm completion, wait, makespan, allocation with job counts)", body = Object),
        (status = 404, description = "No experiment is running", body = ErrorBody)))]
pub(super) async fn get(State(state): State<ApiState>) -> Result<Json<ExperimentReport>, ApiError> {
    state
        .controller
        .with_status(|s| s.experiment.clone())
        .map(Json)
        .ok_or_else(|| {
            ApiError::not_found("no experiment is running; start one with POST /v1/experiment")
        })
}

#[utoipa::path(post, path = "/v1/experiment", tag = "experiments",
    request_body = ExperimentBody,
    responses(
        (status = 201, description = "Started from the next round on", body = Object),
        (status = 400, description = "Malformed or contradictory description", body = ErrorBody),
        (status = 401, description = "Missing or wrong bearer token", body = ErrorBody),
        (status = 503, description = "This replica is not the leader; the message names the leader", body = ErrorBody),
        (status = 409, description = "An experiment is running and `replace` is not true, or the policies directory's settings file decides this (the message names the file)", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 408, description = "The body did not arrive whole within `--body-read-timeout` (the message names the flag)", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn start(
    State(state): State<ApiState>,
    body: Result<Json<ExperimentBody>, JsonRejection>,
) -> Result<(StatusCode, Json<ExperimentReport>), ApiError> {
    let Json(body) = body?;
    let report = state
        .controller
        .start_experiment(body.into_request()?)
        .await?;
    Ok((StatusCode::CREATED, Json(report)))
}

#[utoipa::path(delete, path = "/v1/experiment", tag = "experiments",
    responses(
        (status = 200, description = "Stopped; its final figures", body = Object),
        (status = 401, description = "Missing or wrong bearer token", body = ErrorBody),
        (status = 503, description = "This replica is not the leader; the message names the leader", body = ErrorBody),
        (status = 409, description = "The policies directory's settings file decides this; the message names the file", body = ErrorBody),
        (status = 404, description = "No experiment is running", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn stop(
    State(state): State<ApiState>,
) -> Result<Json<ExperimentReport>, ApiError> {
    Ok(Json(state.controller.stop_experiment().await?))
}
