//! switchyard: a host for scheduling policies compiled to WebAssembly components.
//!
//! The controller gathers cluster state and each job's training progress, hands it to
//! the active policy, checks the policy's answer and applies what is valid. This crate is
//! the top floor: the `switchyard` command and the live controller. The floors below it
//! are crates of their own (`docs/architecture.md`): `switchyard-core` (model, delta,
//! validator), `switchyard-runtime` (the sandbox and the built-in policies),
//! `switchyard-control` (the control loop and the cluster traits), `switchyard-sim`
//! (the simulator, workloads, offline runs) and `switchyard-kube` (the Kubernetes
//! backend). Modules here:
//!
//! - [`live`]: the live controller: the control loop on its own thread against a
//!   [`switchyard_control::LiveCluster`] (the paced simulator, or a Kubernetes cluster),
//!   the catalog of loaded policies, and the commands operators send it.
//! - [`api`]: the HTTP API over [`live::Controller`] (axum), and its OpenAPI document.
//! - [`policy_dir`]: loading policies and settings from a watched directory (a mounted
//!   ConfigMap).
//! - [`metrics`]: the Prometheus metrics.
//! - [`in_cluster`]: the live controller wired to the Kubernetes backend
//!   (`switchyard run --cluster kube`).
//! - [`authoring`]: policy authors' tools: scaffolding a policy crate, the test harness,
//!   decision traces and golden files, expectations, fixture snapshots.
//! - [`plot`]: the plots `switchyard simulate --out` draws.
//! - [`client`]: a client of a running controller's HTTP API (`switchyard ctl`).

pub mod api;
pub mod authoring;
pub mod client;
pub mod in_cluster;
pub mod live;
pub mod metrics;
pub mod plot;
pub mod policy_dir;
