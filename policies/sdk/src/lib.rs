//! Guest-side SDK for switchyard scheduling policies.
//!
//! The one `generate!` of the project's WIT (`wit/policy.wit`) lives here, so every policy
//! sees the same types, plus the helpers every shipped policy needs:
//!
//! - [`settings`]: parameter specs with defaults and docs, checked and typed;
//! - [`state`]: the opaque state blob, encoded with serde;
//! - [`cluster`]: free resources per node, which nodes fit a task, packing a gang;
//! - [`log`]: the host's log import, usable from native unit tests too;
//! - [`progress`]: normalised evaluation series (SpeCon's gain, FlowCon's progress);
//! - [`placement`]: initial placements shared by several policies (even spread,
//!   least-allocated pod by pod);
//! - `testing` (feature `test-support`): fixture builders for native unit tests.
//!
//! A policy implements [`bindings::exports::switchyard::policy::scheduler::Guest`] and
//! registers it with [`export!`]:
//!
//! ```ignore
//! struct MyPolicy;
//! impl switchyard_policy_sdk::Guest for MyPolicy { /* describe, configure, decide */ }
//! // Export names contain `:`, which only the component linker accepts, so native
//! // builds (unit tests) leave the export out.
//! #[cfg(target_arch = "wasm32")]
//! switchyard_policy_sdk::export!(MyPolicy with_types_in switchyard_policy_sdk::bindings);
//! ```

pub mod cluster;
pub mod log;
pub mod placement;
pub mod progress;
pub mod settings;
pub mod state;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

/// Bindings generated from `wit/policy.wit`.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "switchyard:policy/policy@0.1.0",
        default_bindings_module: "switchyard_policy_sdk::bindings",
        pub_export_macro: true,
        export_macro_name: "export",
    });
}

pub use bindings::export;
pub use bindings::exports::switchyard::policy::scheduler::Guest;
pub use bindings::switchyard::policy::types::*;
