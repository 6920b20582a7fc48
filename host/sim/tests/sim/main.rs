//! The simulator crate's integration tests, one binary, one module per subject: the
//! simulator itself, the control loop on it (policy state, resilience, recordings), the
//! offline runs against the papers' figures (reproduction, constrained placement),
//! against the Pollux peer's outputs (`peer_agreement`, `pollux_model`) and against
//! policies that abuse the host's budgets over time (`budgets`), and the shipped
//! policies the default disruption budget must leave alone (`disruptions`).

use switchyard_test_support as support;

mod budgets;
mod constrained;
mod disruptions;
mod peer_agreement;
mod policy_state;
mod pollux_model;
mod recording;
mod reproduction;
mod resilience;
mod simulator;
