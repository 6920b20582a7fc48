//! Bearer-token authentication of the mutating endpoints, and their refusal on a replica
//! that does not lead. The token is read from a file (a mounted Secret) at each check, so
//! a Secret created or rotated later takes effect, and compared in constant time; a
//! missing or wrong token is a 401 before the handler runs, so nothing changes. A
//! follower answers a change with 503 naming the leader: only the leader decides, so a
//! change applied elsewhere would not be the one in force.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::header::{AUTHORIZATION, CONNECTION};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use subtle::ConstantTimeEq as _;

use super::error::ApiError;
use crate::live::Controller;

/// A token file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file holds only whitespace.
    #[error("the token file {0} is empty; put the bearer token in it")]
    Empty(PathBuf),
}

/// The bearer token mutating requests must carry: fixed, or read from a file (a
/// mounted Secret) at every check, so a Secret created or rotated after the controller
/// started takes effect without a restart.
#[derive(Clone)]
pub struct Token(Arc<Source>);

enum Source {
    Fixed(Box<[u8]>),
    File(PathBuf),
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A token from its text (surrounding whitespace, such as a trailing newline, is
    /// not part of it).
    pub fn new(text: &str) -> Option<Self> {
        let text = text.trim();
        (!text.is_empty()).then(|| Self(Arc::new(Source::Fixed(text.as_bytes().into()))))
    }

    /// The token in `path`, which must be readable and hold one now; read again at every
    /// check.
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        read(path)?;
        Ok(Self::watching(path))
    }

    /// The token in `path`, read at every check: until the file exists (an optional
    /// Secret not created yet), changes are refused with a message that says so.
    pub fn watching(path: &Path) -> Self {
        Self(Arc::new(Source::File(path.to_path_buf())))
    }

    fn matches(&self, presented: &[u8]) -> Result<bool, TokenError> {
        let current = match self.0.as_ref() {
            Source::Fixed(token) => token.clone(),
            Source::File(path) => read(path)?,
        };
        Ok(bool::from(current.as_ref().ct_eq(presented)))
    }
}

fn read(path: &Path) -> Result<Box<[u8]>, TokenError> {
    let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(TokenError::Empty(path.to_path_buf()));
    }
    Ok(text.as_bytes().into())
}

/// Lets the request through only with `Authorization: Bearer <token>`.
///
/// A refusal carries `Connection: close`: the request body (an upload, say) is never
/// read, so the connection cannot be reused for the client's next request.
pub(super) async fn require_token(
    State(token): State<Option<Token>>,
    request: Request,
    next: Next,
) -> Response {
    match check(token.as_ref(), &request) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            let mut response = refusal.into_response();
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}

/// Lets the request through only on the leader.
pub(super) async fn require_leader(
    State(controller): State<Controller>,
    request: Request,
    next: Next,
) -> Response {
    match controller.ensure_leading() {
        Ok(()) => next.run(request).await,
        Err(error) => {
            let mut response = ApiError::from(error).into_response();
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}

fn check(token: Option<&Token>, request: &Request) -> Result<(), ApiError> {
    let Some(token) = token else {
        return Err(ApiError::unauthorized(
            "this controller was started without --token-file, so changes over the API are \
             disabled",
        ));
    };
    let presented = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        None => Err(ApiError::unauthorized(
            "this endpoint changes the controller: send `Authorization: Bearer <token>` with \
             the token from the controller's --token-file",
        )),
        Some(p) => match token.matches(p.as_bytes()) {
            Ok(true) => Ok(()),
            Ok(false) => Err(ApiError::unauthorized(
                "the bearer token is wrong; use the one in the controller's --token-file",
            )),
            Err(error) => Err(ApiError::unauthorized(format!(
                "changes over the API are disabled until the token file can be read: {error}"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn with_bearer(token: &str) -> Request {
        Request::builder()
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap()
    }

    #[test]
    fn a_token_file_that_appears_after_the_start_enables_changes_without_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let token = Token::watching(&path);
        let refused = check(Some(&token), &with_bearer("s3cret")).unwrap_err();
        assert!(
            format!("{refused:?}").contains("disabled until the token file"),
            "{refused:?}"
        );
        std::fs::write(&path, "s3cret\n").unwrap();
        assert!(check(Some(&token), &with_bearer("s3cret")).is_ok());
        std::fs::write(&path, "rotated").unwrap();
        assert!(
            check(Some(&token), &with_bearer("s3cret")).is_err(),
            "a rotated Secret takes effect"
        );
    }
}
