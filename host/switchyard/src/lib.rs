//! switchyard: the `switchyard` command, over the host crates (`docs/architecture.md`).
//! The command itself (`src/main.rs` and its `cli` module) parses flags, calls the crate
//! that does the work and prints what it returns: `switchyard-sim` for `simulate`,
//! `switchyard-authoring` for `policy new`, `policy sdk` and `policy test`,
//! `switchyard-controller` for `run` and `ctl`, `switchyard-control` for `replay`.
//!
//! This library holds what the command draws and the tests check without running it:
//!
//! - `plot`: the plots `switchyard simulate --out` draws ([`write_plots`], [`PLOTS`]).
//!
//! It must not hold logic a lower crate could own.

mod plot;

pub use plot::{PLOTS, PlotError, write_plots};
