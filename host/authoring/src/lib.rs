//! switchyard-authoring: the tools of a policy author, behind `switchyard policy new`,
//! `switchyard policy sdk` and `switchyard policy test`. Modules, all private; the names
//! other crates use are re-exported here:
//!
//! - `scaffold`: a ready-to-build policy project from templates, in Rust
//!   ([`create_rust_project`]), Python ([`create_python_project`]) or JavaScript
//!   ([`create_js_project`]);
//! - `vendor`: the SDKs and WIT this binary was built with, written beside a new project
//!   ([`vendor_rust_sdk`], [`vendor_python_sdk`], [`vendor_js_sdk`]);
//! - `project`: what a new project of any language is made of ([`Created`]);
//! - `files`: writing a project's files and a vendored SDK, and [`ScaffoldError`];
//! - `harness`: running a policy on a workload (every round recorded) or on one fixture
//!   snapshot, optionally beside a second policy shown the same snapshots
//!   ([`run_policy_test`]);
//! - `trace`: the decision trace as reviewable text, and its diff against a golden copy
//!   ([`render_trace`], [`diff_trace`]);
//! - `expect`: the expectations an author writes about a run ([`load_expectations`]);
//! - `verdict`: the expectations checked against a run ([`check_expectations`]);
//! - `fixture`: snapshot files for single-decision tests ([`Fixture`]).
//!
//! Nothing here changes how a policy is run: the harness drives the same control loop,
//! simulator, sandbox and validator as `switchyard simulate` and the controller. The
//! crate must not depend on the Kubernetes client, the HTTP server or the controller: a
//! policy author's test crate builds it.

mod expect;
mod files;
mod fixture;
mod harness;
mod project;
mod scaffold;
mod trace;
mod vendor;
mod verdict;

pub use expect::{ExpectError, Expectation, load_expectations, parse_expectations};
pub use files::ScaffoldError;
pub use fixture::{Fixture, FixtureError};
pub use harness::{Comparison, HarnessError, RoundDifference, TestRun, TestSpec, run_policy_test};
pub use project::Created;
pub use scaffold::{Lang, Sdk, create_js_project, create_python_project, create_rust_project};
pub use trace::{
    COMPONENT_LINE, action_line, component_change, diff_trace, operation_text, render_trace,
};
pub use vendor::{
    SDK_DIR, js_project_lock, js_project_manifest, vendor_js_sdk, vendor_python_sdk,
    vendor_rust_sdk,
};
pub use verdict::{Evidence, Verdict, check_expectations};
