//! The runtime crate's integration tests, one binary: the sandbox with real components
//! built from the guest crates in this repository (`sandbox::...`), and the incremental
//! world against the native policies (`incremental::...`). `host/runtime/tests/hostile.rs` is a binary
//! of its own, with the counting global allocator it measures the host's memory by.

use switchyard_test_support as support;

mod incremental;
mod sandbox;
