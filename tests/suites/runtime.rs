//! The runtime crate's integration tests, one binary (as `tests/suites/sim.rs` explains):
//! `runtime::...` and `incremental::...`. `tests/hostile.rs` stays a binary of its own:
//! it installs a counting global allocator whose figures other tests running beside it
//! would inflate.

#[path = "../support/mod.rs"]
mod support;

#[path = "../incremental.rs"]
mod incremental;
#[path = "../runtime.rs"]
mod runtime;
