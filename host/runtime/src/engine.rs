//! The engine ([`Runtime`]): compiling a component, checking that it implements the
//! policy world at this host's version ([`check_world`]), pre-linking it and keeping it
//! by content digest, so a component is compiled once however often it is loaded. With
//! `quick_first` a new component runs Winch's code at once and moves to Cranelift's
//! when a background compile is done (`tier.rs`). The sandbox's limits are set here,
//! once, in the engine's configuration and its instance pool. It does not call
//! policies beyond the `describe` of loading (the module does: `module.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::call::{Flavor, Pre, SchedulerFunctions};
use crate::contract::{
    ACCEPTED_EXPORTS, CONTRACT_PACKAGE, CONTRACT_VERSION, INCREMENTAL_SCHEDULER_EXPORT,
    SCHEDULER_EXPORT, bindings, incremental_bindings,
};
use crate::epoch;
use crate::error::LoadError;
use crate::limits::SandboxLimits;
use crate::module::{Compiled, PolicyModule};
use crate::sandbox;
use crate::tier::{self, Compiler};
use switchyard_core::ComponentDigest;

/// How the runtime is set up.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    /// Limits for every call.
    pub limits: SandboxLimits,
    /// Directory for wasmtime's on-disk cache of compiled code; `None` keeps compiled
    /// code in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Calls run with no epoch deadline and no memory cap. Only for measuring what the
    /// sandbox costs (`benches/decision.rs`): a policy that loops would hang its caller.
    pub unsandboxed: bool,
    /// A component compiled for the first time answers from Winch's quickly compiled
    /// code while Cranelift compiles it in the background (`runtime/tier.rs`): the controller's
    /// hot swap. Offline runs leave it off, since they make many calls per load.
    pub quick_first: bool,
}

/// Compiles, checks and caches policy components; cheap to clone and share.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    optimised: tier::Tier,
    quick: Option<tier::Tier>,
    limits: SandboxLimits,
    unsandboxed: bool,
    digest_to_module: Mutex<HashMap<ComponentDigest, Arc<PolicyModule>>>,
    _ticker: epoch::Ticker,
}

/// The environment variable that makes the engine write `/tmp/perf-<pid>.map`, so
/// `perf report` names the compiled policy's functions (a component built with its
/// symbols: the `guest` profile strips them). Any value but empty or `0` turns it on.
const PERF_MAP_VAR: &str = "SWITCHYARD_PERF_MAP";

