//! The contract with policies: the one `bindgen!` of `wit/policy.wit`, and conversion
//! between its generated types and the host's model in [`switchyard_core`].
//!
//! Nothing outside this module touches a generated type, so a change to the WIT shows
//! up as compile errors here and nowhere else.

use switchyard_core as model;
use switchyard_core::Change;

/// Generated host bindings of the `switchyard:policy/policy` world.
#[allow(missing_docs, clippy::all)]
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "switchyard:policy/policy@0.3.0",
    });
}

/// Generated host bindings of the `switchyard:policy/incremental-policy` world; its
/// types and the `host` import are those of [`bindings`].
#[allow(missing_docs, clippy::all)]
pub(crate) mod incremental_bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "switchyard:policy/incremental-policy@0.3.0",
        with: {
            "switchyard:policy/types": super::bindings::switchyard::policy::types,
            "switchyard:policy/host": super::bindings::switchyard::policy::host,
        },
    });
}

use bindings::switchyard::policy::types as wit;

/// The contract version this host speaks (the WIT package's), as a literal.
macro_rules! contract_version {
    () => {
        "0.3.0"
    };
}

/// The name `interface` of this contract's package is exported under, as a literal (so
/// the names and the message listing them are spelled in one place).
macro_rules! export_name {
    ($interface:literal) => {
        concat!("switchyard:policy/", $interface, "@", contract_version!())
    };
}

/// The name a component must export the scheduler interface under.
pub(crate) const SCHEDULER_EXPORT: &str = export_name!("scheduler");

/// The name a component that takes deltas exports its scheduler under.
pub(crate) const INCREMENTAL_SCHEDULER_EXPORT: &str = export_name!("incremental-scheduler");

/// The exports a policy may have, for error messages.
pub(crate) const ACCEPTED_EXPORTS: &str = concat!(
    "`",
    export_name!("scheduler"),
    "` or `",
    export_name!("incremental-scheduler"),
    "`"
);

/// The WIT package and version this host speaks.
pub const CONTRACT_PACKAGE: &str = concat!("switchyard:policy@", contract_version!());

/// The contract's version alone.
pub(crate) const CONTRACT_VERSION: &str = contract_version!();

mod lowering {
    switchyard_core::snapshot_lowering!(super::bindings::switchyard::policy::types);
}

pub use lowering::snapshot_to_wit;
pub(crate) use lowering::{delta_for, snapshot_for};

/// The change that brings an incremental policy's instance from what it holds to `now`,
/// as a policy that reads loss series receives it.
pub fn delta_to_wit(now: &model::Snapshot, change: &Change) -> wit::SnapshotDelta {
    delta_for(now, change, true)
}

