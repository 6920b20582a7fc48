//! Read-mostly endpoints: health, readiness, metrics, status, decisions, the snapshot
//! summary, job labels; and the loss-sample push, which feeds the job's loss series.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::state::ApiState;
use crate::live::LoadFailure;
use switchyard_control::{DecisionRecord, PolicyFromRound};
use switchyard_control::{LossAck, SnapshotSummary};

#[utoipa::path(get, path = "/healthz", tag = "health",
    responses(
        (status = 200, description = "The decision thread makes progress"),
        (status = 503, description = "The decision thread has stalled", body = ErrorBody)))]
pub(super) async fn healthz(State(state): State<ApiState>) -> Result<&'static str, ApiError> {
    match state.controller.is_alive() {
        Ok(()) => Ok("ok\n"),
        Err(since) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the decision thread has not looked at the cluster for {} s",
                since.as_secs()
            ),
        )),
    }
}

#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "The decision thread runs"),
        (status = 503, description = "Starting or stopping", body = ErrorBody)))]
pub(super) async fn readyz(State(state): State<ApiState>) -> Result<&'static str, ApiError> {
    if state.controller.is_ready() {
        Ok("ready\n")
    } else {
        Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the decision thread is starting or stopping",
        ))
    }
}

#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
pub(super) async fn metrics(State(state): State<ApiState>) -> impl IntoResponse {
    let metrics = state.controller.metrics();
    metrics.observe_leader(state.controller.leader().is_leading());
    let policies = state.controller.catalog().list();
    metrics.observe_policies(policies.iter().map(|p| {
        (
            p.name.as_str(),
            p.version.as_str(),
            p.digest.as_str(),
            p.source.as_str(),
        )
    }));
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
}

/// The controller at a glance.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Status {
    /// The active policy.
    pub active: String,
    /// Where the active policy came from (`builtin:NAME`, `upload`, a file, or for a
    /// policy from a registry its reference pinned to the manifest digest).
    pub active_source: Option<String>,
    /// The active policy's `sha256:` content digest.
    pub active_digest: Option<String>,
    /// Rounds run.
    pub rounds: u64,
    /// Rounds decided by the fallback because the active policy failed.
    pub failures: u64,
    /// `idle` or `time-limit` once nothing more happens on its own.
    pub ended: Option<String>,
    /// The cluster now.
    pub snapshot: SnapshotSummary,
    /// Whether an experiment runs.
    pub experiment_running: bool,
    /// Components that were refused (uploads, files in the policies directory).
    pub load_errors: Vec<LoadFailure>,
    /// This replica's identity.
    pub identity: String,
    /// Whether this replica leads (decides, acts and takes changes); a follower answers
    /// reads only.
    pub leading: bool,
    /// The leading replica, when known.
    pub leader: Option<String>,
    /// Policy state writes that failed so far.
    pub state_save_failures: u64,
    /// Why policy state cannot be persisted, while that lasts: a restart would lose it.
    pub state_error: Option<String>,
    /// What the policies directory's settings file decides, when one is followed: the
    /// API refuses to change those (409, naming the file), so a client need not offer to.
    pub owned_by_settings: Option<SettingsOwned>,
}

/// What a followed settings file decides, which the API refuses to change.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SettingsOwned {
    /// The settings file.
    pub file: String,
    /// It names the active policy: activating another is refused.
    pub active: bool,
    /// It gives these policies' parameters: setting theirs is refused.
    pub parameters: Vec<String>,
    /// It has an `experiment` section: starting or stopping one is refused.
    pub experiment: bool,
}

#[utoipa::path(get, path = "/v1/status", tag = "observe",
    responses((status = 200, description = "Active policy, rounds, cluster summary, load errors", body = Status)))]
pub(super) async fn status(State(state): State<ApiState>) -> Json<Status> {
    let controller = &state.controller;
    let load_errors = controller.catalog().failures();
    let owned_by_settings = controller.owned_by_settings().map(|owned| SettingsOwned {
        file: owned.file,
        active: owned.active,
        parameters: owned.parameters.into_iter().collect(),
        experiment: owned.experiment,
    });
    let leader = controller.leader();
    let (identity, leading, holder) = (
        leader.identity().to_string(),
        leader.is_leading(),
        leader.holder(),
    );
    let active = controller.with_status(|s| s.active.clone());
    let entry = controller.catalog().get(&active).ok();
    Json(controller.with_status(|s| Status {
        active: s.active.clone(),
        active_source: entry.as_ref().map(|e| e.source.clone()),
        active_digest: entry.as_ref().map(|e| e.slot.module.digest().to_hex()),
        rounds: s.rounds,
        failures: s.failures,
        ended: s.ended.and_then(|e| {
            serde_json::to_value(e)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
        }),
        snapshot: s.snapshot.clone(),
        experiment_running: s.experiment.is_some(),
        load_errors,
        identity,
        leading,
        leader: holder,
        state_save_failures: s.state_save_failures,
        state_error: s.state_error.clone(),
        owned_by_settings,
    }))
}

/// Which decisions to return.
#[derive(Debug, Deserialize, IntoParams)]
pub(super) struct DecisionsQuery {
    /// Only rounds numbered above this one, oldest first (`-1` for the oldest kept; page
    /// forward by passing the last round of the previous page); without it, the most
    /// recent ones.
    pub since: Option<i64>,
    /// At most this many (1 to 1000, default 100).
    pub limit: Option<usize>,
}

