//! How the live controller reaches OCI registries ([`RegistryAccess`]): one client (its
//! insecure registries, its logins, its cache) and the largest component it pulls, and
//! a pull that callers inside or outside an async runtime can wait for alike. It moves
//! bytes only: what is loaded, kept or listed is decided elsewhere.

use std::sync::Arc;

use switchyard_registry::{Client, ClientOptions, Error, Pulled, Reference};

/// The largest component a controller started without registry settings pulls: the
/// API's default upload limit, so a policy that could be uploaded can be named too.
const DEFAULT_MAX_PULL_BYTES: u64 = 32 << 20;

/// How the controller reaches registries: one client (its insecure registries, its
/// logins, its cache) and the largest component it pulls.
#[derive(Clone, Debug)]
pub struct RegistryAccess {
    client: Arc<Client>,
    max_bytes: u64,
}

impl RegistryAccess {
    /// Access through a client with `options`, refusing components over `max_bytes`
    /// before they are downloaded.
    pub fn new(options: ClientOptions, max_bytes: u64) -> Result<Self, Error> {
        Ok(Self {
            client: Arc::new(Client::new(options)?),
            max_bytes,
        })
    }

    /// Anonymous access over TLS to every registry, with no cache, up to the API's upload
    /// limit: what a controller started without registry settings uses.
    pub fn anonymous() -> Result<Self, Error> {
        Self::new(ClientOptions::default(), DEFAULT_MAX_PULL_BYTES)
    }

    /// Pulls `reference`, verified, on a thread and runtime of its own, so that callers
    /// inside or outside an async runtime (the API, the start of the controller) can wait
    /// for it alike.
    pub(super) fn pull_blocking(&self, reference: &Reference) -> Result<Pulled, Error> {
        let (client, reference, limit) = (self.client.clone(), reference.clone(), self.max_bytes);
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| Error::Setup(format!("cannot start a runtime: {e}")))?
                        .block_on(client.pull(&reference, limit))
                })
                .join()
                .unwrap_or_else(|_| Err(Error::Setup("the pull panicked".into())))
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_pull_limit_is_the_default_upload_limit() {
        assert_eq!(
            super::DEFAULT_MAX_PULL_BYTES,
            crate::api::DEFAULT_MAX_UPLOAD_BYTES as u64
        );
    }
}
