//! What runs on the cluster, job by job and over time: the active jobs a page at a time
//! with their placements and the labels policies put on them, and the ring of
//! allocation samples. Both read what the decision thread published or listed
//! ([`crate::live::views`]); a page is capped in jobs and in nodes per job, so an answer
//! stays small however large the cluster is.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::state::ApiState;
use crate::live::{ChartMark, UtilisationSample};
use switchyard_control::{Arm, LastCheckpoint};
use switchyard_core::{Job, JobPhase, Resources};

/// The most jobs one page returns.
const JOBS_PAGE_MAX: usize = 500;
/// The distinct nodes listed per job; a larger job's spread is told by `tasks` and
/// `placed`.
const NODES_PER_JOB_MAX: usize = 16;

/// Which jobs to return.
#[derive(Debug, Deserialize, IntoParams)]
pub(super) struct JobsQuery {
    /// Only jobs in this phase: `waiting`, `running` or `restarting`.
    pub phase: Option<String>,
    /// Skip this many matching jobs (default 0).
    pub offset: Option<usize>,
    /// At most this many (1 to 500, default 100).
    pub limit: Option<usize>,
}

/// One active job.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct JobView {
    /// Its id.
    pub id: String,
    /// `waiting`, `running` or `restarting`.
    #[schema(value_type = String)]
    pub phase: JobPhase,
    /// Submission time, cluster seconds.
    pub submit_time: f64,
    /// When its first task started.
    pub start_time: Option<f64>,
    /// Its tasks.
    pub tasks: usize,
    /// Of those, tasks bound to a node.
    pub placed: usize,
    /// The distinct nodes its tasks are bound to, at most 16.
    pub nodes: Vec<String>,
    /// What its tasks request together.
    pub requests: Resources,
    /// Labels it was submitted with.
    pub labels: BTreeMap<String, String>,
    /// Labels policies put on it (SpeCon's `category`, say).
    pub policy_labels: BTreeMap<String, String>,
    /// The policy that set `policy_labels` (absent while it has none).
    pub labels_by: Option<String>,
    /// During a split experiment, the arm deciding for it: `a` (the active policy) or
    /// `b`; absent otherwise.
    #[schema(value_type = Option<String>)]
    pub arm: Option<Arm>,
    /// How its last checkpoint ended (absent before its first): `acknowledged` or
    /// `timed_out`, the seconds it took, where it is, and when it ended (cluster
    /// seconds).
    pub last_checkpoint: Option<LastCheckpoint>,
}

impl JobView {
    fn of(
        job: &Job,
        policy_labels: Option<&BTreeMap<String, String>>,
        labels_by: Option<&String>,
        arm: Option<Arm>,
        last_checkpoint: Option<&LastCheckpoint>,
    ) -> Self {
        let mut nodes: Vec<String> = Vec::new();
        let mut requests = Resources::default();
        for task in job.tasks.iter() {
            requests = requests.plus(&task.requests);
            if let Some(node) = &task.node
                && nodes.len() < NODES_PER_JOB_MAX
                && !nodes.contains(node)
            {
                nodes.push(node.clone());
            }
        }
        Self {
            id: job.id.clone(),
            phase: job.phase,
            submit_time: job.submit_time,
            start_time: job.start_time,
            tasks: job.tasks.len(),
            placed: job.tasks.iter().filter(|t| t.node.is_some()).count(),
            nodes,
            requests,
            labels: job.labels.as_ref().clone(),
            policy_labels: policy_labels.cloned().unwrap_or_default(),
            labels_by: labels_by.cloned(),
            arm,
            last_checkpoint: last_checkpoint.cloned(),
        }
    }
}

/// A page of active jobs.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct JobsPage {
    /// Cluster time of the listing, seconds.
    pub time: f64,
    /// Active jobs matching the query, on every page.
    pub total: usize,
    /// The matching jobs skipped before this page.
    pub offset: usize,
    /// Matching jobs after these (ask again with `offset` moved on).
    pub more: bool,
    /// The jobs, in submission order.
    pub jobs: Vec<JobView>,
}

fn phase_named(name: &str) -> Result<JobPhase, ApiError> {
    match name {
        "waiting" => Ok(JobPhase::Waiting),
        "running" => Ok(JobPhase::Running),
        "restarting" => Ok(JobPhase::Restarting),
        other => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "phase must be waiting, running or restarting, got `{}`",
                other.escape_debug()
            ),
        )),
    }
}

#[utoipa::path(get, path = "/v1/jobs", tag = "observe",
    params(JobsQuery),
    responses(
        (status = 200, description = "Active jobs a page at a time, with phase, placement, submit and start times, and the labels policies put on them", body = JobsPage),
        (status = 400, description = "Bad query", body = ErrorBody),
        (status = 503, description = "The controller is shutting down", body = ErrorBody)))]
pub(super) async fn jobs(
    State(state): State<ApiState>,
    query: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<Json<JobsPage>, ApiError> {
    let Query(query) = query.map_err(|r| ApiError::new(r.status(), r.body_text()))?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=JOBS_PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("limit must be between 1 and {JOBS_PAGE_MAX}, got {limit}"),
        ));
    }
    let phase = query.phase.as_deref().map(phase_named).transpose()?;
    let offset = query.offset.unwrap_or(0);
    let list = state.controller.jobs().await?;
    let matching = || {
        list.jobs
            .iter()
            .filter(|job| phase.is_none_or(|p| job.phase == p))
    };
    let total = matching().count();
    let jobs = state.controller.with_status(|s| {
        matching()
            .skip(offset)
            .take(limit)
            .map(|job| {
                JobView::of(
                    job,
                    s.labels.get(&job.id),
                    s.labels_by.get(&job.id),
                    list.arms.get(&job.id).copied(),
                    list.checkpoints.get(&job.id),
                )
            })
            .collect::<Vec<_>>()
    });
    Ok(Json(JobsPage {
        time: list.time,
        total,
        offset,
        more: offset.saturating_add(jobs.len()) < total,
        jobs,
    }))
}

/// Which samples to return.
#[derive(Debug, Deserialize, IntoParams)]
pub(super) struct UtilisationQuery {
    /// Only samples taken after this cluster time (the last `time` of the previous
    /// answer); without it, every sample kept.
    pub since: Option<f64>,
}

/// Allocation over time.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Utilisation {
    /// What all nodes offer now.
    pub allocatable: Resources,
    /// Samples, oldest first: the share of CPU and GPUs placed tasks request. The
    /// controller keeps the most recent ones (an hour at one a second by default).
    pub samples: Vec<UtilisationSample>,
    /// Every kept mark (policy swaps, experiment starts and stops), oldest first, whatever
    /// `since` says: there are few, and one made before the reader's last sample must
    /// still reach it.
    pub marks: Vec<ChartMark>,
}

#[utoipa::path(get, path = "/v1/utilisation", tag = "observe",
    params(UtilisationQuery),
    responses(
        (status = 200, description = "The share of the cluster's CPU and GPUs requested by placed tasks, sampled over time", body = Utilisation),
        (status = 400, description = "Bad query", body = ErrorBody)))]
pub(super) async fn utilisation(
    State(state): State<ApiState>,
    query: Result<Query<UtilisationQuery>, QueryRejection>,
) -> Result<Json<Utilisation>, ApiError> {
    let Query(query) = query.map_err(|r| ApiError::new(r.status(), r.body_text()))?;
    Ok(Json(state.controller.with_status(|s| Utilisation {
        allocatable: s.snapshot.allocatable,
        samples: s.utilisation.since(query.since),
        marks: s.utilisation.marks(),
    })))
}
