//! The floor every other host crate stands on: what a cluster snapshot and a policy's
//! decision are, how a snapshot changes between rounds, and whether a decision is valid.
//!
//! - [`model`]: the host's own view of a cluster and of a policy's decision; every other
//!   crate speaks these types.
//! - [`delta`]: what a kept policy instance holds and the change that brings it to the
//!   current snapshot.
//! - [`validate`]: checking a decision against the snapshot it was made for.
//! - [`names`]: the syntax of policy names and job labels (Kubernetes').
//! - [`snapshot_lowering!`]: the one lowering of a snapshot to the WIT types, shared by
//!   the host's bindings and the guest SDK's.
//!
//! It knows nothing of WebAssembly, the simulator or Kubernetes: it names no generated
//! binding type and depends on no engine.

pub mod delta;
mod lowering;
pub mod model;
pub mod names;
pub mod validate;
