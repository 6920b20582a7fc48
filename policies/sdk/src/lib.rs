//! Guest-side SDK for switchyard scheduling policies.
//!
//! The one `generate!` of the project's WIT (`wit/policy.wit`) lives here, so every policy
//! sees the same types, plus the helpers every shipped policy needs:
//!
//! - [`settings`]: parameter specs with defaults and docs, checked and typed;
//! - [`state`]: the opaque state blob, encoded with serde;
//! - [`shown`]: the labels already shown, so a label goes out only when it changes;
//! - [`cluster`]: free resources per node, which nodes fit a task, packing a gang;
//! - [`changes`]: which jobs a kept instance's call changed, and values kept per job
//!   that follow them;
//! - [`log`]: the host's log import, usable from native unit tests too;
//! - [`memcmp`]: C's `memcmp` and `bcmp` for Wasm guests and the SDK's byte equality, a
//!   word at a time (wasi-libc's compare byte by byte);
//! - [`progress`]: normalised evaluation series (SpeCon's gain, FlowCon's progress);
//! - [`placement`]: initial placements shared by several policies (least-allocated pod
//!   by pod, one job's place in the even spread);
//! - [`spread`]: SpeCon's even spread over the whole queue, kept from call to call;
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

pub mod changes;
pub mod cluster;
mod entries;
pub mod incremental;
pub mod log;
pub mod memcmp;
pub mod placement;
pub mod progress;
pub mod settings;
pub mod shown;
pub mod spread;
pub mod state;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

/// Bindings generated from `wit/policy.wit`.
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "switchyard:policy/policy@0.3.0",
        default_bindings_module: "switchyard_policy_sdk::bindings",
        pub_export_macro: true,
        export_macro_name: "export",
    });
}

pub use bindings::export;
pub use bindings::exports::switchyard::policy::scheduler::Guest;
pub use bindings::switchyard::policy::types::*;
pub use incremental::IncrementalGuest;
pub use incremental::bindings::export_incremental;

/// Declares a policy's Wasm binding from a module with plain-Rust
/// `describe()`, `configure(&[Setting])` and `decide(&[Setting], &Snapshot, &[u8])`
/// functions: a unit struct implementing [`Guest`] and [`IncrementalGuest`] by
/// delegation, exported as the `incremental-policy` world, so the host may keep the
/// instance and send only what changed ([`incremental`] applies it; the policy still
/// sees a whole [`Snapshot`]). The export only exists on `wasm32`, because a native cdylib
/// cannot carry the WIT export names (`switchyard:policy/...`); the native build is for
/// unit tests and benches.
///
/// `describe()` also says whether the policy reads jobs' loss series
/// ([`Description::reads_loss`]): a policy that says false is sent every series empty
/// and no loss updates, so a round in which jobs only reported progress changes nothing
/// it holds. Say true whenever a decision depends on `job.loss`.
///
/// ```ignore
/// pub mod policy; // describe, configure, decide
/// switchyard_policy_sdk::policy_binding!(MyPolicy, policy);
/// ```
#[macro_export]
macro_rules! policy_binding {
    ($binding:ident, $module:ident) => {
        /// The Wasm binding of the policy module.
        pub struct $binding;

        impl $crate::Guest for $binding {
            fn describe() -> $crate::Description {
                $module::describe()
            }

            fn configure(
                settings: ::std::vec::Vec<$crate::Setting>,
            ) -> ::std::result::Result<::std::vec::Vec<$crate::Setting>, ::std::string::String>
            {
                $module::configure(&settings)
            }

            fn decide(
                settings: ::std::vec::Vec<$crate::Setting>,
                snapshot: $crate::Snapshot,
                state: ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<$crate::Decision, ::std::string::String> {
                $module::decide(&settings, &snapshot, &state)
            }
        }

        impl $crate::IncrementalGuest for $binding {
            fn describe() -> $crate::Description {
                <$binding as $crate::Guest>::describe()
            }

            fn configure(
                settings: ::std::vec::Vec<$crate::Setting>,
            ) -> ::std::result::Result<::std::vec::Vec<$crate::Setting>, ::std::string::String>
            {
                <$binding as $crate::Guest>::configure(settings)
            }

            fn decide(
                settings: ::std::vec::Vec<$crate::Setting>,
                change: $crate::SnapshotDelta,
                state: ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<$crate::Decision, ::std::string::String> {
                $crate::changes::with_applied(change, |snapshot| {
                    $module::decide(&settings, snapshot, &state)
                })?
            }
        }

        #[cfg(target_arch = "wasm32")]
        $crate::export_incremental!($binding with_types_in $crate::incremental::bindings);
    };
}
