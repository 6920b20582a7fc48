//! The HTTP API of the live controller (axum): routes, authentication of the mutating
//! ones, a training job's checkpoint request and acknowledgement (`checkpoint`), the upload size limit, what one client may hold (`limits`: body deadline,
//! uploads at once), the operator's console (`console`: a page and its assets, embedded
//! in the binary), serving within the connection limits with a shutdown signal
//! (`serve`), and the OpenAPI document
//! generated from the handlers' annotations (`switchyard openapi` writes it to
//! `docs/openapi.json`). Handlers translate between HTTP and [`Controller`]; they decide
//! nothing themselves.

mod auth;
mod checkpoint;
mod cluster;
mod console;
mod error;
mod experiment;
mod limits;
mod observe;
mod policies;
mod serve;
mod state;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Router, middleware};
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};

pub use auth::{MAX_TOKEN_FILE_BYTES, Token, TokenError, read_token_file};
pub use error::ApiError;
pub use limits::HttpLimits;
pub use serve::serve;

use crate::live::Controller;
use state::ApiState;

/// Default upload limit of a policy component: room for a Python policy built with
/// componentize-py carries the interpreter, tens of MB; Rust policies are a few
/// hundred KiB.
pub const DEFAULT_MAX_UPLOAD_BYTES: usize = 32 << 20;

/// The API's settings.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// The bearer token of mutating requests; none disables them (401).
    pub token: Option<Token>,
    /// Largest accepted upload.
    pub max_upload_bytes: usize,
    /// What one client may hold: connections, timeouts, uploads at once.
    pub limits: HttpLimits,
}

impl Default for ApiConfig {
    /// No token (changes refused), the default upload limit and [`HttpLimits`].
    fn default() -> Self {
        Self {
            token: None,
            max_upload_bytes: DEFAULT_MAX_UPLOAD_BYTES,
            limits: HttpLimits::default(),
        }
    }
}

/// The router: read endpoints and the console open on every replica, mutating ones
/// behind the bearer token and answered only by the leader (a follower refuses them with
/// 503 and names the leader). Every body must arrive within the body-read timeout, and
/// uploads past the number received at once are refused (503, `Retry-After`) before
/// their body is read.
pub fn router(controller: Controller, config: ApiConfig) -> Router {
    let uploads =
        limits::UploadSlots::new(config.limits.max_concurrent_uploads, controller.clone());
    let deadline = limits::BodyDeadline {
        timeout: config.limits.body_read_timeout,
        controller: controller.clone(),
    };
    let state = ApiState {
        controller,
        max_upload_bytes: config.max_upload_bytes,
    };
    let mutating = Router::new()
        .route(
            "/v1/policies",
            post(policies::upload)
                .layer(DefaultBodyLimit::max(config.max_upload_bytes))
                .layer(middleware::from_fn_with_state(
                    uploads,
                    limits::limit_uploads,
                )),
        )
        .route("/v1/policies/{name}/activate", post(policies::activate))
        .route(
            "/v1/policies/{name}/parameters",
            put(policies::set_parameters),
        )
        .route(
            "/v1/experiment",
            post(experiment::start).delete(experiment::stop),
        )
        .route("/v1/jobs/{id}/loss", post(observe::push_loss))
        .route("/v1/jobs/{id}/checkpoint", post(checkpoint::acknowledge))
        // Layers run outside-in: the token is checked first, so a request without it
        // is a 401 on every replica; then a follower refuses the change (503).
        .route_layer(middleware::from_fn_with_state(
            state.controller.clone(),
            auth::require_leader,
        ))
        .route_layer(middleware::from_fn_with_state(
            config.token,
            auth::require_token,
        ));
    let open = Router::new()
        .route("/healthz", get(observe::healthz))
        .route("/readyz", get(observe::readyz))
        .route("/metrics", get(observe::metrics))
        .route("/v1/status", get(observe::status))
        .route("/v1/policies", get(policies::list))
        .route("/v1/experiment", get(experiment::get))
        .route("/v1/decisions", get(observe::decisions))
        .route("/v1/snapshot", get(observe::snapshot))
        .route("/v1/jobs/labels", get(observe::labels))
        .route("/v1/jobs", get(cluster::jobs))
        .route("/v1/jobs/{id}/checkpoint", get(checkpoint::get))
        .route("/v1/utilisation", get(cluster::utilisation))
        .route("/", get(console::to_console))
        .route("/console", get(console::to_console))
        .route(console::PREFIX, get(console::index))
        .route("/console/{*file}", get(console::asset));
    open.merge(mutating)
        .fallback(|| async {
            ApiError::not_found("no such endpoint; the API is described in docs/openapi.json")
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this endpoint does not take that method; see docs/openapi.json",
            )
        })
        .layer(middleware::from_fn_with_state(
            deadline,
            limits::bound_body_read,
        ))
        .with_state(state)
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "switchyard",
        description = "Live policy management of the switchyard controller: load, activate and configure scheduling policies, compare two in an experiment, and watch decisions. Mutating endpoints need `Authorization: Bearer <token>`; every error is `{\"error\": \"...\"}`."
    ),
    paths(
        observe::healthz,
        observe::readyz,
        observe::metrics,
        observe::status,
        policies::list,
        policies::upload,
        policies::activate,
        policies::set_parameters,
        experiment::get,
        experiment::start,
        experiment::stop,
        observe::decisions,
        observe::snapshot,
        observe::labels,
        cluster::jobs,
        cluster::utilisation,
        observe::push_loss,
        checkpoint::get,
        checkpoint::acknowledge,
    ),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The OpenAPI document of the API, pretty-printed JSON with a final newline (what
/// `docs/openapi.json` holds).
pub fn openapi_json() -> String {
    let mut doc = ApiDoc::openapi();
    // The crate version would make the committed file drift on every release bump.
    doc.info.version = "v1".into();
    let mut text = doc
        .to_pretty_json()
        .expect("the OpenAPI document serialises");
    text.push('\n');
    text
}
