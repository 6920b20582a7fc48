//! Loading, checking and calling policy components: the sandbox every policy runs in.
//! Its modules are private; the names below are re-exported at the crate root.
//!
//! - `contract`: the one `bindgen!` of `wit/policy.wit` and the conversions between its
//!   generated types and the model of [`switchyard_core`]; no other module names a
//!   generated type. [`CONTRACT_PACKAGE`] is the WIT package a policy must export.
//! - `registry`: the policies shipped inside the binary, addressable by name
//!   ([`BUILTIN_POLICIES`], [`builtin`]), and `.wasm` files on disk ([`PolicyRef`]).
//! - this module: [`Runtime`] (the engine, compiling and caching components by digest)
//!   and [`PolicyModule`] (one loaded policy, called with a snapshot); [`Session`] (a
//!   kept instance of an incremental policy); [`PolicyError`] and [`LoadError`].
//!
//! A component is compiled once per content digest and kept pre-linked
//! ([`wasmtime::component::InstancePre`]). A `policy` component gets a fresh instance in
//! a fresh store for every call, so no guest memory survives between calls and a policy
//! is a function of (settings, snapshot, state) alone. An `incremental-policy`
//! component called through a [`Session`] keeps its instance and receives only what
//! changed since its last call ([`switchyard_core::Change`]); it reaches the same
//! snapshot, and any failure throws the instance away. Calls run under an epoch deadline
//! and a memory cap set once here; a failing call is a [`PolicyError`] naming the
//! policy, never a crash.
//! Compiled code is also cached on disk by wasmtime, keyed by the component's content.
//! With `quick_first` (the controller) a new component is compiled by Winch first and by
//! Cranelift in the background (`tier.rs`), so an upload answers within tens of
//! milliseconds and runs optimised code from its next rounds on.

mod contract;
mod epoch;
mod error;
mod registry;
mod sandbox;
mod session;
mod tier;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use wasmtime::component::{Component, ComponentExportIndex, InstancePre};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};

pub use contract::{CONTRACT_PACKAGE, delta_to_wit, snapshot_to_wit};
pub use error::{CallDeadline, LoadError, PolicyError};
pub use registry::{BUILTIN_POLICIES, BuiltinPolicy, PolicyRef, RegistryError, builtin};
pub use session::Session;
pub use tier::Compiler;

use crate::contract::metered::{self, Items, Text};
use crate::contract::{
    ACCEPTED_EXPORTS, CONTRACT_VERSION, INCREMENTAL_SCHEDULER_EXPORT, SCHEDULER_EXPORT, bindings,
    incremental_bindings,
};
use sandbox::GuestState;
use switchyard_core::{Change, ComponentDigest, Decision, Description, Settings, Snapshot};

/// Sandbox limits applied to every policy call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SandboxLimits {
    /// Wall time a single call may take before it is stopped.
    pub deadline: Duration,
    /// Wall time the first call of a kept instance (an `incremental-policy` component
    /// called through a [`Session`]) may take: instantiation and the whole cluster as a
    /// reset. It is paid once per instance and grows with the cluster, while later calls
    /// grow with what changed, so it gets more room than [`SandboxLimits::deadline`]
    /// (never less). Under the round's deadline, a busy machine that made one round
    /// overrun would make every fresh instance's first call overrun too, and the
    /// policy would never decide again.
    pub priming_deadline: Duration,
    /// Linear memory a policy instance may grow to.
    pub memory_bytes: usize,
    /// Largest state blob a policy may hand back.
    pub state_bytes: usize,
    /// What else one answer may hold, and what one call may log.
    pub budget: ResultBudget,
    /// The soonest a policy may ask to be called again, seconds of cluster time: a
    /// shorter `next-call-after` is raised to it, so no policy can make the loop spin.
    pub min_call_interval: f64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(100),
            priming_deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            state_bytes: 16 << 20,
            budget: ResultBudget::default(),
            min_call_interval: 1.0,
        }
    }
}

/// How much a policy may hand the host in one call. The host counts while it reads the
/// answer out of the policy's memory and stops at the first item over budget, so a
/// hostile answer costs the host at most the budget; the call then fails with
/// [`PolicyError::InvalidResult`] naming the budget, and the fallback decides. The
/// defaults leave room for a 5,000-node cluster placing a burst of 10,000 gangs in one
/// round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultBudget {
    /// Actions in one decision, plus the entries of their lists (a placement's
    /// assignments, a scale's target nodes), plus a description's parameters or a
    /// configure answer's settings.
    pub actions: usize,
    /// Labels in one decision.
    pub labels: usize,
    /// Bytes of all the strings of one answer together (ids, reasons, labels).
    pub string_bytes: usize,
    /// Log lines one call may write; the rest are counted and summarised in one line.
    pub log_lines: usize,
    /// Bytes of log one call may write.
    pub log_bytes: usize,
}