fn perf_map_wanted() -> bool {
    std::env::var(PERF_MAP_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

impl Runtime {
    /// An engine with epoch interruption and the policy world's imports linked.
    pub fn new(options: RuntimeOptions) -> Result<Self, LoadError> {
        let mut config = Config::new();
        config.epoch_interruption(!options.unsandboxed);
        if perf_map_wanted() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool()));
        if let Some(dir) = &options.cache_dir {
            let cache = wasmtime::CacheConfig::new().with_directory(dir).clone();
            let cache =
                wasmtime::Cache::new(cache).map_err(|e| LoadError::Engine(e.to_string()))?;
            config.cache(Some(cache));
        }
        let optimised = tier::Tier::cranelift(&config)?;
        let quick = match options.quick_first {
            true => Some(tier::Tier::winch(!options.unsandboxed)?),
            false => None,
        };
        let ticker = epoch::Ticker::start(
            std::iter::once(&optimised)
                .chain(&quick)
                .map(|t| t.engine.clone())
                .collect(),
        );
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                optimised,
                quick,
                limits: options.limits,
                unsandboxed: options.unsandboxed,
                digest_to_module: Mutex::new(HashMap::new()),
                _ticker: ticker,
            }),
        })
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> SandboxLimits {
        self.inner.limits
    }

    /// Compiles (or finds in the cache) and checks a component; `source_name` names it
    /// in errors (a file path, `builtin:specon`, an upload). With `quick_first`, a new
    /// component comes back compiled by Winch and moves to Cranelift's code when the
    /// background compile is done.
    pub fn load(&self, bytes: &[u8], source_name: &str) -> Result<Arc<PolicyModule>, LoadError> {
        let digest = ComponentDigest::of(bytes);
        if let Some(module) = self.inner.digest_to_module.lock().unwrap().get(&digest) {
            return Ok(module.clone());
        }
        let first_tier = self.inner.quick.as_ref().unwrap_or(&self.inner.optimised);
        let module = Arc::new(self.compile(first_tier, bytes, digest, source_name)?);
        self.inner
            .digest_to_module
            .lock()
            .unwrap()
            .insert(digest, module.clone());
        if first_tier.compiler != Compiler::Cranelift {
            self.optimise_in_background(&module, bytes.to_vec(), source_name);
        }
        Ok(module)
    }

    /// Compiles and checks a component with `compiler` alone, outside the digest cache
    /// and with no background compile: for measuring one compiler's code
    /// (`benches/hot_swap.rs`). Winch needs a runtime made with `quick_first`.
    pub fn load_with(
        &self,
        compiler: Compiler,
        bytes: &[u8],
        source_name: &str,
    ) -> Result<PolicyModule, LoadError> {
        let tier = match compiler {
            Compiler::Cranelift => &self.inner.optimised,
            Compiler::Winch => self.inner.quick.as_ref().ok_or_else(|| {
                LoadError::Engine("this runtime has no Winch tier (quick_first is off)".into())
            })?,
        };
        self.compile(tier, bytes, ComponentDigest::of(bytes), source_name)
    }

    /// Compiles `bytes` with Cranelift on a thread of its own and moves `module` onto
    /// that code. A failure leaves the module on its quick code and is logged.
    fn optimise_in_background(&self, module: &Arc<PolicyModule>, bytes: Vec<u8>, name: &str) {
        let (runtime, module, owned_name) = (self.clone(), module.clone(), name.to_string());
        let spawned = std::thread::Builder::new()
            .name("switchyard-compile".into())
            .spawn(move || {
                let name = owned_name;
                let started = std::time::Instant::now();
                match runtime.compile_pre(&runtime.inner.optimised, &bytes, &name) {
                    Ok(compiled) => {
                        module.move_to(compiled);
                        tracing::info!(
                            policy = %name,
                            digest = %module.digest().short(),
                            compile_ms = started.elapsed().as_millis() as u64,
                            "Cranelift's code replaces Winch's"
                        );
                    }
                    Err(e) => tracing::warn!(policy = %name, "Cranelift did not compile it: {e}"),
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(policy = %name, "no thread to compile it with Cranelift: {e}");
        }
    }

    fn compile(
        &self,
        tier: &tier::Tier,
        bytes: &[u8],
        digest: ComponentDigest,
        source_name: &str,
    ) -> Result<PolicyModule, LoadError> {
        let compiled = self.compile_pre(tier, bytes, source_name)?;
        PolicyModule::load(
            compiled,
            digest,
            self.inner.limits,
            self.inner.unsandboxed,
            source_name,
        )
    }

    /// Compiles, checks the world and pre-links `bytes` on `tier`.
    fn compile_pre(
        &self,
        tier: &tier::Tier,
        bytes: &[u8],
        source_name: &str,
    ) -> Result<Compiled, LoadError> {
        check_is_component(bytes, source_name)?;
        let component =
            Component::new(&tier.engine, bytes).map_err(|e| LoadError::NotAComponent {
                source_name: source_name.into(),
                reason: format!("{e:#}"),
            })?;
        let flavor = check_world(&tier.engine, &component, source_name)?;
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld {
            source_name: source_name.into(),
            reason: format!("{e:#}"),
            expected: ACCEPTED_EXPORTS,
        };
        let instance_pre = tier
            .linker
            .instantiate_pre(&component)
            .map_err(wrong_world)?;
        // The generated pre-instances type-check the exports against the contract.
        let export = match flavor {
            Flavor::Whole => {
                bindings::PolicyPre::new(instance_pre.clone()).map_err(wrong_world)?;
                SCHEDULER_EXPORT
            }
            Flavor::Incremental => {
                incremental_bindings::IncrementalPolicyPre::new(instance_pre.clone())
                    .map_err(wrong_world)?;
                INCREMENTAL_SCHEDULER_EXPORT
            }
        };
        let functions =
            SchedulerFunctions::of(&component, export).ok_or_else(|| LoadError::WrongWorld {
                source_name: source_name.into(),
                reason: format!("`{export}` lacks describe, configure or decide"),
                expected: ACCEPTED_EXPORTS,
            })?;
        let pre = Pre {
            instance_pre,
            flavor,
            functions,
        };
        Ok(Compiled {
            pre,
            compiler: tier.compiler,
        })
    }
}

/// Instances that may exist at the same time on one runtime: the calls running (the
/// decision thread, a shadow policy, uploads being described and configured) and the
/// instances kept between rounds, one per policy slot. An instance beyond it fails like
/// a trap, so it is far above what a controller holds at once.
const CONCURRENT_CALLS: u32 = 64;

/// Guest memory kept mapped between calls, per pool slot: wasmtime zeroes the pages a
/// call dirtied instead of decommitting them, so the next call does not fault them in
/// again, while bounding what an idle slot keeps resident (`docs/performance.md`,
/// "Controller footprint", has the measurement behind the size).
const KEEP_RESIDENT: usize = 4 << 20;

/// A `policy` component gets a fresh instance per call (no memory survives a call), so
/// instances come from a pool of pre-reserved slots rather than from `mmap` and
/// `munmap` per call, which would otherwise dominate short calls (`docs/performance.md`).
/// The caps stay the
/// [`sandbox::MemoryCap`] limiter's: the pool's per-memory limit stays wasmtime's (4 GiB,
/// all a 32-bit memory can address) and its table limit is the limiter's, so the
/// limiter always refuses first and a refusal is still reported as out-of-memory.
fn pool() -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(CONCURRENT_CALLS)
        .total_core_instances(CONCURRENT_CALLS * 8)
        .total_memories(CONCURRENT_CALLS)
        .total_tables(CONCURRENT_CALLS * 8)
        .table_elements(sandbox::TABLE_ELEMENT_LIMIT)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(1 << 20);
    pool
}

