//! Loading, checking and calling policy components: the sandbox every policy runs in.
//! Its modules are private; the names below are re-exported at the crate root.
//!
//! - `engine`: [`Runtime`], the engine: compiling a component, checking that it
//!   implements the policy world at this host's version, pre-linking it and keeping it
//!   by content digest; [`RuntimeOptions`] says how it is set up.
//! - `module`: [`PolicyModule`], one loaded policy, and how each call on it runs (a
//!   fresh store, the memory cap, the epoch deadline, a failure named).
//! - `call`: one call into a component: which world it implements, an instance of it
//!   and the typed calls of `describe`, `configure` and `decide`, each answer read
//!   under the budget.
//! - `session`: [`Session`], a kept instance of an incremental policy, handed only what
//!   changed since its last call.
//! - `limits`: what every call runs under ([`SandboxLimits`], [`ResultBudget`],
//!   [`LogRate`]).
//! - `log_budget`: what a policy may log over time, one account per [`Session`].
//! - `error`: [`LoadError`] and [`PolicyError`], each naming the component or policy.
//! - `contract`: the one `bindgen!` of `wit/policy.wit` and the conversions between its
//!   generated types and the model of [`switchyard_core`]; no other module names a
//!   generated type. [`CONTRACT_PACKAGE`] is the WIT package a policy must export.
//! - `sandbox`: what a guest can reach while it runs (its memory cap, its log, its
//!   clock and randomness).
//! - `tier` and `epoch`: the compilers behind a module ([`Compiler`]) and the clock
//!   behind call deadlines.
//! - `registry`: the policies shipped inside the binary, addressable by name
//!   ([`BUILTIN_POLICIES`], [`builtin`]), and `.wasm` files on disk ([`PolicyRef`]).
//!
//! A component is compiled once per content digest and kept pre-linked
//! ([`wasmtime::component::InstancePre`]). A `policy` component gets a fresh instance in
//! a fresh store for every call, so no guest memory survives between calls and a policy
//! is a function of (settings, snapshot, state) alone. An `incremental-policy`
//! component called through a [`Session`] keeps its instance and receives only what
//! changed since its last call ([`switchyard_core::Change`]); it reaches the same
//! snapshot, and any failure throws the instance away. Calls run under an epoch deadline
//! and a memory cap set once in the engine; a failing call is a [`PolicyError`] naming
//! the policy, never a crash. Compiled code is also cached on disk by wasmtime, keyed
//! by the component's content. With `quick_first` (the controller) a new component is
//! compiled by Winch first and by Cranelift in the background, so an upload answers
//! without waiting for the optimising compiler and runs optimised code from its next
//! rounds on.

mod call;
mod contract;
mod engine;
mod epoch;
mod error;
mod limits;
mod log_budget;
mod module;
mod printable;
mod registry;
mod sandbox;
mod session;
mod tier;

pub use contract::{CONTRACT_PACKAGE, delta_to_wit, snapshot_to_wit};
pub use engine::{Runtime, RuntimeOptions};
pub use error::{CallDeadline, LoadError, PolicyError};
pub use limits::{LogRate, ResultBudget, SandboxLimits};
pub use module::PolicyModule;
pub use registry::{BUILTIN_POLICIES, BuiltinPolicy, PolicyRef, RegistryError, builtin};
pub use session::Session;
pub use tier::Compiler;
