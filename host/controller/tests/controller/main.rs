//! The controller crate's integration tests, one binary: the live controller over a real
//! HTTP server on loopback (`live_api`, `experiments`, `restarts`, acknowledged
//! checkpoints in `checkpoints`, and what the decision records' policy names stand for,
//! `deciders`), its API against malformed requests
//! (`api_fuzz`), its server against slow and flooding clients (`http_limits`), policies
//! named by OCI reference against a real registry on loopback (`references`), the
//! trust it places in uploads and tokens (`trust`), the policies
//! directory (`policy_dir`), the one writer of the active policy and parameters
//! (`one_writer`), the operator's console in a real browser (`console`), and
//! the controller in kube mode against the scripted API server (`in_cluster`, and the
//! one writer's order in the state ConfigMap, `one_writer_kube`; an adopted job's
//! checkpoint and loss over HTTP, `adopted_api`).

use switchyard_test_support as support;

// The Kubernetes backend's scripted API server and fixtures, from its own tests.
#[path = "../../../kube/tests/support/mod.rs"]
mod kube_support;

mod adopted_api;
mod api_fuzz;
mod checkpoints;
mod console;
mod deciders;
mod experiments;
mod http_limits;
mod in_cluster;
mod live_api;
mod one_writer;
mod one_writer_kube;
mod policy_dir;
mod references;
mod restarts;
mod trust;