/// Settings in the order the WIT carries them (sorted by name).
pub(crate) fn settings_to_wit(settings: &model::Settings) -> Vec<wit::Setting> {
    settings
        .iter()
        .map(|(name, value)| wit::Setting {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

/// What a policy hands back, lifted under a budget.
///
/// The generated bindings lift a whole answer into host memory, and a list of strings
/// that all point at one guest buffer makes that copy many times the guest's own
/// memory. These types mirror the WIT records field for field; their strings and lists
/// ([`metered::Text`], [`metered::Items`], ...) check each length against a
/// [`ResultBudget`] before wasmtime copies anything, so lifting stops at the first item
/// over budget and the host never holds more of an answer than the budget allows.
/// wasmtime frees the guest's copy right after lifting (post-return), which is why the
/// counting happens during the lift rather than over lazily read guest memory.
pub(crate) mod metered {
    use std::cell::RefCell;

    use wasmtime::ValRaw;
    use wasmtime::component::__internal::{
        CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext,
    };
    use wasmtime::component::{ComponentType, Lift};

    use switchyard_core as model;

    use crate::limits::ResultBudget;

    /// What one answer may still use, and the first budget it overran.
    struct Meter {
        budget: ResultBudget,
        state_bytes: usize,
        items: usize,
        labels: usize,
        string_bytes: usize,
        overrun: Option<String>,
    }

    thread_local! {
        /// The meter of the call in progress on this thread. Lifting happens inside the
        /// synchronous call, on the calling thread.
        static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
    }

    /// Runs `call` with a fresh meter; returns its outcome and the overrun, if any (the
    /// call itself then failed in the lift).
    pub(crate) fn metered<R>(
        budget: &ResultBudget,
        state_bytes: usize,
        call: impl FnOnce() -> R,
    ) -> (R, Option<String>) {
        METER.with(|m| {
            *m.borrow_mut() = Some(Meter {
                budget: *budget,
                state_bytes,
                items: 0,
                labels: 0,
                string_bytes: 0,
                overrun: None,
            })
        });
        let outcome = call();
        let overrun = METER.with(|m| m.borrow_mut().take().and_then(|m| m.overrun));
        (outcome, overrun)
    }

    /// The kinds of thing a budget counts.
    #[derive(Clone, Copy)]
    enum Count {
        Items,
        Labels,
        StringBytes,
        StateBytes,
    }

    /// Counts `n` of `what`; an error once over budget (remembered as the overrun).
    fn spend(what: Count, n: usize) -> wasmtime::Result<()> {
        METER.with(|m| {
            let mut m = m.borrow_mut();
            let Some(m) = m.as_mut() else {
                return Ok(());
            };
            let (used, limit, name) = match what {
                Count::Items => (&mut m.items, m.budget.actions, "actions"),
                Count::Labels => (&mut m.labels, m.budget.labels, "labels"),
                Count::StringBytes => (&mut m.string_bytes, m.budget.string_bytes, "string-bytes"),
                Count::StateBytes => (&mut 0, m.state_bytes, "state-bytes"),
            };
            *used = used.saturating_add(n);
            if *used <= limit {
                return Ok(());
            }
            let message = match what {
                Count::Items => format!(
                    "more than {limit} actions and entries in their lists (the result budget `{name}`)"
                ),
                Count::Labels => format!("more than {limit} labels (the result budget `{name}`)"),
                Count::StringBytes => {
                    format!("more than {limit} bytes of strings (the result budget `{name}`)")
                }
                Count::StateBytes => {
                    format!("state blob of {n} bytes exceeds the {limit}-byte limit")
                }
            };
            m.overrun.get_or_insert(message.clone());
            Err(wasmtime::Error::msg(message))
        })
    }

    /// The length of a string or list from its lowered (pointer, length) pair.
    fn flat_len(src: &[ValRaw; 2]) -> usize {
        src[1].get_u32() as usize
    }

    /// The length of a string or list from its (pointer, length) pair in memory.
    fn memory_len(bytes: &[u8]) -> usize {
        bytes
            .get(4..8)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    /// Defines a wrapper of `$inner` whose length is counted as `$count` before the
    /// inner value is lifted.
    macro_rules! counted {
        ($(#[$doc:meta])* $name:ident $(<$t:ident>)?, $inner:ty, $count:expr) => {
            $(#[$doc])*
            pub(crate) struct $name$(<$t>)?(pub(crate) $inner);

            // SAFETY: every item forwards to the wrapped type's implementation, whose
            // layout the wrapper shares.
            unsafe impl$(<$t: ComponentType>)? ComponentType for $name$(<$t>)? {
                type Lower = <$inner as ComponentType>::Lower;
                const ABI: CanonicalAbiInfo = <$inner as ComponentType>::ABI;
                fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
                    <$inner as ComponentType>::typecheck(ty, types)
                }
            }

            // SAFETY: as above; the length is read from the same pointer pair the wrapped
            // type's lift reads, before it copies anything.
            unsafe impl$(<$t: Lift>)? Lift for $name$(<$t>)? {
                fn linear_lift_from_flat(
                    cx: &mut LiftContext<'_>,
                    ty: InterfaceType,
                    src: &Self::Lower,
                ) -> wasmtime::Result<Self> {
                    spend($count, flat_len(src))?;
                    <$inner as Lift>::linear_lift_from_flat(cx, ty, src).map($name)
                }
                fn linear_lift_from_memory(
                    cx: &mut LiftContext<'_>,
                    ty: InterfaceType,
                    bytes: &[u8],
                ) -> wasmtime::Result<Self> {
                    spend($count, memory_len(bytes))?;
                    <$inner as Lift>::linear_lift_from_memory(cx, ty, bytes).map($name)
                }
            }
        };
    }

    counted!(
        /// A string, counted against `string-bytes`.
        Text, String, Count::StringBytes
    );
    counted!(
        /// A list of actions or of their entries, counted against `actions`.
        Items<T>, Vec<T>, Count::Items
    );
    counted!(
        /// The list of labels, counted against `labels`.
        Labels<T>, Vec<T>, Count::Labels
    );
    counted!(
        /// The state blob, refused past the state limit.
        Blob, Vec<u8>, Count::StateBytes
    );

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Decision {
        actions: Items<Action>,
        labels: Labels<JobLabel>,
        #[component(name = "next-call-after")]
        next_call_after: Option<f64>,
        state: Blob,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Action {
        op: Operation,
        reason: Text,
    }

    #[derive(ComponentType, Lift)]
    #[component(variant)]
    pub(crate) enum Operation {
        #[component(name = "place")]
        Place(Placement),
        #[component(name = "migrate")]
        Migrate(Migration),
        #[component(name = "set-cpu-weight")]
        SetCpuWeight(CpuWeight),
        #[component(name = "scale")]
        Scale(Scaling),
        #[component(name = "wait")]
        Wait(Text),
        #[component(name = "preempt")]
        Preempt(Text),
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Placement {
        job: Text,
        assignments: Items<Assignment>,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Assignment {
        task: Text,
        node: Text,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Migration {
        job: Text,
        task: Option<Text>,
        node: Text,
        purpose: Text,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct CpuWeight {
        job: Text,
        task: Text,
        weight: f64,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Scaling {
        job: Text,
        replicas: u32,
        nodes: Items<Text>,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct JobLabel {
        job: Text,
        key: Text,
        value: Text,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Description {
        name: Text,
        version: Text,
        summary: Text,
        parameters: Items<Parameter>,
        #[component(name = "reads-loss")]
        reads_loss: bool,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Parameter {
        name: Text,
        #[component(name = "default-value")]
        default_value: Text,
        doc: Text,
    }

    #[derive(ComponentType, Lift)]
    #[component(record)]
    pub(crate) struct Setting {
        name: Text,
        value: Text,
    }

    impl From<Decision> for model::Decision {
        fn from(d: Decision) -> Self {
            model::Decision {
                actions: d.actions.0.into_iter().map(Into::into).collect(),
                labels: d
                    .labels
                    .0
                    .into_iter()
                    .map(|l| model::JobLabel {
                        job: l.job.0,
                        key: l.key.0,
                        value: l.value.0,
                    })
                    .collect(),
                next_call_after: d.next_call_after,
                state: d.state.0,
            }
        }
    }

    impl From<Action> for model::Action {
        fn from(a: Action) -> Self {
            let op = match a.op {
                Operation::Place(p) => model::Operation::Place {
                    job: p.job.0,
                    assignments: p
                        .assignments
                        .0
                        .into_iter()
                        .map(|a| model::Assignment {
                            task: a.task.0,
                            node: a.node.0,
                        })
                        .collect(),
                },
                Operation::Migrate(m) => model::Operation::Migrate {
                    job: m.job.0,
                    task: m.task.map(|t| t.0),
                    node: m.node.0,
                    purpose: m.purpose.0,
                },
                Operation::SetCpuWeight(w) => model::Operation::SetCpuWeight {
                    job: w.job.0,
                    task: w.task.0,
                    weight: w.weight,
                },
                Operation::Scale(s) => model::Operation::Scale {
                    job: s.job.0,
                    replicas: s.replicas,
                    nodes: s.nodes.0.into_iter().map(|n| n.0).collect(),
                },
                Operation::Wait(job) => model::Operation::Wait { job: job.0 },
                Operation::Preempt(job) => model::Operation::Preempt { job: job.0 },
            };
            model::Action {
                op,
                reason: a.reason.0,
            }
        }
    }

    impl From<Description> for model::Description {
        fn from(d: Description) -> Self {
            model::Description {
                name: d.name.0,
                version: d.version.0,
                summary: d.summary.0,
                parameters: d
                    .parameters
                    .0
                    .into_iter()
                    .map(|p| model::Parameter {
                        name: p.name.0,
                        default: p.default_value.0,
                        doc: p.doc.0,
                    })
                    .collect(),
                reads_loss: d.reads_loss,
            }
        }
    }

    /// Settings as the host keeps them; a name given twice keeps its last value.
    pub(crate) fn settings(list: Items<Setting>) -> model::Settings {
        list.0.into_iter().map(|s| (s.name.0, s.value.0)).collect()
    }
}
