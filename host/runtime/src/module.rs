//! One loaded policy ([`PolicyModule`]): its compiled code, what it said about itself,
//! and how each call on it runs: a fresh store under the sandbox's memory cap, the call's
//! epoch deadline armed, and a failed call turned into a [`PolicyError`] that names the
//! policy. A kept instance's calls are `session.rs`'s; compiling a component is the
//! engine's (`engine.rs`). It must not keep anything of a call once the call returns.

use std::sync::{Arc, RwLock};

use wasmtime::{Store, Trap};

use crate::call::{CallError, Exports, Flavor, Pre, Refusal};
use crate::contract::{self, INCREMENTAL_SCHEDULER_EXPORT, SCHEDULER_EXPORT};
use crate::epoch;
use crate::error::{CallDeadline, LoadError, PolicyError};
use crate::limits::SandboxLimits;
use crate::log_budget::PolicyLog;
use crate::printable::printable;
use crate::sandbox::GuestState;
use crate::tier::Compiler;
use switchyard_core::{ComponentDigest, Decision, Description, Settings, Snapshot};

/// A component's code from one compiler, pre-linked.
pub(crate) struct Compiled {
    pub(crate) pre: Pre,
    pub(crate) compiler: Compiler,
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
    /// Describes the component `compiled` holds and checks the name it gives itself;
    /// `source_name` names it until then (a file path, `builtin:specon`, an upload).
    pub(crate) fn load(
        compiled: Compiled,
        digest: ComponentDigest,
        limits: SandboxLimits,
        unsandboxed: bool,
        source_name: &str,
    ) -> Result<Self, LoadError> {
        let mut module = PolicyModule {
            compiled: RwLock::new(Arc::new(compiled)),
            digest,
            limits,
            unsandboxed,
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
    pub(crate) fn compiled(&self) -> Arc<Compiled> {
        self.compiled
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Moves later calls onto `compiled` (Cranelift's code, once it is ready).
    pub(crate) fn move_to(&self, compiled: Compiled) {
        *self
            .compiled
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(compiled);
    }

    /// The limits its calls run under.
    pub(crate) fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.description.name
    }

    /// Checks operator settings and returns the effective ones, defaults filled in.
    pub fn configure(&self, settings: &Settings) -> Result<Settings, PolicyError> {
        let wit_settings = contract::settings_to_wit(settings);
        let answer = self.call(0.0, 0, None, |policy, store| {
            policy.configure(store, &wit_settings, &self.limits)
        })?;
        answer.map_err(|message| self.refused(message))
    }

    /// One decision round on a fresh instance with the whole snapshot. `seed` seeds the
    /// guest's randomness; the same inputs and seed always give the same decision.
    /// [`PolicyModule::decide_in`] is the same round on a kept instance.
    /// Its log is held to the per-call cap only; a call through a [`crate::Session`]
    /// is also held to the policy's log budget over time.
    pub fn decide(
        &self,
        settings: &Settings,
        snapshot: &Snapshot,
        state: &[u8],
        seed: u64,
    ) -> Result<Decision, PolicyError> {
        self.decide_logged(settings, snapshot, state, seed, None)
    }

    /// [`PolicyModule::decide`], its log held to `log` as well when given.
    pub(crate) fn decide_logged(
        &self,
        settings: &Settings,
        snapshot: &Snapshot,
        state: &[u8],
        seed: u64,
        log: Option<&PolicyLog>,
    ) -> Result<Decision, PolicyError> {
        let wit_settings = contract::settings_to_wit(settings);
        let reads_loss = self.description.reads_loss;
        let answer = self.call(snapshot.time, seed, log, |policy, store| {
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
    pub(crate) fn checked(
        &self,
        answer: Result<Decision, Refusal>,
    ) -> Result<Decision, PolicyError> {
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
        self.call(0.0, 0, None, |policy, store| {
            policy.describe(store, &self.limits)
        })
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
    pub(crate) fn new_store(&self, compiled: &Compiled, time: f64, seed: u64) -> Store<GuestState> {
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
    pub(crate) fn arm_deadline(&self, store: &mut Store<GuestState>) {
        self.arm(store, CallDeadline::Round(self.limits.deadline));
    }

    /// Starts the deadline of a kept instance's first call on `store`.
    pub(crate) fn arm_priming_deadline(&self, store: &mut Store<GuestState>) {
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

    /// Instantiates into a fresh store under the sandbox limits (and `log`'s budget over
    /// time, when given) and runs `f`.
    fn call<R>(
        &self,
        time: f64,
        seed: u64,
        log: Option<&PolicyLog>,
        f: impl FnOnce(&Exports, &mut Store<GuestState>) -> Result<R, CallError>,
    ) -> Result<R, PolicyError> {
        let compiled = self.compiled();
        let mut store = self.new_store(&compiled, time, seed);
        if let Some(log) = log {
            store.data_mut().log_over_time(log, self.limits.log_rate);
        }
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
    pub(crate) fn failed(&self, error: CallError, state: &GuestState) -> PolicyError {
        match error {
            CallError::Wasm(error) => self.classify(error, state),
            CallError::OverBudget(message) => self.invalid(message),
        }
    }

    pub(crate) fn classify(&self, error: wasmtime::Error, state: &GuestState) -> PolicyError {
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
            message: printable(&message).into_owned(),
        }
    }
}
