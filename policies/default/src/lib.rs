//! `default`: the baseline that behaves like the stock kube-scheduler.
//!
//! Pod by pod, in job submission order: filter the nodes the pod fits on, score them
//! with `LeastAllocated` (the most free capacity left wins, ties to the first node), and
//! bind the pod on its own. No gang, no migration, no weights, no scaling. Because pods
//! are placed one at a time, two distributed jobs can each get part of their roles and
//! deadlock, exactly as the gang-scheduling thesis (section 4.5) describes; that is the
//! point of the baseline.

use switchyard_policy_sdk::{
    Action, Assignment, Decision, Description, Guest, Operation, Placement, Setting, Snapshot,
    cluster::{Ledger, pending_tasks},
    settings::{ParamSpec, Settings, parameters},
};

const SPEC: &[ParamSpec] = &[ParamSpec {
    name: "scoring",
    default: "least-allocated",
    doc: "node score, as kube-scheduler's NodeResourcesFit: least-allocated (spread) or most-allocated (bin-pack)",
}];

/// How candidate nodes are ranked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoring {
    /// Most free capacity left wins (kube-scheduler's default).
    LeastAllocated,
    /// Least free capacity left wins (bin packing).
    MostAllocated,
}

fn scoring(settings: &Settings) -> Result<Scoring, String> {
    Ok(
        match settings.choice("scoring", &["least-allocated", "most-allocated"])? {
            "most-allocated" => Scoring::MostAllocated,
            _ => Scoring::LeastAllocated,
        },
    )
}

/// The baseline policy.
pub struct DefaultPolicy;

impl Guest for DefaultPolicy {
    fn describe() -> Description {
        Description {
            name: "default".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            summary: "kube-scheduler-like baseline: pod by pod, least-allocated, no gang".into(),
            parameters: parameters(SPEC),
        }
    }

    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        let resolved = Settings::resolve(SPEC, &settings)?;
        scoring(&resolved)?;
        Ok(resolved.to_settings())
    }

    fn decide(
        settings: Vec<Setting>,
        snapshot: Snapshot,
        state: Vec<u8>,
    ) -> Result<Decision, String> {
        let scoring = scoring(&Settings::resolve(SPEC, &settings)?)?;
        Ok(Decision {
            actions: place_pod_by_pod(&snapshot, scoring),
            labels: vec![],
            next_call_after: None,
            state,
        })
    }
}

/// One single-task placement per pending pod that fits somewhere.
pub fn place_pod_by_pod(snapshot: &Snapshot, scoring: Scoring) -> Vec<Action> {
    let mut ledger = Ledger::new(snapshot);
    let mut actions = Vec::new();
    for job in &snapshot.jobs {
        for task in pending_tasks(job) {
            let best = ledger
                .nodes_fitting(&task.requests)
                .into_iter()
                .map(|n| {
                    let spread = ledger.least_allocated_score(n, &task.requests);
                    let score = match scoring {
                        Scoring::LeastAllocated => spread,
                        Scoring::MostAllocated => 100.0 - spread,
                    };
                    (n.to_string(), score)
                })
                .fold(None::<(String, f64)>, |best, cand| match best {
                    Some(b) if b.1 >= cand.1 => Some(b),
                    _ => Some(cand),
                });
            if let Some((node, _)) = best {
                ledger.charge(&node, &task.requests);
                actions.push(Action {
                    op: Operation::Place(Placement {
                        job: job.id.clone(),
                        assignments: vec![Assignment {
                            task: task.name.clone(),
                            node: node.clone(),
                        }],
                    }),
                    reason: format!("fits on {node}, best {scoring:?} score"),
                });
            }
        }
    }
    actions
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(DefaultPolicy with_types_in switchyard_policy_sdk::bindings);
