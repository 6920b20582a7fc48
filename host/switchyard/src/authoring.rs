//! Tools for policy authors, behind `switchyard policy new` and `switchyard policy test`:
//!
//! - [`scaffold`]: a ready-to-build policy crate from templates;
//! - [`vendor`]: the SDK and WIT this binary was built with, written beside a new crate;
//! - [`harness`]: running a policy on a workload (every round recorded) or on one
//!   fixture snapshot, optionally beside a second policy shown the same snapshots;
//! - [`trace`]: the decision trace as reviewable text, and its diff against a golden copy;
//! - [`expect`]: expectations an author writes about a run, and their verdicts;
//! - [`fixture`]: snapshot files for single-decision tests.
//!
//! Nothing here changes how a policy is run: the harness drives the same control loop,
//! simulator, sandbox and validator as `switchyard simulate` and the controller.

pub mod expect;
pub mod fixture;
pub mod harness;
pub mod scaffold;
pub mod trace;
pub mod vendor;
