//! switchyard-test-support: what the host crates' integration tests share, so that each
//! crate keeps its tests in its own `tests/` and a test's path says which crate it tests.
//! Test-only (`publish = false`, a dev-dependency and never a normal one). Modules, all
//! private; their names are re-exported here:
//!
//! - `builders`: fixture builders for snapshots ([`cluster`], [`node`], [`job`]) and
//!   [`wait_until`];
//! - `guests`: the built components of the test guests in `tests/guests/` ([`guest`]);
//! - `offline` (feature `offline`): a policy slot, a simulator from workload YAML and the
//!   runtime offline runs share;
//! - `live` (feature `live`): the live controller on the simulator behind an ephemeral
//!   loopback port, and a client for it (`start_live`);
//! - `tools`: optional tools, which skip their tests when missing unless CI requires
//!   them ([`optional_tool`]).
//!
//! It must not hold a test: only what tests build and start.

mod builders;
mod guests;
#[cfg(feature = "live")]
mod live;
#[cfg(feature = "offline")]
mod offline;
mod tools;

use std::path::{Path, PathBuf};

pub use builders::{ClusterBuilder, JobBuilder, NodeBuilder, cluster, job, node, res, wait_until};
pub use guests::{guest, guest_reading_loss, hostile_guest_named};
#[cfg(feature = "live")]
pub use live::{Live, STREAM, TOKEN, start_live, start_live_with};
#[cfg(feature = "offline")]
pub use offline::{generous_runtime, policy_slot, simulator_of};
pub use tools::{Tool, executable, on_path, optional_tool, say};

/// Variables that steer the outer build (its target directory, flags and wrappers): a
/// nested `cargo` that a test starts for a reader or a policy author must see none of
/// them.
pub const OUTER_BUILD_VARS: [&str; 6] = [
    "CARGO_TARGET_DIR",
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
];

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
