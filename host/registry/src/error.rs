//! The one error type of the crate: every failure names the reference it concerns and
//! says what would be accepted. This module also reads `oci-client`'s errors into it, so
//! that no other module matches on the client's error variants. A message never holds
//! a password: a login is named by its user and the file it came from.

use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use thiserror::Error;

use crate::artifact::NotComponent;
use crate::credentials::{Credentials, CredentialsError};
use crate::reference::{Reference, ReferenceError};

/// What went wrong talking to a registry about a policy.
#[derive(Debug, Error)]
pub enum Error {
    /// A reference that could not be read.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// A docker config that could not be read.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// The registry could not be reached: an unknown host, nothing listening, a TLS
    /// handshake that failed, a timeout.
    #[error("cannot reach registry `{registry}` for {reference} over {scheme}: {cause}{hint}",
        registry = reference.registry(),
        hint = if *scheme == "https" {
            " (switchyard speaks TLS to every registry not named insecure; a registry that \
             serves plain HTTP must be named insecure)"
        } else { "" })]
    Unreachable {
        /// The reference being pushed or pulled.
        reference: Box<Reference>,
        /// `https`, or `http` for a registry named insecure.
        scheme: &'static str,
        /// What failed, innermost cause last.
        cause: String,
    },
    /// The registry refused the request (HTTP 401 or 403).
    #[error("registry `{registry}` refused access to {reference} (HTTP {status}): {why}",
        registry = reference.registry())]
    AccessDenied {
        /// The reference being pushed or pulled.
        reference: Box<Reference>,
        /// 401 or 403.
        status: u16,
        /// Whether a login was sent, and where it came from.
        why: String,
    },
    /// The tag, digest or repository does not exist.
    #[error("{reference} does not exist at registry `{registry}`: {what}",
        registry = reference.registry())]
    NotFound {
        /// The reference being pulled.
        reference: Box<Reference>,
        /// What the registry said is missing.
        what: String,
    },
    /// The artifact (or the file to push) is not a Wasm component.
    #[error("{reference} is not a Wasm component: {problem}")]
    NotComponent {
        /// The reference being pushed or pulled.
        reference: Box<Reference>,
        /// Why not.
        problem: NotComponent,
    },
    /// Content that does not hash to the digest that names it.
    #[error(
        "{reference}: the {what} the registry sent has digest {actual}, not the {expected} \
         that names it; nothing was kept"
    )]
    DigestMismatch {
        /// The reference being pulled.
        reference: Box<Reference>,
        /// `manifest` or `component`.
        what: &'static str,
        /// The digest that names the content.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// The component is larger than the caller accepts: refused from the size the
    /// manifest or the response declares, before its bytes are read, or as soon as more
    /// than the limit has arrived.
    #[error("{reference}: the component is {size}, over the limit of {limit} bytes; {}", size.outcome())]
    TooLarge {
        /// The reference being pulled.
        reference: Box<Reference>,
        /// How large it is, or how much arrived before the download was stopped.
        size: Size,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The registry sent more or fewer bytes than the manifest declares.
    #[error(
        "{reference}: the manifest declares a component of {declared} bytes but the registry \
         sent {received}; nothing was kept"
    )]
    SizeMismatch {
        /// The reference being pulled.
        reference: Box<Reference>,
        /// The size in the manifest.
        declared: u64,
        /// What arrived (for too much: when the download was stopped).
        received: Size,
    },
    /// A push to a reference that names a digest rather than a tag.
    #[error(
        "cannot push to {reference}: a push names a tag (oci://REGISTRY/REPOSITORY:TAG); the \
         digest is the registry's answer"
    )]
    PushToDigest {
        /// The reference given.
        reference: Box<Reference>,
    },
    /// Any other refusal or failure the registry answered with.
    #[error("registry `{registry}` failed on {reference}: {detail}", registry = reference.registry())]
    Registry {
        /// The reference being pushed or pulled.
        reference: Box<Reference>,
        /// What the registry or the transport said.
        detail: String,
    },
    /// The HTTP client could not be set up (its TLS configuration).
    #[error("cannot set up the registry client: {0}")]
    Setup(String),
}

/// A size in a message: exact, or a lower bound when a download was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Exactly this many bytes.
    Exactly(u64),
    /// More than this many bytes (the download stopped there).
    MoreThan(u64),
}

impl Size {
    /// What became of a download refused at this size.
    fn outcome(&self) -> &'static str {
        match self {
            Size::Exactly(_) => "it was not downloaded",
            Size::MoreThan(_) => "the download was stopped there",
        }
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Size::Exactly(n) => write!(f, "{n} bytes"),
            Size::MoreThan(n) => write!(f, "more than {n} bytes"),
        }
    }
}

