//! A policy that cannot decide on a long queue: shown more than `ANSWERS_UP_TO`
//! waiting jobs it works until the host stops it, and shown fewer it places the waiting
//! jobs first fit, oldest first, at once. The loop's queue window
//! (`host/control/src/window.rs`) must keep it, and a fallback like it, placing jobs
//! through a burst of arrivals. Whether a call overruns is decided by a count, not by
//! how fast the machine is: any deadline stops the first kind of call and none the
//! second.

use switchyard_policy_sdk::{
    Action, Assignment, Decision, Description, Guest, JobPhase, Operation, Placement, Setting,
    Snapshot,
};

pub struct QueueBound;

/// The most waiting jobs a call answers on; shown more, it never answers.
const ANSWERS_UP_TO: usize = 1_000;

impl Guest for QueueBound {
    fn describe() -> Description {
        Description {
            name: "queue-bound".into(),
            version: "0.0.0".into(),
            summary: "never answers on more than 1,000 waiting jobs, else places first fit".into(),
            parameters: vec![],
            reads_loss: true,
        }
    }
    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }
    fn decide(_: Vec<Setting>, snapshot: Snapshot, state: Vec<u8>) -> Result<Decision, String> {
        let mut free: Vec<(u64, u64, u32)> = snapshot
            .nodes
            .iter()
            .map(|n| {
                (
                    n.allocatable
                        .cpu_millis
                        .saturating_sub(n.requested.cpu_millis),
                    n.allocatable
                        .memory_bytes
                        .saturating_sub(n.requested.memory_bytes),
                    n.allocatable.gpus.saturating_sub(n.requested.gpus),
                )
            })
            .collect();
        let waiting = || {
            snapshot
                .jobs
                .iter()
                .filter(|j| j.phase == JobPhase::Waiting)
        };
        if waiting().count() > ANSWERS_UP_TO {
            let mut x = snapshot.time as u64;
            loop {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        let mut actions = Vec::new();
        for job in waiting() {
            let mut taken = free.clone();
            let mut assignments = Vec::new();
            for task in job.tasks.iter().filter(|t| t.node.is_none()) {
                let r = &task.requests;
                let Some(i) = taken
                    .iter()
                    .position(|f| f.0 >= r.cpu_millis && f.1 >= r.memory_bytes && f.2 >= r.gpus)
                else {
                    break;
                };
                taken[i].0 -= r.cpu_millis;
                taken[i].1 -= r.memory_bytes;
                taken[i].2 -= r.gpus;
                assignments.push(Assignment {
                    task: task.name.clone(),
                    node: snapshot.nodes[i].name.clone(),
                });
            }
            if assignments.len() == job.tasks.iter().filter(|t| t.node.is_none()).count() {
                free = taken;
                actions.push(Action {
                    op: Operation::Place(Placement {
                        job: job.id.clone(),
                        assignments,
                    }),
                    reason: "first fit".into(),
                });
            }
        }
        Ok(Decision {
            actions,
            labels: vec![],
            next_call_after: None,
            state,
        })
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(QueueBound with_types_in switchyard_policy_sdk::bindings);
