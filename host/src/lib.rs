//! switchyard: a host for scheduling policies compiled to WebAssembly components.
//!
//! The controller gathers cluster state and each job's training progress, hands it to
//! the active policy, checks the policy's answer and applies what is valid. Modules:
//!
//! - [`model`]: the host's own view of a cluster and of a policy's decision; everything
//!   else in the host speaks these types.
//! - [`contract`]: the one `bindgen!` of `wit/policy.wit` and the conversions between
//!   the WIT types and [`model`].
//! - [`runtime`]: compiling, checking, caching and calling policy components in a
//!   sandbox (epoch deadline, memory cap, virtual clocks and randomness).
//! - [`validate`]: checking a decision against the snapshot it was made for.
//! - [`registry`]: the policies shipped inside the binary, addressable by name, and
//!   loading a policy from a file.
//! - [`control`]: the one control loop (snapshot, decide, validate, apply), the
//!   [`control::Cluster`] trait every backend implements, per-policy state blobs and
//!   A/B experiments.
//! - [`live`]: the live controller: the control loop on its own thread against a
//!   [`live::LiveCluster`] (the paced simulator, or a Kubernetes cluster), the catalog of
//!   loaded policies, leadership, and the commands operators send it.
//! - [`api`]: the HTTP API over [`live::Controller`] (axum), and its OpenAPI document.
//! - [`policy_dir`]: loading policies and settings from a watched directory (a mounted
//!   ConfigMap).
//! - [`metrics`]: the Prometheus metrics.
//! - [`sim`]: the discrete-event cluster simulator, the first [`control::Cluster`].
//! - [`workload`]: workload files (YAML) and importers of real traces, turned into a
//!   [`sim::Scenario`].
//! - [`kube`]: the Kubernetes backend: the `TrainingJob` resource, reflectors, acting
//!   through the API, leader election, state in a ConfigMap, and the second
//!   [`control::Cluster`] (and [`live::LiveCluster`]).
//! - [`report`]: what a simulation run measured: summaries, `results.json`, plots.
//! - [`experiment`]: one scenario under one policy on the simulator, start to finish
//!   (shared by `switchyard simulate` and the reproduction tests).
//! - [`authoring`]: policy authors' tools: scaffolding a policy crate, the test harness,
//!   decision traces and golden files, expectations, fixture snapshots.
//! - [`yaml`]: reading YAML written by people, with errors that locate the fault.

pub mod api;
pub mod authoring;
pub mod contract;
pub mod control;
pub mod experiment;
pub mod kube;
pub mod live;
pub mod metrics;
pub mod model;
pub mod policy_dir;
pub mod registry;
pub mod report;
pub mod runtime;
pub mod sim;
pub mod validate;
pub mod workload;
pub mod yaml;
