//! The simulator crate's integration tests, one binary, one module per subject: the
//! simulator itself, a stopped job's checkpoint (`checkpoints`) and the workload files
//! it reads, the control loop on it (a failing
//! policy's fallback, policy state, resilience, recordings), the
//! offline runs against the papers' figures (reproduction, constrained placement),
//! against the Pollux peer's outputs (`peer_agreement`, `pollux_model`) and against
//! policies that abuse the host's budgets over time (`budgets`), and the shipped
//! policies the default disruption budget must leave alone (`disruptions`).

use switchyard_test_support as support;

mod budgets;
mod checkpoints;
mod constrained;
mod disruptions;
mod fallback;
mod peer_agreement;
mod policy_state;
mod pollux_model;
mod recording;
mod reproduction;
mod resilience;
mod simulator;
mod workloads;