/// Refuses core modules and non-Wasm bytes with a message that says which it is.
fn check_is_component(bytes: &[u8], source_name: &str) -> Result<(), LoadError> {
    let refuse = |reason: &str| LoadError::NotAComponent {
        source_name: source_name.into(),
        reason: reason.into(),
    };
    if !bytes.starts_with(b"\0asm") {
        return Err(refuse(
            "the file does not start with the WebAssembly magic bytes",
        ));
    }
    if wasmparser::Parser::is_core_wasm(bytes) {
        return Err(refuse(
            "it is a core WebAssembly module; build the policy for wasm32-wasip2 (or wrap it \
             with `wasm-tools component new`) so it becomes a component",
        ));
    }
    Ok(())
}

/// Checks the exports before linking, so a wrong version or another world gets a
/// message naming what was found instead of a type mismatch deep in the linker.
fn check_world(
    engine: &Engine,
    component: &Component,
    source_name: &str,
) -> Result<Flavor, LoadError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if exports.iter().any(|e| e == SCHEDULER_EXPORT) {
        return Ok(Flavor::Whole);
    }
    if exports.iter().any(|e| e == INCREMENTAL_SCHEDULER_EXPORT) {
        return Ok(Flavor::Incremental);
    }
    let reason = match exports.iter().find(|e| {
        e.starts_with("switchyard:policy/scheduler")
            || e.starts_with("switchyard:policy/incremental-scheduler")
    }) {
        Some(other) => {
            let built = other
                .rsplit_once('@')
                .map_or("an unversioned draft", |(_, version)| version);
            format!(
                "it was built against switchyard:policy@{built} (it exports `{other}`), and \
                 this host speaks {CONTRACT_PACKAGE}, whose types differ: rebuild it against the \
                 {CONTRACT_PACKAGE} WIT (a Rust policy: the current switchyard-policy-sdk, then \
                 `cargo build --release --target wasm32-wasip2`; a Python one: the current \
                 Python SDK, then `componentize-py -w \
                 switchyard:policy/incremental-policy@{CONTRACT_VERSION} ...`; a JavaScript \
                 one: the current JavaScript SDK's `bin/build.js`; see \
                 docs/policy-authoring.md)"
            )
        }
        None if exports.is_empty() => "it exports nothing".to_string(),
        None => format!("it exports {}", exports.join(", ")),
    };
    Err(LoadError::WrongWorld {
        source_name: source_name.into(),
        reason,
        expected: ACCEPTED_EXPORTS,
    })
}
