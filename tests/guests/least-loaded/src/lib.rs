//! least-loaded in Rust: the same policy as `examples/python-policy/app.py`, decision for
//! decision, so `benches/languages.rs` can put a Python round beside a Rust one.
//!
//! Every waiting job's pending tasks, one job at a time in submission order, each on the
//! node (it may run on, with room for it) whose load after taking it is lowest, the load
//! being the busiest of CPU, memory and GPUs as a share of what the node offers; ties go
//! to the first node. A job is placed whole or waits; a job kept one task per node gets
//! a different node for each task.
//!
//! Like the Python and JavaScript examples it says it reads no loss series. The bench
//! flips the byte after `READS_LOSS`'s marker in the built component
//! (`host/test-support/src/guests.rs`) to measure the same policy saying it does.

use switchyard_policy_sdk::cluster::{Ledger, one_task_per_node, pending_tasks};
use switchyard_policy_sdk::{
    Action, Assignment, Decision, Description, Operation, Parameter, Placement, Setting, Snapshot,
    Task,
};

/// The marker the bench looks for, then `0` (reads no loss series) or `1`.
#[used]
static READS_LOSS: [u8; 23] = *b"SWITCHYARD-READS-LOSS:0";

fn reads_loss() -> bool {
    // Read through a volatile pointer: the byte changes after compilation.
    let flag: [u8; 23] = unsafe { std::ptr::read_volatile(&READS_LOSS) };
    flag[22] == b'1'
}

/// The policy's functions, as `policy_binding!` expects them.
pub mod policy {
    use super::*;

    /// Who the policy is; the same name and parameter as the Python one.
    pub fn describe() -> Description {
        Description {
            name: "least-loaded-rust".into(),
            version: "0.3.0".into(),
            summary:
                "places each job whole on the least-loaded nodes (the Python example, in Rust)"
                    .into(),
            parameters: vec![Parameter {
                name: "resource".into(),
                default_value: "any".into(),
                doc: "only `any` (the busiest of cpu, memory and gpu) in this twin".into(),
            }],
            // Places by the nodes' load alone.
            reads_loss: reads_loss(),
        }
    }

    /// Accepts `resource=any` only: the bench measures the default.
    pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
        match settings {
            [] => Ok(vec![Setting {
                name: "resource".into(),
                value: "any".into(),
            }]),
            [s] if s.name == "resource" && s.value == "any" => Ok(settings.to_vec()),
            _ => Err("this twin takes only resource=any".into()),
        }
    }

    /// One round, as `app.py` decides it.
    pub fn decide(_: &[Setting], snapshot: &Snapshot, state: &[u8]) -> Result<Decision, String> {
        let mut ledger = Ledger::new(snapshot);
        let mut actions = Vec::new();
        for job in &snapshot.jobs {
            let pending = pending_tasks(job);
            if pending.is_empty() {
                continue;
            }
            let mut trial = ledger.clone();
            let mut taken: Option<Vec<String>> = one_task_per_node(job)
                .then(|| job.tasks.iter().filter_map(|t| t.node.clone()).collect());
            let mut assignments = Vec::new();
            for task in &pending {
                let Some(node) = least_loaded(&trial, task, taken.as_deref()) else {
                    break;
                };
                trial.charge_task(&node, task);
                if let Some(taken) = taken.as_mut() {
                    taken.push(node.clone());
                }
                assignments.push(Assignment {
                    task: task.name.clone(),
                    node,
                });
            }
            if assignments.len() < pending.len() {
                actions.push(Action {
                    op: Operation::Wait(job.id.clone()),
                    reason: format!("{} pending tasks do not all fit now", pending.len()),
                });
                continue;
            }
            ledger = trial;
            let mut nodes: Vec<&str> = assignments.iter().map(|a| a.node.as_str()).collect();
            nodes.sort_unstable();
            nodes.dedup();
            let reason = format!("least any load: {}", nodes.join(", "));
            actions.push(Action {
                op: Operation::Place(Placement {
                    job: job.id.clone(),
                    assignments,
                }),
                reason,
            });
        }
        Ok(Decision {
            actions,
            labels: vec![],
            next_call_after: None,
            state: state.to_vec(),
        })
    }

    fn least_loaded(ledger: &Ledger, task: &Task, taken: Option<&[String]>) -> Option<String> {
        let want = task.requests;
        let mut best: Option<(&str, f64)> = None;
        for room in ledger.rooms_for(task) {
            if taken.is_some_and(|t| t.iter().any(|n| n == room.name)) {
                continue;
            }
            let share = |offered: u64, left: u64, take: u64| {
                if offered == 0 {
                    0.0
                } else {
                    1.0 - (left as f64 - take as f64) / offered as f64
                }
            };
            let load = share(
                room.allocatable.cpu_millis,
                room.free.cpu_millis,
                want.cpu_millis,
            )
            .max(share(
                room.allocatable.memory_bytes,
                room.free.memory_bytes,
                want.memory_bytes,
            ))
            .max(share(
                room.allocatable.gpus as u64,
                room.free.gpus as u64,
                want.gpus as u64,
            ));
            if best.is_none_or(|(_, b)| load < b) {
                best = Some((room.name, load));
            }
        }
        best.map(|(name, _)| name.to_string())
    }
}

switchyard_policy_sdk::policy_binding!(LeastLoadedRust, policy);
