//! The contract with policies: the one `bindgen!` of `wit/policy.wit`, and conversion
//! between its generated types and the host's [`switchyard_core::model`].
//!
//! Nothing outside this module touches a generated type, so a change to the WIT shows
//! up as compile errors here and nowhere else.

use switchyard_core::delta::Change;
use switchyard_core::model;

/// Generated host bindings of the `switchyard:policy/policy` world.
#[allow(missing_docs, clippy::all)]
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "switchyard:policy/policy@0.1.0",
    });
}

/// Generated host bindings of the `switchyard:policy/incremental-policy` world; its
/// types and the `host` import are those of [`bindings`].
#[allow(missing_docs, clippy::all)]
pub(crate) mod incremental_bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "switchyard:policy/incremental-policy@0.1.0",
        with: {
            "switchyard:policy/types": super::bindings::switchyard::policy::types,
            "switchyard:policy/host": super::bindings::switchyard::policy::host,
        },
    });
}

use bindings::switchyard::policy::types as wit;

/// The name `interface` of this contract's package is exported under, as a literal (so
/// the names and the message listing them are spelled in one place).
macro_rules! export_name {
    ($interface:literal) => {
        concat!("switchyard:policy/", $interface, "@0.1.0")
    };
}

/// The name a component must export the scheduler interface under.
pub const SCHEDULER_EXPORT: &str = export_name!("scheduler");

/// The name a component that takes deltas exports its scheduler under.
pub const INCREMENTAL_SCHEDULER_EXPORT: &str = export_name!("incremental-scheduler");

/// The exports a policy may have, for error messages.
pub const ACCEPTED_EXPORTS: &str = concat!(
    "`",
    export_name!("scheduler"),
    "` or `",
    export_name!("incremental-scheduler"),
    "`"
);

/// The WIT package and version this host speaks.
pub const PACKAGE: &str = "switchyard:policy@0.1.0";

mod lowering {
    switchyard_core::snapshot_lowering!(super::bindings::switchyard::policy::types);
}

pub use lowering::snapshot_to_wit;

/// The change that brings an incremental policy's instance from what it holds to `now`,
/// as the policy receives it.
pub fn delta_to_wit(now: &model::Snapshot, change: &Change) -> wit::SnapshotDelta {
    let triggers = now.triggers.iter().map(lowering::trigger).collect();
    match change {
        Change::Reset => wit::SnapshotDelta {
            reset: true,
            time: now.time,
            triggers,
            nodes: now.nodes.iter().map(|n| lowering::node(n)).collect(),
            removed_nodes: vec![],
            jobs: now.jobs.iter().map(|j| lowering::job(j)).collect(),
            removed_jobs: vec![],
            loss_updates: vec![],
            appended_loss: vec![],
        },
        Change::Delta(delta) => wit::SnapshotDelta {
            reset: false,
            time: now.time,
            triggers,
            nodes: delta
                .nodes
                .upserted(now.nodes.as_slice())
                .map(|n| lowering::node(n))
                .collect(),
            removed_nodes: delta.nodes.removed.clone(),
            jobs: delta
                .jobs
                .upserted(now.jobs.as_slice())
                .map(|j| lowering::job(j))
                .collect(),
            removed_jobs: delta.jobs.removed.clone(),
            loss_updates: delta
                .loss_updates
                .iter()
                .map(|update| wit::LossUpdate {
                    job: update.held_at as u32,
                    dropped: update.dropped,
                    appended: (now.jobs[update.job].loss.len() - update.kept) as u32,
                })
                .collect(),
            appended_loss: delta
                .loss_updates
                .iter()
                .flat_map(|update| &now.jobs[update.job].loss[update.kept..])
                .map(lowering::loss_sample)
                .collect(),
        },
    }
}

/// Settings in the order the WIT carries them (sorted by name).
pub fn settings_to_wit(settings: &model::Settings) -> Vec<wit::Setting> {
    settings
        .iter()
        .map(|(name, value)| wit::Setting {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

/// Settings as the host keeps them; a name given twice keeps its last value.
pub fn settings_from_wit(settings: Vec<wit::Setting>) -> model::Settings {
    settings.into_iter().map(|s| (s.name, s.value)).collect()
}

fn operation(op: wit::Operation) -> model::Operation {
    match op {
        wit::Operation::Place(p) => model::Operation::Place {
            job: p.job,
            assignments: p
                .assignments
                .into_iter()
                .map(|a| model::Assignment {
                    task: a.task,
                    node: a.node,
                })
                .collect(),
        },
        wit::Operation::Migrate(m) => model::Operation::Migrate {
            job: m.job,
            task: m.task,
            node: m.node,
            kind: match m.kind {
                wit::MigrationKind::Reallocate => model::MigrationKind::Reallocate,
                wit::MigrationKind::Rebalance => model::MigrationKind::Rebalance,
            },
        },
        wit::Operation::SetCpuWeight(w) => model::Operation::SetCpuWeight {
            job: w.job,
            task: w.task,
            weight: w.weight,
        },
        wit::Operation::Scale(s) => model::Operation::Scale {
            job: s.job,
            replicas: s.replicas,
            nodes: s.nodes,
        },
        wit::Operation::Wait(job) => model::Operation::Wait { job },
    }
}

/// The policy's answer as the host keeps it.
pub fn decision_from_wit(d: wit::Decision) -> model::Decision {
    model::Decision {
        actions: d
            .actions
            .into_iter()
            .map(|a| model::Action {
                op: operation(a.op),
                reason: a.reason,
            })
            .collect(),
        labels: d
            .labels
            .into_iter()
            .map(|l| model::JobLabel {
                job: l.job,
                key: l.key,
                value: l.value,
            })
            .collect(),
        next_call_after: d.next_call_after,
        state: d.state,
    }
}

/// The policy's self-description as the host keeps it.
pub fn description_from_wit(d: wit::Description) -> model::Description {
    model::Description {
        name: d.name,
        version: d.version,
        summary: d.summary,
        parameters: d
            .parameters
            .into_iter()
            .map(|p| model::Parameter {
                name: p.name,
                default: p.default_value,
                doc: p.doc,
            })
            .collect(),
    }
}
