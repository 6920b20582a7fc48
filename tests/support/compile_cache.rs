//! The compile cache the tests' controllers share, in the build directory's scratch
//! space: every controller start compiles the shipped policies, and with the cache
//! every start after the first (within a test run, and across runs) loads their code
//! instead of compiling it again.

use std::path::{Path, PathBuf};

/// The shared cache directory (wasmtime's cache is safe for concurrent use).
pub(crate) fn dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache")
}