impl Error {
    /// A short, stable label for metrics (`registry_error{kind="..."}`).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Reference(_) => "reference",
            Error::Credentials(_) => "credentials",
            Error::Unreachable { .. } => "unreachable",
            Error::AccessDenied { .. } => "access_denied",
            Error::NotFound { .. } => "not_found",
            Error::NotComponent { .. } => "not_component",
            Error::DigestMismatch { .. } => "digest_mismatch",
            Error::TooLarge { .. } => "too_large",
            Error::SizeMismatch { .. } => "size_mismatch",
            Error::PushToDigest { .. } => "push_to_digest",
            Error::Registry { .. } => "registry",
            Error::Setup(_) => "setup",
        }
    }

    /// The reference the error concerns, when it concerns one.
    pub fn reference(&self) -> Option<&Reference> {
        match self {
            Error::Reference(_) | Error::Credentials(_) | Error::Setup(_) => None,
            Error::Unreachable { reference, .. }
            | Error::AccessDenied { reference, .. }
            | Error::NotFound { reference, .. }
            | Error::NotComponent { reference, .. }
            | Error::DigestMismatch { reference, .. }
            | Error::TooLarge { reference, .. }
            | Error::SizeMismatch { reference, .. }
            | Error::PushToDigest { reference }
            | Error::Registry { reference, .. } => Some(reference),
        }
    }

    /// Reads an `oci-client` error met while working on `reference`, spoken to over
    /// `scheme` with `credentials`.
    pub(crate) fn from_oci(
        error: OciDistributionError,
        reference: &Reference,
        scheme: &'static str,
        credentials: &Credentials,
    ) -> Self {
        let reference = Box::new(reference.clone());
        let denied = |reference: Box<Reference>, status| Error::AccessDenied {
            why: access_why(credentials, &reference),
            reference,
            status,
        };
        match error {
            OciDistributionError::UnauthorizedError { .. } => denied(reference, 401),
            OciDistributionError::AuthenticationFailure(_) => denied(reference, 401),
            OciDistributionError::RegistryError { envelope, url } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let has = |code: OciErrorCode| codes.contains(&&code);
                if has(OciErrorCode::Unauthorized) {
                    denied(reference, 401)
                } else if has(OciErrorCode::Denied) {
                    denied(reference, 403)
                } else if has(OciErrorCode::BlobUnknown) {
                    Error::NotFound {
                        what: format!(
                            "a blob its manifest names is missing from repository `{}` (the \
                             registry said: {envelope})",
                            reference.repository()
                        ),
                        reference,
                    }
                } else if has(OciErrorCode::ManifestUnknown)
                    || has(OciErrorCode::NameUnknown)
                    || has(OciErrorCode::NotFound)
                {
                    Error::NotFound {
                        what: not_found_what(&reference, &envelope.to_string()),
                        reference,
                    }
                } else {
                    Error::Registry {
                        reference,
                        detail: format!("{envelope} ({url})"),
                    }
                }
            }
            OciDistributionError::ServerError { code, url, message } => match code {
                401 | 403 => denied(reference, code),
                404 => Error::NotFound {
                    what: not_found_what(&reference, &message),
                    reference,
                },
                _ => Error::Registry {
                    reference,
                    detail: format!("HTTP {code} from {url}: {message}"),
                },
            },
            OciDistributionError::DigestError(DigestError::VerificationError {
                expected,
                actual,
            }) => Error::DigestMismatch {
                reference,
                what: "manifest",
                expected,
                actual,
            },
            OciDistributionError::ImageIndexParsingNoPlatformResolverError => Error::NotComponent {
                reference,
                problem: NotComponent::ManifestMediaType(
                    oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE.into(),
                ),
            },
            OciDistributionError::UnsupportedMediaTypeError(media_type) => Error::NotComponent {
                reference,
                problem: NotComponent::ManifestMediaType(media_type),
            },
            OciDistributionError::RequestError(error)
                if matches!(error.status().map(|s| s.as_u16()), Some(401 | 403)) =>
            {
                let status = error.status().map_or(401, |s| s.as_u16());
                denied(reference, status)
            }
            OciDistributionError::RequestError(error)
                if error.is_connect() || error.is_timeout() =>
            {
                Error::Unreachable {
                    reference,
                    scheme,
                    cause: causes(&error),
                }
            }
            other => Error::Registry {
                reference,
                detail: causes(&other),
            },
        }
    }
}

/// What a 401 or 403 means for this request: no login was sent, or the one sent was
/// refused.
fn access_why(credentials: &Credentials, reference: &Reference) -> String {
    let registry = reference.registry();
    match credentials.username_for(registry) {
        Some(user) => format!(
            "the login `{user}` for {registry} from {} was refused",
            credentials.source().unwrap_or("the docker config")
        ),
        None => credentials.why_anonymous(registry),
    }
}

/// What a 404 is about: the tag, the digest or the repository.
fn not_found_what(reference: &Reference, registry_said: &str) -> String {
    let named = match (reference.tag(), reference.digest()) {
        (_, Some(digest)) => format!("no manifest {digest}"),
        (Some(tag), None) => format!("no tag `{tag}`"),
        (None, None) => "nothing".to_string(),
    };
    format!(
        "{named} in repository `{}` (the registry said: {registry_said})",
        reference.repository()
    )
}

/// An error and its causes, outermost first, each once.
pub(crate) fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}
