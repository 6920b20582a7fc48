//! switchyard-controller: the live controller and what operators reach it through. The
//! control loop runs on its own thread against a [`switchyard_control::LiveCluster`]
//! (the paced simulator, or a Kubernetes cluster), with policies operators load,
//! activate, configure and compare while it runs. Modules, all private; the names the
//! `switchyard` command, the tests and the benches use are re-exported here:
//!
//! - `live`: the [`Controller`] handle, its decision thread ([`DriverHandle`]), the
//!   catalog of loaded policies and the commands operators send it ([`LiveConfig`]);
//! - `api`: the HTTP API over the controller (axum, [`router`], [`serve`]), the
//!   operator's console (its page and assets, from `console/`, embedded), and the OpenAPI
//!   document ([`openapi_json`]);
//! - `metrics`: the Prometheus metrics;
//! - `policy_dir`: loading policies and settings from a watched directory, a mounted
//!   ConfigMap ([`PolicyDir`], [`watch_policy_dir`]);
//! - `in_cluster`: the live controller wired to the Kubernetes backend
//!   ([`run_in_cluster`], behind `switchyard run --cluster kube`);
//! - `client`: a client of a running controller's HTTP API ([`Client`], behind
//!   `switchyard ctl`);
//! - `webhook`: the optional mutating admission webhook that gates the pods of the
//!   controller's queue at creation ([`Webhook`], over HTTPS on its own port).
//!
//! It decides nothing itself (the control loop and the policies do) and holds no
//! command-line parsing: the `switchyard` crate turns flags into the options here.

mod api;
mod client;
mod in_cluster;
mod live;
mod metrics;
mod policy_dir;
mod webhook;

pub use api::{
    ApiConfig, ApiError, DEFAULT_MAX_UPLOAD_BYTES, HttpLimits, MAX_TOKEN_FILE_BYTES, Token,
    TokenError, openapi_json, read_token_file, router, serve,
};
pub use client::{Body, Client, ClientError};
pub use in_cluster::{InClusterError, InClusterOptions, run_in_cluster};
pub use live::{Controller, DriverHandle, LiveConfig, LiveError, RegistryAccess};
pub use policy_dir::{DirWatcher, PolicyDir, PolicyDirError, ScanReport, watch_policy_dir};
pub use webhook::{
    CertReloads, DEFAULT_WEBHOOK_PORT, MAX_REVIEW_BYTES, REVIEW_PATH, Webhook, WebhookConfig,
    WebhookError,
};
