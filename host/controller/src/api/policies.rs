//! Policy endpoints: list what is loaded, upload a component or name one by registry
//! reference, activate a policy, set its parameters.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{Path, State};
use axum::http::header::{CONNECTION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse as _, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody, body_rejection};
use super::state::ApiState;
use crate::live::policy_info;
use crate::live::{Applied, LoadFailure, Persistence, PolicyInfo};
use switchyard_core::Settings;

/// Loaded policies, the active one and standing load errors.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PolicyList {
    /// The active policy's name.
    pub active: String,
    /// Every loaded policy.
    pub policies: Vec<PolicyInfo>,
    /// Components that were refused (uploads, files in the policies directory).
    pub load_errors: Vec<LoadFailure>,
}

/// A policy whose parameters changed.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PolicyChanged {
    /// The policy as loaded now.
    pub policy: PolicyInfo,
    /// Set when the change applies to the active policy: from which round.
    pub applied: Option<Applied>,
}

/// A policy accepted by an upload.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PolicyUploaded {
    /// The policy as loaded now.
    pub policy: PolicyInfo,
    /// Set when it replaced the active policy: from which round the new version decides.
    pub applied: Option<Applied>,
    /// Whether a restarted controller (or the next leader) will have it.
    pub persistence: Persistence,
}

/// A policy named by registry reference instead of sent whole.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyReference {
    /// `oci://REGISTRY/REPOSITORY:TAG`, `oci://REGISTRY/REPOSITORY@sha256:DIGEST`, or both;
    /// a tag is resolved once, and the policy is listed and kept under the reference
    /// pinned to that digest.
    #[schema(example = "oci://registry.example.com/team/fair:1.4")]
    pub reference: String,
}

#[utoipa::path(get, path = "/v1/policies", tag = "policies",
    responses((status = 200, description = "Loaded policies", body = PolicyList)))]
pub(super) async fn list(State(state): State<ApiState>) -> Json<PolicyList> {
    let controller = &state.controller;
    Json(PolicyList {
        active: controller.with_status(|s| s.active.clone()),
        policies: controller.catalog().list(),
        load_errors: controller.catalog().failures(),
    })
}

#[utoipa::path(post, path = "/v1/policies", tag = "policies",
    request_body(description = "The policy component (`.wasm`, as `application/wasm` or `application/octet-stream`), or a JSON object naming it by registry reference, pulled by the controller",
        content((Vec<u8> = "application/wasm"), (PolicyReference = "application/json"))),
    responses(
        (status = 201, description = "Compiled, checked and loaded under the name it gives itself; replaces a policy of that name (when active, from the next round). Kept by the state store for the next start when it can be (a policy from a registry as its pinned reference); `persistence` says whether it was", body = PolicyUploaded),
        (status = 400, description = "A JSON body that is not `{\"reference\": \"oci://...\"}`, or a reference that does not parse", body = ErrorBody),
        (status = 401, description = "Missing or wrong bearer token", body = ErrorBody),
        (status = 503, description = "This replica is not the leader (the message names the leader), or `--max-concurrent-uploads` uploads are being received already (refused before the body is read; `Retry-After` says when to send it again)", body = ErrorBody),
        (status = 408, description = "The body did not arrive whole within `--body-read-timeout` (the message names the flag)", body = ErrorBody),
        (status = 409, description = "The upload calls itself by a built-in policy's name", body = ErrorBody),
        (status = 413, description = "Larger than the upload limit (a referenced component is refused before it is downloaded)", body = ErrorBody),
        (status = 415, description = "Not sent as application/wasm, application/octet-stream or application/json", body = ErrorBody),
        (status = 422, description = "Not a valid policy component (the load error says why), or a reference to nothing, to an artifact that is not a component, or to content that does not match its digest", body = ErrorBody),
        (status = 502, description = "The registry could not be reached, refused the controller's login, or failed", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn upload(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    let by_reference = media == "application/json";
    if media != "application/wasm" && media != "application/octet-stream" && !by_reference {
        return Ok(closing(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "upload the component as `Content-Type: application/wasm` (or \
                 application/octet-stream), or name it by reference as `Content-Type: \
                 application/json` `{{\"reference\": \"oci://REGISTRY/REPOSITORY:TAG\"}}`, not \
                 `{content_type}`"
            ),
        )));
    }
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) => return Ok(closing(body_rejection(rejection, state.max_upload_bytes))),
    };
    let uploaded = if by_reference {
        let named: PolicyReference = serde_json::from_slice(&bytes).map_err(|error| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!(
                    "a JSON upload names the policy by reference, \
                     `{{\"reference\": \"oci://REGISTRY/REPOSITORY:TAG\"}}` (or `...@sha256:DIGEST`): {error}"
                ),
            )
        })?;
        state.controller.load_reference(&named.reference).await?
    } else {
        state.controller.upload_policy(bytes.to_vec()).await?
    };
    let entry = &uploaded.entry;
    Ok((
        StatusCode::CREATED,
        Json(PolicyUploaded {
            policy: policy_info(&entry.slot.module, &entry.source, &entry.slot.settings),
            applied: uploaded.applied,
            persistence: uploaded.persistence,
        }),
    )
        .into_response())
}

/// An upload refused before its body was read whole: the rest of the body is still on
/// the connection, so the client must not send its next request on it.
fn closing(error: ApiError) -> Response {
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[utoipa::path(post, path = "/v1/policies/{name}/activate", tag = "policies",
    params(("name" = String, Path, description = "A loaded policy's name")),
    responses(
        (status = 200, description = "The policy decides from round `from_round` on", body = Applied),
        (status = 401, description = "Missing or wrong bearer token", body = ErrorBody),
        (status = 503, description = "This replica is not the leader; the message names the leader", body = ErrorBody),
        (status = 409, description = "The policies directory's settings file decides this; the message names the file", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn activate(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<Applied>, ApiError> {
    Ok(Json(state.controller.activate(&name).await?))
}

#[utoipa::path(put, path = "/v1/policies/{name}/parameters", tag = "policies",
    params(("name" = String, Path, description = "A loaded policy's name")),
    request_body(content = BTreeMap<String, String>, description = "Parameter values by name; omitted ones take their defaults"),
    responses(
        (status = 200, description = "Accepted by the policy's `configure`; the effective values", body = PolicyChanged),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong bearer token", body = ErrorBody),
        (status = 503, description = "This replica is not the leader; the message names the leader", body = ErrorBody),
        (status = 409, description = "The policies directory's settings file decides this; the message names the file", body = ErrorBody),
        (status = 404, description = "No such policy", body = ErrorBody),
        (status = 408, description = "The body did not arrive whole within `--body-read-timeout` (the message names the flag)", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "The policy refused the values (its message says why)", body = ErrorBody)),
    security(("bearer" = [])))]
pub(super) async fn set_parameters(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    body: Result<Json<Settings>, JsonRejection>,
) -> Result<Json<PolicyChanged>, ApiError> {
    let Json(settings) = body?;
    let (entry, applied) = state.controller.set_parameters(&name, &settings).await?;
    Ok(Json(PolicyChanged {
        policy: policy_info(&entry.slot.module, &entry.source, &entry.slot.settings),
        applied,
    }))
}
