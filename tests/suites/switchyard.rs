//! The `switchyard` crate's integration tests, one binary (as `tests/suites/sim.rs`
//! explains): the command, the live controller, its API and console, the docs and
//! examples run as written, the crate floors, no import cycle in any crate.
//! `tests/authoring.rs` stays a binary of its own: it moves the process into the
//! repository's root, where the relative paths of the others (`cli::...`) would no
//! longer resolve.

#[path = "../support/compile_cache.rs"]
mod compile_cache;
#[path = "../live/mod.rs"]
mod live;
#[path = "../support/registry_server.rs"]
mod registry_server;
#[path = "../support/mod.rs"]
mod support;

#[path = "../api_fuzz.rs"]
mod api_fuzz;
#[path = "../cli.rs"]
mod cli;
#[path = "../console.rs"]
mod console;
#[path = "../controller.rs"]
mod controller;
#[path = "../ctl.rs"]
mod ctl;
#[path = "../docs.rs"]
mod docs;
#[path = "../examples.rs"]
mod examples;
#[path = "../floors.rs"]
mod floors;
#[path = "../kube_controller.rs"]
mod kube_controller;
#[path = "../module_cycles.rs"]
mod module_cycles;
#[path = "../one_writer.rs"]
mod one_writer;
#[path = "../policy_dir.rs"]
mod policy_dir;
#[path = "../policy_registry.rs"]
mod policy_registry;
#[path = "../trust.rs"]
mod trust;
