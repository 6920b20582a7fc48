//! Named pipes for the tests of readers that must refuse them ([`make_fifo`]): a FIFO
//! without a writer blocks a plain open, so a reader that opens one hangs its test.
//! It reads nothing and decides nothing.

use std::path::Path;

/// Creates a FIFO at `path` (with the system's `mkfifo`), panicking if it cannot.
pub fn make_fifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap_or_else(|e| panic!("running mkfifo for {}: {e}", path.display()));
    assert!(made.success(), "mkfifo {} failed", path.display());
}
