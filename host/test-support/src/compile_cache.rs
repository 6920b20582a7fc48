//! The compile cache the tests' controllers share. A leaf: it names nothing else of the
//! crate.

use std::path::{Path, PathBuf};

/// The compile cache the tests' controllers share, in the build directory's scratch
/// space (`<target>/tmp`, beside the test binary's profile directory): every controller
/// start compiles the shipped policies, and with the cache every start after the first
/// (within a test run, and across runs) loads their code instead of compiling it again.
/// wasmtime's cache is safe for concurrent use.
pub fn compile_cache_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // <target>/<profile>/deps/<binary>
    let target = exe
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    target.join("tmp").join("compile-cache")
}
