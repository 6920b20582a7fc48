//! The two compilers behind a policy module: Cranelift for the code that runs, and
//! optionally Winch, a baseline compiler, for the first calls of a new upload.
//!
//! Winch compiles several times faster than Cranelift and emits slower code
//! (`docs/performance.md` has the figures). With `quick_first` a module compiled for the
//! first time answers from Winch's code at once while Cranelift compiles the same bytes
//! on a background thread, and every call after the swap runs Cranelift's code (a kept
//! instance starts over from a reset, as when a session moves to another component).

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Strategy};

use crate::contract::bindings;
use crate::error::LoadError;
use crate::sandbox::GuestState;

/// Which compiler produced a module's current code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiler {
    /// Wasmtime's optimising compiler: the code a module runs once compiled.
    Cranelift,
    /// Wasmtime's baseline compiler: a new upload's first calls, until Cranelift is done.
    Winch,
}

/// An engine and the policy world's imports linked into it.
pub(crate) struct Tier {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<GuestState>,
    pub(crate) compiler: Compiler,
}

impl Tier {
    /// The optimising tier, from the runtime's `config`.
    pub(crate) fn cranelift(config: &Config) -> Result<Self, LoadError> {
        Self::new(config, Compiler::Cranelift)
    }

    /// The quick tier: Winch with the same sandbox, instances allocated on demand (it
    /// serves a few calls per upload, not worth a second pool of reserved slots), no
    /// disk cache (compiling is as cheap as reading it back).
    pub(crate) fn winch(sandboxed: bool) -> Result<Self, LoadError> {
        let mut config = Config::new();
        config
            .strategy(Strategy::Winch)
            .epoch_interruption(sandboxed)
            .allocation_strategy(InstanceAllocationStrategy::OnDemand);
        Self::new(&config, Compiler::Winch)
    }

    fn new(config: &Config, compiler: Compiler) -> Result<Self, LoadError> {
        let engine_error = |e: wasmtime::Error| LoadError::Engine(e.to_string());
        let engine = Engine::new(config).map_err(engine_error)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(engine_error)?;
        bindings::Policy::add_to_linker::<_, HasSelf<GuestState>>(&mut linker, |s| s)
            .map_err(engine_error)?;
        Ok(Self {
            engine,
            linker,
            compiler,
        })
    }
}
