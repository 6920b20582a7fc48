//! The simulator crate's integration tests, one binary: each file of `tests/` below is a
//! module here, under its own name (`simulator::...`, `peer_agreement::...`), so a test
//! keeps its file and its name and only one binary links the host.
//!
//! A file is declared by `#[path]`, which makes it a directory owner: a `mod` or
//! `#[path]` line of its own resolves against `tests/`, as it did when the file was a
//! binary of its own. What several files share is declared once, here, and each file
//! `use`s it: a file loaded as two modules would be compiled twice.

#[path = "../support/offline_loop.rs"]
mod offline_loop;
#[path = "../support/offline_runtime.rs"]
mod offline_runtime;
#[path = "../support/mod.rs"]
mod support;

#[path = "../budgets.rs"]
mod budgets;
#[path = "../constrained.rs"]
mod constrained;
#[path = "../peer_agreement.rs"]
mod peer_agreement;
#[path = "../policy_state.rs"]
mod policy_state;
#[path = "../pollux_model.rs"]
mod pollux_model;
#[path = "../recording.rs"]
mod recording;
#[path = "../reproduction.rs"]
mod reproduction;
#[path = "../resilience.rs"]
mod resilience;
#[path = "../simulator.rs"]
mod simulator;
