//! Why the webhook could not start: its certificate, the watch on the certificate's
//! directory, its port. It owns the error type alone and must not import its siblings.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the webhook could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The certificate or its key could not be read or do not form a pair.
    #[error("the webhook's certificate in {dir}: {reason}")]
    Certificate {
        /// The certificate directory.
        dir: PathBuf,
        /// What is wrong, naming the file.
        reason: String,
    },
    /// The certificate directory cannot be watched for renewals.
    #[error("cannot watch {dir} for certificate renewals: {source}")]
    Watch {
        /// The certificate directory.
        dir: PathBuf,
        /// The watcher's error.
        #[source]
        source: notify::Error,
    },
    /// The webhook's port could not be opened.
    #[error("cannot listen on {addr} for the webhook: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: io::Error,
    },
}

impl WebhookError {
    /// A short label for metrics, one per variant.
    pub fn metric_label(&self) -> &'static str {
        match self {
            WebhookError::Certificate { .. } => "certificate",
            WebhookError::Watch { .. } => "watch",
            WebhookError::Listen { .. } => "listen",
        }
    }
}
