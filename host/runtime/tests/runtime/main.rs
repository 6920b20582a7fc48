//! The runtime crate's integration tests, one binary: the sandbox with real components
//! built from the guest crates in this repository (`sandbox::...`), and the incremental
//! world against the native policies (`incremental::...`). `host/runtime/tests/hostile.rs` is a binary
//! of its own: it installs a counting global allocator whose figures other tests running
//! beside it would inflate.

use switchyard_test_support as support;

mod incremental;
mod sandbox;
