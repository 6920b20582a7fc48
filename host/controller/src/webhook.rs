//! The optional mutating admission webhook (`run --cluster kube --webhook-cert-dir DIR`):
//! the API server calls it on the creation of a pod labelled `switchyard.dev/queue`
//! (deploy/webhook/ selects those alone), and it answers with a JSON patch that adds the
//! scheduling gate `switchyard.dev/placement` when the pod names this controller's queue
//! and lacks the gate, so a team adopts a job with the label alone. It owns the review's
//! answer (`admit`), the serving certificate and its reloading when the files change
//! (`certs`), HTTPS on its own port (`serve`), and why it could not start (`error`).
//!
//! It must not change anything else in a pod, keep any state between reviews (every
//! replica answers, the leader or not), or refuse a pod: a review it cannot read is a 400
//! and the webhook configuration's `failurePolicy` decides what the API server does.

mod admit;
mod certs;
mod error;
mod serve;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

pub use admit::{MAX_REVIEW_BYTES, REVIEW_PATH};
pub use certs::CertReloads;
pub use error::WebhookError;

/// The webhook's port unless `--webhook-port` says otherwise (the container port
/// deploy/webhook/ opens).
pub const DEFAULT_WEBHOOK_PORT: u16 = 9443;

/// Where and how the webhook serves.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// The address it listens on (the API's address with the webhook's port).
    pub listen: SocketAddr,
    /// The directory holding `tls.crt` and `tls.key`, as cert-manager writes them into
    /// a mounted Secret.
    pub cert_dir: PathBuf,
    /// The queue whose pods are gated: their `switchyard.dev/queue` label.
    pub queue: String,
}

/// The webhook, bound and holding its certificate, not yet serving.
pub struct Webhook {
    listener: TcpListener,
    certificate: certs::Reloading,
    queue: Arc<str>,
}

impl Webhook {
    /// Reads the certificate pair (a missing or bad one is an error naming the file),
    /// starts following its directory, and binds the port.
    pub async fn bind(config: &WebhookConfig) -> Result<Self, WebhookError> {
        let certificate = certs::Reloading::start(&config.cert_dir)?;
        let listener =
            TcpListener::bind(config.listen)
                .await
                .map_err(|source| WebhookError::Listen {
                    addr: config.listen,
                    source,
                })?;
        Ok(Self {
            listener,
            certificate,
            queue: config.queue.as_str().into(),
        })
    }

    /// The address it listens on (the port the system gave, for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The certificate reloads so far: how many pairs were loaded and refused since the
    /// start, and the last refusal.
    pub fn reloads(&self) -> watch::Receiver<CertReloads> {
        self.certificate.reloads()
    }

    /// Serves reviews over HTTPS until `shutdown` completes, then finishes the ones in
    /// flight. A renewed certificate is presented from the next handshake on.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let tls = self.certificate.server_config();
        let served = serve::serve(
            self.listener,
            tls,
            admit::router(self.queue.to_string()),
            shutdown,
        )
        .await;
        drop(self.certificate);
        served
    }
}
