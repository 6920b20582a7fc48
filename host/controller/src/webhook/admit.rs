//! The answer to one AdmissionReview (`admission.k8s.io/v1`, kube-rs's types): allowed
//! always, with a JSON patch adding the scheduling gate `switchyard.dev/placement` to a
//! pod being created whose `switchyard.dev/queue` label names this controller's queue and
//! which lacks the gate. Anything else (another queue, another kind, another operation, a
//! pod already gated) is allowed unchanged. A body that is not such a review is a 400
//! naming what is wrong. It must not deny a pod, or patch anything but the gates.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, response::IntoResponse};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use kube::core::DynamicObject;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, META_API_VERSION_V1, META_KIND, Operation,
};
use serde_json::{Value, json};
use switchyard_kube::{PLACEMENT_GATE, QUEUE_LABEL};

use crate::api::ApiError;

/// The path the webhook configuration names (`clientConfig.service.path`).
pub const REVIEW_PATH: &str = "/mutate-pods";

/// The largest review read. The API server refuses a request body over 3 MiB (its
/// `--max-request-body-bytes` default), so the review of any pod it accepts, with the
/// review's own fields around it, fits.
pub const MAX_REVIEW_BYTES: usize = 4 << 20;

/// The webhook's routes: [`REVIEW_PATH`] answers reviews for the pods of `queue`;
/// anything else is a 404 naming the path.
pub(super) fn router(queue: String) -> Router {
    Router::new()
        .route(REVIEW_PATH, post(review))
        .fallback(|uri: axum::http::Uri| async move {
            ApiError::not_found(format!(
                "no route {}: the webhook answers POST {REVIEW_PATH}",
                uri.path()
            ))
        })
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(Arc::<str>::from(queue))
}

async fn review(
    State(queue): State<Arc<str>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<impl IntoResponse, ApiError> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the AdmissionReview is larger than {MAX_REVIEW_BYTES} bytes, the most \
                     the webhook reads (the API server's own request limit is 3 MiB)"
                ),
            )
        } else {
            ApiError::new(rejection.status(), rejection.body_text())
        }
    })?;
    let request = parse(&body)?;
    let internal = |error: &dyn std::fmt::Display| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    };
    let mut response = answer(&request, &queue).map_err(|e| internal(&e))?;
    let patch = response.patch.take();
    let mut review = serde_json::to_value(response.into_review()).map_err(|e| internal(&e))?;
    // The API server reads `patch` as base64 (a Go []byte), the form its documentation
    // gives; kube-rs writes the bytes as a list of numbers.
    if let (Some(patch), Some(answer)) = (patch, review["response"].as_object_mut()) {
        answer.insert("patch".into(), BASE64.encode(patch).into());
    }
    Ok(Json(review))
}

