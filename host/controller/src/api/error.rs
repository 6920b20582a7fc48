//! The one error type of the HTTP API: every failure becomes a status code and a JSON
//! body `{"error": "..."}` with a message a person can act on, including malformed
//! bodies, wrong content types, oversized uploads and unknown routes.

use axum::Json;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::live::{CatalogError, LiveError};
use switchyard_control::AckRefused;
use switchyard_registry::Error as RegistryError;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ErrorBody {
    /// What went wrong and what would be accepted.
    pub error: String,
}

/// An API failure: a status and a message.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// 401: missing or wrong bearer token.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}

impl From<LiveError> for ApiError {
    fn from(error: LiveError) -> Self {
        let status = match &error {
            LiveError::Catalog(CatalogError::Unknown { .. }) => StatusCode::NOT_FOUND,
            LiveError::Catalog(CatalogError::Reserved { .. }) => StatusCode::CONFLICT,
            LiveError::Catalog(CatalogError::Load(_) | CatalogError::Configure(_)) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            LiveError::Experiment(_) => StatusCode::BAD_REQUEST,
            LiveError::NoExperiment | LiveError::UnknownJob(_) => StatusCode::NOT_FOUND,
            LiveError::BadLossValue(_) => StatusCode::UNPROCESSABLE_ENTITY,
            LiveError::Checkpoint(AckRefused::BadPath { .. } | AckRefused::BadTask { .. }) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            LiveError::Checkpoint(_) => StatusCode::CONFLICT,
            LiveError::Stopped | LiveError::NotLeader { .. } => StatusCode::SERVICE_UNAVAILABLE,
            LiveError::OwnedBySettings { .. } | LiveError::ExperimentRunning { .. } => {
                StatusCode::CONFLICT
            }
            LiveError::NotDurable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            LiveError::State(_) | LiveError::Recording(_) => StatusCode::INTERNAL_SERVER_ERROR,
            LiveError::Registry(error) => registry_status(error),
        };
        Self::new(status, error.to_string())
    }
}

/// The status of a policy reference the controller could not pull: the request's fault
/// (a reference that does not parse, names nothing, or names something that is not a
/// usable component) or the registry's (unreachable, refusing the controller's login,
/// failing).
fn registry_status(error: &RegistryError) -> StatusCode {
    match error {
        RegistryError::Reference(_) | RegistryError::PushToDigest { .. } => StatusCode::BAD_REQUEST,
        RegistryError::NotFound { .. }
        | RegistryError::NotComponent { .. }
        | RegistryError::DigestMismatch { .. }
        | RegistryError::SizeMismatch { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        RegistryError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        RegistryError::Unreachable { .. }
        | RegistryError::AccessDenied { .. }
        | RegistryError::Registry { .. } => StatusCode::BAD_GATEWAY,
        RegistryError::Credentials(_) | RegistryError::Setup(_) => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let hint = match &rejection {
            JsonRejection::MissingJsonContentType(_) => {
                " (send the body with `Content-Type: application/json`)"
            }
            _ => "",
        };
        Self::new(
            rejection.status(),
            format!("{}{hint}", rejection.body_text()),
        )
    }
}

/// Maps a body that could not be read; `limit` is the upload limit in bytes, named in
/// the 413 message.
pub(super) fn body_rejection(rejection: BytesRejection, limit: usize) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the upload is larger than the {limit}-byte limit; a Rust policy is a few \
                 hundred KiB, a Python one about 18 MB (raise the limit with --max-upload-mib)"
            ),
        );
    }
    ApiError::new(rejection.status(), rejection.body_text())
}
