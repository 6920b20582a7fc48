//! The webhook's serving certificate: the pair `tls.crt`/`tls.key` read from a directory
//! (cert-manager writes them into a Secret, the kubelet swaps the mounted files when the
//! certificate is renewed), presented by every handshake, and read again whenever the
//! directory changes. A pair that cannot be read or whose key does not match its
//! certificate is refused with a logged error and the previous pair stays: a renewal
//! written one file at a time is taken once both files are written. It must not stop the
//! listener or drop a connection to take a new pair.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, mpsc};
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

use super::error::WebhookError;

/// The certificate chain's file in the directory (PEM), as cert-manager names it.
const CERT_FILE: &str = "tls.crt";
/// The private key's file in the directory (PEM: PKCS#8, PKCS#1 or SEC1).
const KEY_FILE: &str = "tls.key";
/// The most either file may hold: a chain of a few certificates is a few KiB, and the
/// bound keeps a hostile file from being read whole at every change.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// How long the directory must be quiet after a change before the pair is read again.
const QUIET: Duration = Duration::from_millis(200);

/// What the certificate directory's changes have done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertReloads {
    /// Pairs read and presented since the start (the first one included).
    pub loaded: u64,
    /// Pairs refused on a change, the previous pair staying.
    pub refused: u64,
    /// Why the last refused pair was refused.
    pub last_error: Option<String>,
}

/// The pair presented now, replaced whole on a good reload.
#[derive(Debug)]
struct Current {
    key: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.key
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// The certificate, followed in its directory for as long as this lives.
pub(super) struct Reloading {
    current: Arc<Current>,
    provider: Arc<CryptoProvider>,
    reloads: watch::Receiver<CertReloads>,
    _watcher: notify::RecommendedWatcher,
}

impl Reloading {
    /// Reads the pair in `dir` and follows the directory.
    pub(super) fn start(dir: &Path) -> Result<Self, WebhookError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let first = load(dir, &provider).map_err(|reason| WebhookError::Certificate {
            dir: dir.to_path_buf(),
            reason,
        })?;
        let current = Arc::new(Current {
            key: RwLock::new(first),
        });
        let (report, reloads) = watch::channel(CertReloads {
            loaded: 1,
            ..CertReloads::default()
        });
        let watch_error = |source| WebhookError::Watch {
            dir: dir.to_path_buf(),
            source,
        };
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Reading the pair is itself an event on some systems.
                if !event.is_ok_and(|event| event.kind.is_access()) {
                    let _ = tx.send(());
                }
            })
            .map_err(watch_error)?;
        // The directory, not the files: the kubelet renews a Secret volume by swapping
        // a symlink inside it, which a watch on the old files would never see.
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(watch_error)?;
        {
            let (current, provider, followed) =
                (current.clone(), provider.clone(), dir.to_path_buf());
            std::thread::Builder::new()
                .name("switchyard-webhook-certs".into())
                .spawn(move || {
                    // Until the watcher is dropped: one reload per burst of changes, so
                    // a pair written in several steps is read once it is quiet.
                    while rx.recv().is_ok() {
                        while rx.recv_timeout(QUIET).is_ok() {}
                        reload(&followed, &provider, &current, &report);
                    }
                })
                .map_err(|source| WebhookError::Watch {
                    dir: dir.to_path_buf(),
                    source: notify::Error::io(source),
                })?;
        }
        Ok(Self {
            current,
            provider,
            reloads,
            _watcher: watcher,
        })
    }

    /// A TLS configuration that presents the current pair at every handshake.
    pub(super) fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .expect("the ring provider supports the default protocol versions")
            .with_no_client_auth()
            .with_cert_resolver(self.current.clone());
        // The API server speaks HTTP/1.1 to webhooks; only that is served.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }

    pub(super) fn reloads(&self) -> watch::Receiver<CertReloads> {
        self.reloads.clone()
    }
}

/// Reads the pair again and presents it, or keeps the current one and says why not.
fn reload(
    dir: &Path,
    provider: &CryptoProvider,
    current: &Current,
    report: &watch::Sender<CertReloads>,
) {
    match load(dir, provider) {
        Ok(key) => {
            let unchanged = {
                let mut presented = current.key.write().unwrap_or_else(PoisonError::into_inner);
                let unchanged = presented.cert == key.cert;
                *presented = key;
                unchanged
            };
            // A burst that ends with the pair it started with (a file touched) is no
            // renewal.
            if !unchanged {
                tracing::info!(dir = %dir.display(), "the webhook presents its renewed certificate");
                report.send_modify(|reloads| reloads.loaded += 1);
            }
        }
        Err(reason) => {
            tracing::error!(dir = %dir.display(), %reason, "the webhook's certificate was not renewed; the previous one stays");
            report.send_modify(|reloads| {
                reloads.refused += 1;
                reloads.last_error = Some(reason);
            });
        }
    }
}

/// The pair in `dir`, checked to match; the error names the file at fault.
fn load(dir: &Path, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, String> {
    let read = |name: &str| -> Result<(PathBuf, Vec<u8>), String> {
        let path = dir.join(name);
        switchyard_control::read_regular_file(&path, MAX_PEM_BYTES)
            .map(|bytes| (path.clone(), bytes))
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let (cert_path, cert_pem) = read(CERT_FILE)?;
    let (key_path, key_pem) = read(KEY_FILE)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| {
            format!(
                "{}: not a PEM certificate chain: {error}",
                cert_path.display()
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "{}: holds no CERTIFICATE block (a PEM certificate chain is expected)",
            cert_path.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| {
        format!(
            "{}: not a PEM private key (PKCS#8, PKCS#1 or SEC1): {error}",
            key_path.display()
        )
    })?;
    let pair = CertifiedKey::from_der(chain, key, provider).map_err(|error| {
        format!(
            "{} and {} do not form a pair: {error}",
            key_path.display(),
            cert_path.display()
        )
    })?;
    Ok(Arc::new(pair))
}