/// The request of a v1 AdmissionReview, or a 400 naming the field at fault.
fn parse(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, ApiError> {
    let bad = |message: String| ApiError::new(StatusCode::BAD_REQUEST, message);
    let review: AdmissionReview<DynamicObject> = serde_path_to_error::deserialize(
        &mut serde_json::Deserializer::from_slice(body),
    )
    .map_err(|error| {
        let at = error.path().to_string();
        let at = if at == "." {
            String::new()
        } else {
            format!(" at {at}")
        };
        bad(format!(
            "the body is not an admission.k8s.io/v1 AdmissionReview{at}: {}",
            error.inner()
        ))
    })?;
    if review.types.api_version != META_API_VERSION_V1 || review.types.kind != META_KIND {
        return Err(bad(format!(
            "apiVersion `{}`, kind `{}`: the webhook answers apiVersion {META_API_VERSION_V1}, \
             kind {META_KIND} (admissionReviewVersions: [v1])",
            review.types.api_version, review.types.kind
        )));
    }
    review
        .try_into()
        .map_err(|_| bad("the AdmissionReview has no `request`".to_string()))
}

/// Allowed, with the gate added when `request` creates a pod of `queue` without it.
fn answer(
    request: &AdmissionRequest<DynamicObject>,
    queue: &str,
) -> Result<AdmissionResponse, kube::core::admission::SerializePatchError> {
    let allowed = AdmissionResponse::from(request);
    let is_pod = request.kind.group.is_empty() && request.kind.kind == "Pod";
    let Some(pod) = request.object.as_ref().filter(|_| is_pod) else {
        return Ok(allowed);
    };
    if !matches!(request.operation, Operation::Create) {
        return Ok(allowed);
    }
    let labels = pod.metadata.labels.as_ref();
    if labels.and_then(|l| l.get(QUEUE_LABEL)).map(String::as_str) != Some(queue) {
        return Ok(allowed);
    }
    match gate_patch(&pod.data["spec"]) {
        Gate::Present => Ok(allowed),
        Gate::Add(patch) => allowed.with_patch(patch),
        Gate::Cannot(why) => {
            tracing::warn!(
                pod = request.name,
                namespace = request.namespace,
                why,
                "a pod of the queue is not gated"
            );
            let mut allowed = allowed;
            allowed.warnings = Some(vec![format!(
                "{QUEUE_LABEL}={queue} but {why}: the pod is not gated and switchyard will not place it"
            )]);
            Ok(allowed)
        }
    }
}

/// What the gate needs on a pod's `spec`.
#[derive(Debug, PartialEq)]
enum Gate {
    /// The gate is there: nothing to add.
    Present,
    /// This patch adds it.
    Add(Patch),
    /// It cannot be added, for this reason.
    Cannot(&'static str),
}

fn gate_patch(spec: &Value) -> Gate {
    let Some(spec) = spec.as_object() else {
        return Gate::Cannot("the pod has no spec");
    };
    // The API server refuses a pod with both a node and a gate: a pod bound at creation
    // is left as it is.
    if spec
        .get("nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty())
    {
        return Gate::Cannot("its spec.nodeName is set (a bound pod takes no scheduling gate)");
    }
    let gate = json!({"name": PLACEMENT_GATE});
    let (path, value) = match spec.get("schedulingGates") {
        None | Some(Value::Null) => (
            PointerBuf::from_tokens(["spec", "schedulingGates"]),
            json!([gate]),
        ),
        Some(Value::Array(gates)) => {
            if gates.iter().any(|g| g["name"] == PLACEMENT_GATE) {
                return Gate::Present;
            }
            (
                PointerBuf::from_tokens(["spec", "schedulingGates", "-"]),
                gate,
            )
        }
        Some(_) => return Gate::Cannot("its spec.schedulingGates is not a list"),
    };
    Gate::Add(Patch(vec![PatchOperation::Add(AddOperation {
        path,
        value,
    })]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patched(spec: Value) -> Value {
        match gate_patch(&spec) {
            Gate::Add(patch) => {
                let mut pod = json!({"spec": spec});
                json_patch::patch(&mut pod, &patch).unwrap();
                pod["spec"]["schedulingGates"].clone()
            }
            other => panic!("no patch: {other:?}"),
        }
    }

    #[test]
    fn the_gate_joins_the_gates_a_pod_already_has_and_is_never_added_twice() {
        assert_eq!(
            patched(json!({"containers": []})),
            json!([{"name": PLACEMENT_GATE}])
        );
        assert_eq!(
            patched(json!({"schedulingGates": [{"name": "example.com/other"}]})),
            json!([{"name": "example.com/other"}, {"name": PLACEMENT_GATE}])
        );
        let gated = json!({"schedulingGates": [{"name": PLACEMENT_GATE}]});
        assert_eq!(gate_patch(&gated), Gate::Present);
    }

    #[test]
    fn a_pod_bound_at_creation_or_with_malformed_gates_is_left_alone() {
        assert!(matches!(
            gate_patch(&json!({"nodeName": "n1"})),
            Gate::Cannot(why) if why.contains("spec.nodeName")
        ));
        assert!(matches!(
            gate_patch(&json!({"schedulingGates": "switchyard.dev/placement"})),
            Gate::Cannot(why) if why.contains("not a list")
        ));
        assert!(matches!(gate_patch(&Value::Null), Gate::Cannot(_)));
    }
}
