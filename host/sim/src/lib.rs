//! The embedded cluster simulator and what it runs: a policy author can test a policy on
//! it with this crate alone (no Kubernetes client, no HTTP server).
//!
//! - [`simulator`]: the discrete-event cluster simulator, a
//!   [`switchyard_control::Cluster`].
//! - [`workload`]: workload files (YAML) and importers of real traces, turned into a
//!   [`Scenario`].
//! - [`paced`]: the simulator in scaled real time, a [`switchyard_control::LiveCluster`]
//!   the live controller runs on.
//! - [`offline`]: one scenario under one policy, start to finish (`switchyard simulate`
//!   and the reproduction tests).
//! - [`recorded`]: a recording as a workload (counterfactual replay): the recorded
//!   arrivals and nodes, each job's speed, work and loss curve estimated.
//! - [`report`]: what a run measured: per-job outcomes, summaries, `results.json`.
//! - [`sweep`]: workloads × runs × seeds, one offline run per cell, and the figures over
//!   seeds with their intervals (`switchyard sweep`).
//! - [`yaml`]: reading YAML written by people, with errors that locate the fault.
//!
//! It must not decide anything: every placement comes from a policy through the control
//! loop.

pub mod offline;
pub mod paced;
pub mod recorded;
pub mod report;
pub mod simulator;
pub mod sweep;
pub mod workload;
pub mod yaml;

pub use simulator::{Scenario, Simulator};
pub use workload::Workload;