impl Default for ResultBudget {
    fn default() -> Self {
        Self {
            actions: 200_000,
            labels: 100_000,
            string_bytes: 32 << 20,
            log_lines: 1_000,
            log_bytes: 256 << 10,
        }
    }
}

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
pub const PERF_MAP_VAR: &str = "SWITCHYARD_PERF_MAP";

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
                            digest = %module.digest.short(),
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
        let pre = self.compile_pre(tier, bytes, source_name)?;
        let mut module = PolicyModule {
            compiled: RwLock::new(Arc::new(pre)),
            digest,
            limits: self.inner.limits,
            unsandboxed: self.inner.unsandboxed,
            description: Description {
                name: source_name.to_string(),
                version: String::new(),
                summary: String::new(),
                parameters: vec![],
                reads_loss: true,
            },
        };
        module.description = module.describe().map_err(|source| LoadError::Describe {
            source_name: source_name.into(),
            source,
        })?;
        switchyard_core::check_policy_name(module.name()).map_err(|message| {
            LoadError::BadName {
                source_name: source_name.into(),
                message,
            }
        })?;
        Ok(module)
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

/// Which of the contract's worlds a component implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavor {
    /// `policy`: the whole snapshot on every call.
    Whole,
    /// `incremental-policy`: what changed since the instance's last call.
    Incremental,
}

/// A pre-linked component of either world, and where its scheduler's functions are.
struct Pre {
    instance_pre: InstancePre<GuestState>,
    flavor: Flavor,
    functions: SchedulerFunctions,
}

/// The scheduler interface's functions, found once per compiled component.
#[derive(Clone, Copy)]
struct SchedulerFunctions {
    describe: ComponentExportIndex,
    configure: ComponentExportIndex,
    decide: ComponentExportIndex,
}

impl SchedulerFunctions {
    fn of(component: &Component, export: &str) -> Option<Self> {
        let interface = component.get_export_index(None, export)?;
        let find = |name: &str| component.get_export_index(Some(&interface), name);
        Some(Self {
            describe: find("describe")?,
            configure: find("configure")?,
            decide: find("decide")?,
        })
    }
}

impl Pre {
    fn engine(&self) -> &Engine {
        self.instance_pre.engine()
    }

    /// Instantiates the component into `store` (under its deadline).
    fn instantiate(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Exports> {
        let instance = self.instance_pre.instantiate(&mut *store)?;
        Ok(Exports {
            instance,
            flavor: self.flavor,
            functions: self.functions,
        })
    }
}

/// Why a call produced no answer the host can use.
enum CallError {
    /// The guest trapped, overran its deadline or its memory.
    Wasm(wasmtime::Error),
    /// The answer overran a budget (the message names it).
    OverBudget(String),
}

impl From<wasmtime::Error> for CallError {
    fn from(error: wasmtime::Error) -> Self {
        CallError::Wasm(error)
    }
}

/// A policy's refusal: its message.
type Refusal = String;

/// An instance of either world. Every answer is lifted under the sandbox's
/// [`ResultBudget`] ([`metered`]), never by the generated bindings.
struct Exports {
    instance: wasmtime::component::Instance,
    flavor: Flavor,
    functions: SchedulerFunctions,
}

type WitSetting = bindings::switchyard::policy::types::Setting;
type Answer<T> = Result<T, Text>;

impl Exports {
    fn describe(
        &self,
        store: &mut Store<GuestState>,
        limits: &SandboxLimits,
    ) -> Result<Description, CallError> {
        let func = self
            .instance
            .get_typed_func::<(), (metered::Description,)>(&mut *store, self.functions.describe)?;
        let (raw,) = metered_call(limits, || func.call(&mut *store, ()))?;
        Ok(raw.into())
    }

    fn configure(
        &self,
        store: &mut Store<GuestState>,
        settings: &[WitSetting],
        limits: &SandboxLimits,
    ) -> Result<Result<Settings, Refusal>, CallError> {
        let func = self
            .instance
            .get_typed_func::<(&[WitSetting],), (Answer<Items<metered::Setting>>,)>(
                &mut *store,
                self.functions.configure,
            )?;
        let (answer,) = metered_call(limits, || func.call(&mut *store, (settings,)))?;
        Ok(answer.map(metered::settings).map_err(|m| m.0))
    }

