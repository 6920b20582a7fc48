//! DRAGON as a plain function of (settings, snapshot, state): parameters, the idle
//! clock in the state blob, labels. The procedures live in [`crate::controller`].

use serde::{Deserialize, Serialize};
use switchyard_policy_sdk::{
    Decision, Description, JobPhase, Setting, Snapshot,
    settings::{ParamSpec, Settings, parameters},
    shown::ShownLabels,
    state,
};

use crate::controller::{self, Params, Queue};
use crate::idle::IdleClock;

/// DRAGON's parameters.
pub const SPEC: &[ParamSpec] = &[
    ParamSpec {
        name: "tau",
        default: "120",
        doc: "seconds a waiting job may wait before it is urgent (scale-down alarm)",
    },
    ParamSpec {
        name: "mu",
        default: "60",
        doc: "seconds a resource must stay idle before it scales up a job already on its node",
    },
    ParamSpec {
        name: "queue",
        default: "fcfs",
        doc: "waiting queue: fcfs (DRAGON) or utility (the Kubeflow dynamic-scheduler variant)",
    },
    ParamSpec {
        name: "scaling",
        default: "true",
        doc: "scale jobs down for urgent ones and up onto idle resources; false gives the paper's locality-aware baseline (gang placement on the fewest nodes only)",
    },
];

/// The state blob: when each node's usable idle resources were first seen idle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    idle_since: IdleClock,
    /// The `state` label each job was last shown: it goes out again only when it changes.
    #[serde(default)]
    shown: ShownLabels,
}

/// Resolves and checks `given`.
pub fn params(given: &[Setting]) -> Result<Params, String> {
    let s = Settings::resolve(SPEC, given)?;
    Ok(Params {
        tau: s.f64_in("tau", 0.0, 1e9)?,
        mu: s.f64_in("mu", 0.0, 1e9)?,
        queue: match s.choice("queue", &["fcfs", "utility"])? {
            "utility" => Queue::Utility,
            _ => Queue::Fcfs,
        },
        scaling: s.bool("scaling")?,
    })
}

/// Name, version, summary and parameters.
pub fn describe() -> Description {
    Description {
        name: "dragon".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        summary: "DRAGON: scale down for urgent jobs, FCFS gangs on the fewest nodes, scale up onto idle resources".into(),
        parameters: parameters(SPEC),
        reads_loss: false, // it scales and places by resources and waiting times alone
    }
}

/// Checks the settings and fills defaults.
pub fn configure(given: &[Setting]) -> Result<Vec<Setting>, String> {
    params(given)?;
    Ok(Settings::resolve(SPEC, given)?.to_settings())
}

/// One round.
pub fn decide(given: &[Setting], snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    let p = params(given)?;
    let mut st: State = state::decode_kept(blob)?;
    let round = controller::round(snapshot, p, &st.idle_since);
    let shown_before = st.shown.clone();
    let idle_kept = st.idle_since.carried_over(&round.idle_ticks);
    let mut urgent = vec![false; snapshot.jobs.len()];
    for &at in &round.urgent {
        urgent[at] = true;
    }
    let labels = st
        .shown
        .changed_at(snapshot, "state", |at, j| {
            Some(match j.phase {
                JobPhase::Waiting if urgent[at] => "urgent",
                JobPhase::Waiting => "waiting",
                _ => "running",
            })
        })
        .into_iter()
        .map(|(_, label)| label)
        .collect();
    let after = State {
        idle_since: st
            .idle_since
            .after_round(&round.idle_ticks, &snapshot.nodes),
        shown: st.shown,
    };
    // In a steady round (nothing placed, scaled or newly idle) the state is the one
    // handed in: its bytes go back without encoding a clock per node again.
    let unchanged = idle_kept && after.shown == shown_before;
    Ok(Decision {
        actions: round.actions,
        labels,
        next_call_after: round.next_alarm,
        state: match unchanged {
            true => state::keep_unchanged(after, blob),
            false => state::encode_kept(after),
        },
    })
}
