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
    /// The file could not be read: missing, not a regular file, or larger than
    /// [`MAX_TOKEN_FILE_BYTES`].
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
    /// The file is not UTF-8 text.
    #[error("the token file {0} is not text; put the bearer token in it as plain text")]
    NotText(PathBuf),
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

/// The most bytes a token file may hold: a bearer token is tens of bytes, and a file
/// past this (a wrong path, `/dev/zero`) is refused rather than read.
pub const MAX_TOKEN_FILE_BYTES: u64 = 4 << 10;

/// The token in the file at `path` (a regular file of at most [`MAX_TOKEN_FILE_BYTES`],
/// surrounding whitespace removed). A FIFO, a device or a directory is refused without
/// waiting on it.
pub fn read_token_file(path: &Path) -> Result<String, TokenError> {
    let bytes =
        switchyard_control::read_regular_file(path, MAX_TOKEN_FILE_BYTES).map_err(|source| {
            TokenError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
    let text = String::from_utf8(bytes).map_err(|_| TokenError::NotText(path.to_path_buf()))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(TokenError::Empty(path.to_path_buf()));
    }
    Ok(text.to_string())
}

fn read(path: &Path) -> Result<Box<[u8]>, TokenError> {
    Ok(read_token_file(path)?.into_bytes().into_boxed_slice())
}

/// The credentials of an `Authorization` value when its scheme is `Bearer`: RFC 9110
/// §11.1 makes the scheme case-insensitive and puts one or more spaces before the token
/// (the field's own leading and trailing spaces and tabs are not part of it). None for
/// another scheme, a missing token, or a token with whitespace inside.
fn bearer_token(value: &str) -> Option<&str> {
    let value = value.trim_matches([' ', '\t']);
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && !token.contains(|c: char| c.is_ascii_whitespace()))
    .then_some(token)
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
        .and_then(bearer_token);
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
        with_authorization(&format!("Bearer {token}"))
    }

    fn with_authorization(value: &str) -> Request {
        Request::builder()
            .header(AUTHORIZATION, value)
            .body(Body::empty())
            .unwrap()
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case_with_one_or_more_spaces_before_the_token() {
        let token = Token::new("s3cret").unwrap();
        for value in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "bEaReR    s3cret",
            " Bearer s3cret\t",
        ] {
            assert!(
                check(Some(&token), &with_authorization(value)).is_ok(),
                "{value:?} is a bearer token"
            );
        }
        for value in [
            "Bearers3cret",
            "Basic s3cret",
            "Bearer",
            "Bearer ",
            "Bearer\ts3cret",
            "Bearer s3 cret",
            "Bearer s3cret extra",
            "Bearer S3CRET",
        ] {
            assert!(
                check(Some(&token), &with_authorization(value)).is_err(),
                "{value:?} is refused"
            );
        }
    }

    #[test]
    fn a_token_file_that_is_not_a_small_regular_file_is_refused_naming_the_file_and_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let large = dir.path().join("token");
        std::fs::write(&large, "x".repeat(MAX_TOKEN_FILE_BYTES as usize + 1)).unwrap();
        let error = read_token_file(&large).unwrap_err().to_string();
        assert!(
            error.contains(&large.display().to_string())
                && error.contains(&format!("limit of {MAX_TOKEN_FILE_BYTES} bytes")),
            "{error}"
        );
        let fifo = dir.path().join("fifo");
        switchyard_test_support::make_fifo(&fifo);
        for path in [Path::new("/dev/zero"), fifo.as_path(), dir.path()] {
            let error = read_token_file(path).unwrap_err().to_string();
            assert!(error.contains("not a regular file"), "{error}");
        }
        std::fs::write(&large, "s3cret\n").unwrap();
        assert_eq!(read_token_file(&large).unwrap(), "s3cret");
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