    /// `decide` on the whole snapshot; an incremental policy gets it as a reset. Jobs'
    /// loss series go empty unless the policy `reads_loss`.
    fn decide_whole(
        &self,
        store: &mut Store<GuestState>,
        settings: &[WitSetting],
        snapshot: &Snapshot,
        state: &[u8],
        reads_loss: bool,
        limits: &SandboxLimits,
    ) -> Result<Result<Decision, Refusal>, CallError> {
        match self.flavor {
            Flavor::Whole => {
                let func = self.instance.get_typed_func::<(
                    &[WitSetting],
                    &bindings::switchyard::policy::types::Snapshot,
                    &[u8],
                ), (Answer<metered::Decision>,)>(
                    &mut *store, self.functions.decide
                )?;
                let snapshot = contract::snapshot_for(snapshot, reads_loss);
                let (answer,) = metered_call(limits, || {
                    func.call(&mut *store, (settings, &snapshot, state))
                })?;
                Ok(answer.map(Into::into).map_err(|m| m.0))
            }
            Flavor::Incremental => {
                let reset = contract::delta_for(snapshot, &Change::Reset, reads_loss);
                self.decide_change(store, settings, &reset, state, limits)
            }
        }
    }

    /// `decide` of an incremental policy on `change`, lowered from what it holds to now.
    fn decide_change(
        &self,
        store: &mut Store<GuestState>,
        settings: &[WitSetting],
        change: &bindings::switchyard::policy::types::SnapshotDelta,
        state: &[u8],
        limits: &SandboxLimits,
    ) -> Result<Result<Decision, Refusal>, CallError> {
        let func = self.instance.get_typed_func::<(
            &[WitSetting],
            &bindings::switchyard::policy::types::SnapshotDelta,
            &[u8],
        ), (Answer<metered::Decision>,)>(
            &mut *store, self.functions.decide
        )?;
        let (answer,) = metered_call(limits, || func.call(&mut *store, (settings, change, state)))?;
        Ok(answer.map(Into::into).map_err(|m| m.0))
    }
}

/// Makes a call whose answer is lifted under `limits`' budget.
fn metered_call<R>(
    limits: &SandboxLimits,
    call: impl FnOnce() -> wasmtime::Result<R>,
) -> Result<R, CallError> {
    match metered::metered(&limits.budget, limits.state_bytes, call) {
        (_, Some(overrun)) => Err(CallError::OverBudget(overrun)),
        (outcome, None) => Ok(outcome?),
    }
}

/// A component's code from one compiler, pre-linked.
struct Compiled {
    pre: Pre,
    compiler: Compiler,
}

/// A checked, pre-linked policy component, ready to be called.
pub struct PolicyModule {
    /// The code calls run: Winch's until Cranelift's replaces it (`quick_first`).
    /// Each call takes the current one for its whole length.
    compiled: RwLock<Arc<Compiled>>,
    digest: ComponentDigest,
    limits: SandboxLimits,
    unsandboxed: bool,
    description: Description,
}

impl std::fmt::Debug for PolicyModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyModule")
            .field("name", &self.description.name)
            .field("digest", &self.digest.short())
            .finish()
    }
}

impl PolicyModule {
    /// Its content digest.
    pub fn digest(&self) -> ComponentDigest {
        self.digest
    }

    /// What it said about itself when it was loaded.
    pub fn description(&self) -> &Description {
        &self.description
    }

