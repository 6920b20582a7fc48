//! One call into a policy component: which world it implements ([`Flavor`]), where its
//! scheduler's functions are, an instance of it ([`Exports`]) and the typed calls of
//! `describe`, `configure` and `decide`, each answer lifted under the sandbox's
//! [`ResultBudget`](crate::ResultBudget) by [`metered`]. It does not set up the store, the deadline or
//! the memory cap around a call (the module does: `module.rs`), and it never names the
//! policy in an error: a [`CallError`] becomes a named [`crate::PolicyError`] there.

use wasmtime::component::{Component, ComponentExportIndex, InstancePre};
use wasmtime::{Engine, Store};

use crate::contract::metered::{self, Items, Text};
use crate::contract::{self, bindings};
use crate::limits::SandboxLimits;
use crate::sandbox::GuestState;
use switchyard_core::{Change, Decision, Description, Settings, Snapshot};

/// Which of the contract's worlds a component implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `policy`: the whole snapshot on every call.
    Whole,
    /// `incremental-policy`: what changed since the instance's last call.
    Incremental,
}

/// A pre-linked component of either world, and where its scheduler's functions are.
pub(crate) struct Pre {
    pub(crate) instance_pre: InstancePre<GuestState>,
    pub(crate) flavor: Flavor,
    pub(crate) functions: SchedulerFunctions,
}

/// The scheduler interface's functions, found once per compiled component.
#[derive(Clone, Copy)]
pub(crate) struct SchedulerFunctions {
    describe: ComponentExportIndex,
    configure: ComponentExportIndex,
    decide: ComponentExportIndex,
}

impl SchedulerFunctions {
    pub(crate) fn of(component: &Component, export: &str) -> Option<Self> {
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
    pub(crate) fn engine(&self) -> &Engine {
        self.instance_pre.engine()
    }

    /// Instantiates the component into `store` (under its deadline).
    pub(crate) fn instantiate(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Exports> {
        let instance = self.instance_pre.instantiate(&mut *store)?;
        Ok(Exports {
            instance,
            flavor: self.flavor,
            functions: self.functions,
        })
    }
}

/// Why a call produced no answer the host can use.
pub(crate) enum CallError {
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
pub(crate) type Refusal = String;

/// An instance of either world. Every answer is lifted under the sandbox's
/// [`ResultBudget`](crate::ResultBudget) ([`metered`]), never by the generated bindings.
pub(crate) struct Exports {
    instance: wasmtime::component::Instance,
    flavor: Flavor,
    functions: SchedulerFunctions,
}

type WitSetting = bindings::switchyard::policy::types::Setting;
type Answer<T> = Result<T, Text>;

impl Exports {
    pub(crate) fn describe(
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

    pub(crate) fn configure(
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
    pub(crate) fn decide_whole(
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
    pub(crate) fn decide_change(
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