/// The most records one page returns.
const DECISIONS_PAGE_MAX: usize = 1000;
/// The most bytes one page carries (by [`DecisionRecord::footprint`]); a page holds at
/// least one record.
const DECISIONS_PAGE_BYTES: usize = 4 << 20;

/// Recent decisions.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Decisions {
    /// Rounds run so far.
    pub rounds: u64,
    /// Decision records, oldest first: round, time, triggers, deciding policy, failure,
    /// accepted actions with reasons, rejected actions with the validator's reasons,
    /// labels, and the experiment's side when one runs.
    #[schema(value_type = Vec<Object>)]
    pub decisions: Vec<DecisionRecord>,
    /// Which component each policy name in `decisions` meant: per entry the name,
    /// `version`, `digest` (the SHA-256 of its bytes), `reference` (pinned, for a policy
    /// from a registry) and `from_round`, the first round it decided under that name
    /// (a name means the entry with the latest `from_round` not after the round). Named
    /// here once rather than in every record.
    #[schema(value_type = Vec<Object>)]
    pub policies: Vec<PolicyFromRound>,
    /// More records after these match the query (ask again with `since` set to the last
    /// round here).
    pub more: bool,
}

#[utoipa::path(get, path = "/v1/decisions", tag = "observe",
    params(DecisionsQuery),
    responses(
        (status = 200, description = "Recent decisions with reasons, a page at a time", body = Decisions),
        (status = 400, description = "Bad query", body = ErrorBody)))]
pub(super) async fn decisions(
    State(state): State<ApiState>,
    query: Result<Query<DecisionsQuery>, QueryRejection>,
) -> Result<Json<Decisions>, ApiError> {
    let Query(query) = query.map_err(|r| ApiError::new(r.status(), r.body_text()))?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=DECISIONS_PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("limit must be between 1 and {DECISIONS_PAGE_MAX}, got {limit}"),
        ));
    }
    Ok(Json(state.controller.with_status(|s| {
        let (decisions, more) = match query.since {
            Some(since) => page(
                s.decisions
                    .iter()
                    .filter(|d| i128::from(d.round) > i128::from(since)),
                limit,
            ),
            None => {
                let (mut newest, more) = page(s.decisions.iter().rev(), limit);
                newest.reverse();
                (newest, more)
            }
        };
        let policies = s.deciders.naming(&decisions);
        Decisions {
            rounds: s.rounds,
            decisions,
            policies,
            more,
        }
    })))
}

/// Takes records from `records` until `limit` of them or the page's bytes are reached
/// (at least one); says whether any were left.
fn page<'a>(
    mut records: impl Iterator<Item = &'a DecisionRecord>,
    limit: usize,
) -> (Vec<DecisionRecord>, bool) {
    let mut out = Vec::new();
    let mut bytes = 0;
    for record in records.by_ref() {
        let size = record.footprint();
        if !out.is_empty() && (out.len() == limit || bytes + size > DECISIONS_PAGE_BYTES) {
            return (out, true);
        }
        bytes += size;
        out.push(record.clone());
    }
    (out, false)
}

#[utoipa::path(get, path = "/v1/snapshot", tag = "observe",
    responses((status = 200, description = "Nodes, jobs by phase, capacity and requests", body = SnapshotSummary)))]
pub(super) async fn snapshot(State(state): State<ApiState>) -> Json<SnapshotSummary> {
    Json(state.controller.with_status(|s| s.snapshot.clone()))
}

#[utoipa::path(get, path = "/v1/jobs/labels", tag = "observe",
    responses((status = 200, description = "Per active job, the labels policies put on it", body = BTreeMap<String, BTreeMap<String, String>>)))]
pub(super) async fn labels(
    State(state): State<ApiState>,
) -> Json<BTreeMap<String, BTreeMap<String, String>>> {
    Json(state.controller.with_status(|s| s.labels.clone()))
}

/// One evaluation of a job's training objective.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LossBody {
    /// Training step the value belongs to.
    pub step: u64,
    /// The evaluation value.
    pub value: f64,
}

#[utoipa::path(post, path = "/v1/jobs/{id}/loss", tag = "observe",
    params(("id" = String, Path, description = "An active job's id (in a cluster `namespace/name`, the slash written `%2F`)")),
    request_body = LossBody,
    responses(
        (status = 202, description = "Kept in the job's loss series (`accepted`), or checked and ignored with a note saying why: a simulated job with a loss curve, a TrainingJob without `progress.push: true`, a step already in the series", body = LossAck),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong bearer token", body = ErrorBody),
        (status = 404, description = "No such active job", body = ErrorBody),
        (status = 422, description = "Not a finite value", body = ErrorBody),
        (status = 408, description = "The body did not arrive whole within `--body-read-timeout` (the message names the flag)", body = ErrorBody),
        (status = 503, description = "This replica is not the leader", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn push_loss(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Result<Json<LossBody>, JsonRejection>,
) -> Result<(StatusCode, Json<LossAck>), ApiError> {
    let Json(body) = body?;
    let ack = state
        .controller
        .push_loss(&id, body.step, body.value)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(ack)))
}
