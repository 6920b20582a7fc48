//! switchyard-test-support: what the host crates' integration tests share, so that each
//! crate keeps its tests in its own `tests/` and a test's path says which crate it tests.
//! Test-only (`publish = false`, a dev-dependency and never a normal one). Modules, all
//! private; their names are re-exported here:
//!
//! - `builders`: fixture builders for snapshots ([`cluster`], [`node`], [`job`]) and
//!   [`wait_until`];
//! - `fifo`: a named pipe for the readers that must refuse one ([`make_fifo`]);
//! - `counting`: an allocator that counts each thread's bytes and the process's
//!   ([`CountingAllocator`], [`peak_growth`], [`process_live_bytes`]), for the tests that
//!   bound what the host holds;
//! - `logs` (feature `logs`): the log lines a closure writes, as text
//!   (`captured_logs`);
//! - `guests`: the built components of the test guests in `tests/guests/` ([`guest`]);
//! - `runtimes` (feature `runtime`): the default sandbox with a deadline the test
//!   chooses (`runtime_with_deadline`), or a generous one (`generous_runtime`);
//! - `offline` (feature `offline`): a policy slot and a simulator from workload YAML;
//! - `live` (feature `live`): the live controller on the simulator behind an ephemeral
//!   loopback port, and a client for it (`start_live`);
//! - `registry_server` (feature `registry`): a real OCI registry on loopback
//!   (`TestRegistry`);
//! - `componentize_py`: building a Python policy ([`componentize_py_or_skip`]);
//! - `compile_cache`, `outer_build`: where the tests' controllers cache compiled code
//!   ([`compile_cache_dir`]), and what a nested `cargo` must not inherit
//!   ([`OUTER_BUILD_VARS`]);
//! - `tools`: optional tools, which skip their tests when missing unless CI requires
//!   them ([`optional_tool`]).
//!
//! It must not hold a test: only what tests build and start.

mod builders;
mod compile_cache;
mod componentize_py;
mod counting;
mod fifo;
mod guests;
#[cfg(feature = "live")]
mod live;
#[cfg(feature = "logs")]
mod logs;
#[cfg(feature = "offline")]
mod offline;
mod outer_build;
#[cfg(feature = "registry")]
mod registry_server;
#[cfg(feature = "runtime")]
mod runtimes;
mod tools;

pub use builders::{ClusterBuilder, JobBuilder, NodeBuilder, cluster, job, node, res, wait_until};
pub use compile_cache::compile_cache_dir;
pub use componentize_py::{
    COMPONENTIZE_PY, build_python_example, build_python_policy, componentize_py_or_skip,
};
pub use counting::{CountingAllocator, live_bytes, peak_growth, process_live_bytes};
pub use fifo::make_fifo;
pub use guests::{builtin_policy, guest, guest_reading_loss, hostile_guest_named};
#[cfg(feature = "live")]
pub use live::{Live, STREAM, TOKEN, start_live, start_live_serving, start_live_with};
#[cfg(feature = "logs")]
pub use logs::captured_logs;
#[cfg(feature = "offline")]
pub use offline::{policy_slot, simulator_of};
pub use outer_build::OUTER_BUILD_VARS;
#[cfg(feature = "registry")]
pub use registry_server::TestRegistry;
#[cfg(feature = "runtime")]
pub use runtimes::{generous_runtime, runtime_with_deadline};
pub use tools::{Tool, executable, on_path, optional_tool, say};
