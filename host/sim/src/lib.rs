//! The embedded cluster simulator and what it runs: a policy author can test a policy on
//! it with this crate alone (no Kubernetes client, no HTTP server). Its modules are
//! private; the names below are re-exported at the crate root.
//!
//! - `simulator`: the discrete-event cluster simulator ([`Simulator`], a
//!   [`switchyard_control::Cluster`]) and what it runs ([`Scenario`]).
//! - `workload`: workload files (YAML, [`Workload`]) and importers of real traces,
//!   turned into a [`Scenario`] within [`InputLimits`].
//! - `paced`: the simulator in scaled real time ([`Paced`], a
//!   [`switchyard_control::LiveCluster`] the live controller runs on).
//! - `offline`: one scenario under one policy, start to finish ([`run_offline`], for
//!   `switchyard simulate` and the reproduction tests).
//! - `recorded`: a recording as a workload (counterfactual replay,
//!   [`estimate_counterfactual`]): the recorded arrivals and nodes, each job's speed, work
//!   and loss curve estimated.
//! - `report`: what a run measured ([`RunResult`]): per-job outcomes, summaries,
//!   `results.json`.
//! - `sweep`: workloads × runs × seeds, one offline run per cell, and the figures over
//!   seeds with their intervals ([`SweepResults`], [`run_cell`], for `switchyard sweep`).
//! - `yaml`: reading YAML written by people ([`load_yaml`]), with errors that locate the
//!   fault.
//!
//! It must not decide anything: every placement comes from a policy through the control
//! loop.

mod offline;
mod paced;
mod recorded;
mod report;
mod simulator;
mod sweep;
mod workload;
mod yaml;

pub use offline::{OfflineError, OfflineOptions, OfflineRun, Records, load_slot, run_offline};
pub use paced::{PACE_SLICE, Paced};
pub use recorded::{Counterfactual, estimate_counterfactual};
pub use report::{Results, RunOutcome, RunResult, Summary};
pub use simulator::{
    BatchSplit, CheckpointSpec, Curve, Faults, Goodput, JobOutcome, JobSpec, Measurements,
    ModelLimits, NodeSpec, RoleSpec, Scenario, SimConfig, Simulator, Speed, StepTime, UtilPoint,
};
pub use sweep::{
    CellFile, CellOutcome, CellResult, PairedChange, SweepCell, SweepPlan, SweepResults, SweepRow,
    SweepRun, run_cell, sweep_rows,
};
pub use workload::{
    Acknowledge, ClusterFile, CurveFile, CurveShape, FaultsFile, ImportFile, InputLimits, JobEntry,
    JobTemplate, NodeGroup, PhillyImport, PolluxImport, ReplayedCurveFile, RoleFile, ScaleFile,
    SimulatorFile, Workload, WorkloadError, WorkloadFile, load_application, replay_curve,
};
pub use yaml::{YamlError, YamlLoadError, load_yaml, parse_yaml};
