//! The registry client: one `oci-client` client with its transport settings (TLS unless a
//! registry is named insecure, timeouts, no platform resolution), the logins of a docker
//! config and an optional cache. Pushing (`push`) and pulling (`pull`) add their methods
//! to [`Client`] in modules of their own; this module holds what both use. It never
//! decides which policy runs.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;

use crate::cache::Cache;
use crate::credentials::Credentials;
use crate::error::{Error, causes};
use crate::reference::{Digest, Reference};

/// How long connecting to a registry may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a registry may leave a response waiting between two reads.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// What the client sends as its `User-Agent`.
const USER_AGENT: &str = concat!("switchyard/", env!("CARGO_PKG_VERSION"));

/// How a [`Client`] reaches registries.
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Registries (`host[:port]`, exactly as references name them) spoken to over plain
    /// HTTP; every other registry is spoken to over TLS.
    pub insecure_registries: Vec<String>,
    /// The logins, by registry.
    pub credentials: Credentials,
    /// Where pulled manifests and components are kept by digest, if anywhere.
    pub cache: Option<Cache>,
}

/// Pushes policy components to registries and pulls them back, verified.
pub struct Client {
    pub(crate) oci: oci_client::Client,
    pub(crate) options: ClientOptions,
}

impl std::fmt::Debug for Client {
    // The options say how registries are reached; the HTTP client's state says nothing
    // more a reader needs (and holds tokens).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client with `options`.
    pub fn new(options: ClientOptions) -> Result<Self, Error> {
        // The HTTP client's rustls is built without a default crypto provider (the
        // default would compile aws-lc); ring, which the Kubernetes client already
        // uses, serves the process. Installing fails only when one is already there.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(options.insecure_registries.clone()),
            // A policy is one manifest: an index (a multi-platform image) is refused,
            // not resolved to some platform's entry.
            platform_resolver: None,
            connect_timeout: Some(CONNECT_TIMEOUT),
            read_timeout: Some(READ_TIMEOUT),
            user_agent: USER_AGENT,
            ..ClientConfig::default()
        };
        let oci = oci_client::Client::try_from(config).map_err(|e| Error::Setup(causes(&e)))?;
        Ok(Self { oci, options })
    }

    /// The manifest digest `reference` names now: its own digest if it is pinned (no
    /// request), else what its tag points at, asked of the registry once.
    pub async fn resolve(&self, reference: &Reference) -> Result<Digest, Error> {
        if let Some(digest) = reference.digest() {
            return Ok(digest);
        }
        let auth = self.options.credentials.auth_for(reference.registry());
        let answer = self
            .oci
            .fetch_manifest_digest(&reference.to_oci(), &auth)
            .await
            .map_err(|e| self.error(e, reference))?;
        Digest::parse(&answer).map_err(|bad| Error::Registry {
            reference: Box::new(reference.clone()),
            detail: format!(
                "it names the manifest by `{answer}`, which switchyard cannot verify: {bad}"
            ),
        })
    }

    /// The scheme `registry` is spoken to over.
    pub(crate) fn scheme(&self, registry: &str) -> &'static str {
        match self
            .options
            .insecure_registries
            .iter()
            .any(|r| r == registry)
        {
            true => "http",
            false => "https",
        }
    }

    /// Hands `reference`'s registry its login before a request that does not take one
    /// (blob requests authenticate with what the client holds for the registry).
    pub(crate) async fn authorize(&self, reference: &Reference) {
        let registry = reference.registry();
        let auth = self.options.credentials.auth_for(registry);
        self.oci.store_auth_if_needed(registry, &auth).await;
    }

    /// Reads an `oci-client` error met while working on `reference`.
    pub(crate) fn error(&self, error: OciDistributionError, reference: &Reference) -> Error {
        Error::from_oci(
            error,
            reference,
            self.scheme(reference.registry()),
            &self.options.credentials,
        )
    }
}
