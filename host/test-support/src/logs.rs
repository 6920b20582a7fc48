//! The log lines a test's code writes through `tracing`, captured as text
//! ([`captured_logs`]) for the tests that check what a policy may put in the host's log.
//! It installs a subscriber for the calling thread only, so tests running beside it keep
//! their own logs; it judges nothing about the lines.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A writer the lines of one capture go to.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What `f` returns, and the lines logged on this thread at `INFO` and above while it
/// ran, as the host's log formats them without colours.
pub fn captured_logs<R>(f: impl FnOnce() -> R) -> (R, String) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let bytes = captured
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    (out, String::from_utf8_lossy(&bytes).into_owned())
}