    /// The scheduler interface the component exports: the whole snapshot on every call,
    /// or deltas on a kept instance.
    pub fn world(&self) -> &'static str {
        match self.compiled().pre.flavor {
            Flavor::Whole => SCHEDULER_EXPORT,
            Flavor::Incremental => INCREMENTAL_SCHEDULER_EXPORT,
        }
    }

    /// Which compiler's code the next call runs.
    pub fn compiler(&self) -> Compiler {
        self.compiled().compiler
    }

    /// The code the next call runs.
    fn compiled(&self) -> Arc<Compiled> {
        self.compiled
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Moves later calls onto `compiled` (Cranelift's code, once it is ready).
    fn move_to(&self, compiled: Compiled) {
        *self
            .compiled
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(compiled);
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.description.name
    }

    /// Checks operator settings and returns the effective ones, defaults filled in.
    pub fn configure(&self, settings: &Settings) -> Result<Settings, PolicyError> {
        let wit_settings = contract::settings_to_wit(settings);
        let answer = self.call(0.0, 0, |policy, store| {
            policy.configure(store, &wit_settings, &self.limits)
        })?;
        answer.map_err(|message| self.refused(message))
    }

    /// One decision round on a fresh instance with the whole snapshot. `seed` seeds the
    /// guest's randomness; the same inputs and seed always give the same decision.
    /// [`PolicyModule::decide_in`] is the same round on a kept instance.
    pub fn decide(
        &self,
        settings: &Settings,
        snapshot: &Snapshot,
        state: &[u8],
        seed: u64,
    ) -> Result<Decision, PolicyError> {
        let wit_settings = contract::settings_to_wit(settings);
        let reads_loss = self.description.reads_loss;
        let answer = self.call(snapshot.time, seed, |policy, store| {
            policy.decide_whole(
                store,
                &wit_settings,
                snapshot,
                state,
                reads_loss,
                &self.limits,
            )
        })?;
        self.checked(answer)
    }

    /// Checks what `decide` answered: a refusal or a nonsense next-call time is an
    /// error naming the policy (the budgets were checked while reading it); a next call
    /// sooner than [`SandboxLimits::min_call_interval`] is raised to it.
    fn checked(&self, answer: Result<Decision, Refusal>) -> Result<Decision, PolicyError> {
        let mut decision = answer.map_err(|message| self.refused(message))?;
        if let Some(after) = decision.next_call_after {
            if !(after.is_finite() && after >= 0.0) {
                return Err(self.invalid(format!(
                    "next-call-after must be a non-negative number of seconds, got {after}"
                )));
            }
            decision.next_call_after = Some(after.max(self.limits.min_call_interval));
        }
        Ok(decision)
    }

    fn describe(&self) -> Result<Description, PolicyError> {
        self.call(0.0, 0, |policy, store| policy.describe(store, &self.limits))
    }

    /// An answer the host cannot use, for `message`'s reason.
    fn invalid(&self, message: String) -> PolicyError {
        PolicyError::InvalidResult {
            policy: self.name().to_string(),
            digest: self.digest.short(),
            message,
        }
    }

    /// A new store on `compiled`'s engine under the sandbox limits, for a call at `time`
    /// seeded by `seed`.
    fn new_store(&self, compiled: &Compiled, time: f64, seed: u64) -> Store<GuestState> {
        let state = GuestState::new(
            self.name(),
            self.limits.memory_bytes,
            &self.limits.budget,
            time,
            seed,
        );
        let mut store = Store::new(compiled.pre.engine(), state);
        if !self.unsandboxed {
            store.limiter(|s| s.limiter());
        }
        store
    }

    /// Starts the deadline of one call on `store`.
    fn arm_deadline(&self, store: &mut Store<GuestState>) {
        self.arm(store, CallDeadline::Round(self.limits.deadline));
    }

    /// Starts the deadline of a kept instance's first call on `store`.
    fn arm_priming_deadline(&self, store: &mut Store<GuestState>) {
        let limits = &self.limits;
        self.arm(
            store,
            CallDeadline::Priming(limits.priming_deadline.max(limits.deadline)),
        );
    }

    fn arm(&self, store: &mut Store<GuestState>, deadline: CallDeadline) {
        store.data_mut().deadline = deadline;
        if !self.unsandboxed {
            store.set_epoch_deadline(epoch::ticks_for(deadline.duration()));
            store.epoch_deadline_trap();
        }
    }

    /// Instantiates into a fresh store under the sandbox limits and runs `f`.
    fn call<R>(
        &self,
        time: f64,
        seed: u64,
        f: impl FnOnce(&Exports, &mut Store<GuestState>) -> Result<R, CallError>,
    ) -> Result<R, PolicyError> {
        let compiled = self.compiled();
        let mut store = self.new_store(&compiled, time, seed);
        self.arm_deadline(&mut store);
        let outcome = compiled
            .pre
            .instantiate(&mut store)
            .map_err(CallError::Wasm)
            .and_then(|policy| f(&policy, &mut store));
        store.data_mut().end_call();
        outcome.map_err(|error| self.failed(error, store.data()))
    }

    /// The [`PolicyError`] for a call that failed with `error`.
    fn failed(&self, error: CallError, state: &GuestState) -> PolicyError {
        match error {
            CallError::Wasm(error) => self.classify(error, state),
            CallError::OverBudget(message) => self.invalid(message),
        }
    }

    fn classify(&self, error: wasmtime::Error, state: &GuestState) -> PolicyError {
        let policy = self.name().to_string();
        let digest = self.digest.short();
        if state.memory_refused() {
            return PolicyError::OutOfMemory {
                policy,
                digest,
                limit_bytes: self.limits.memory_bytes,
            };
        }
        if let Some(Trap::Interrupt) = error.downcast_ref::<Trap>() {
            return PolicyError::DeadlineExceeded {
                policy,
                digest,
                deadline: state.deadline,
            };
        }
        let printed = state.guest_output();
        let message = if printed.is_empty() {
            format!("{error:#}")
        } else {
            format!("{error:#}; the policy printed: {printed}")
        };
        PolicyError::Trap {
            policy,
            digest,
            message,
        }
    }

    fn refused(&self, message: String) -> PolicyError {
        PolicyError::Refused {
            policy: self.name().to_string(),
            digest: self.digest.short(),
            message: sandbox::printable(&message).into_owned(),
        }
    }
}
