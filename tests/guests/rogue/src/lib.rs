//! A policy that answers with nonsense: placements on nodes and jobs that do not exist,
//! weights out of range, plus one valid placement that must still go through.

use switchyard_policy_sdk::{
    Action, Assignment, CpuWeight, Decision, Description, Guest, Operation, Placement, Setting,
    Snapshot, cluster::pending_tasks,
};

pub struct Rogue;

impl Guest for Rogue {
    fn describe() -> Description {
        Description {
            name: "rogue".into(),
            version: "0.0.0".into(),
            summary: "returns invalid actions next to one valid one".into(),
            parameters: vec![],
            reads_loss: true,
        }
    }
    fn configure(settings: Vec<Setting>) -> Result<Vec<Setting>, String> {
        Ok(settings)
    }
    fn decide(_: Vec<Setting>, snapshot: Snapshot, state: Vec<u8>) -> Result<Decision, String> {
        let mut actions = Vec::new();
        if let Some(job) = snapshot.jobs.first() {
            let tasks = pending_tasks(job);
            actions.push(place(
                &job.id,
                tasks.iter().map(|t| (t.name.as_str(), "no-such-node")),
            ));
            actions.push(Action {
                op: Operation::SetCpuWeight(CpuWeight {
                    job: job.id.clone(),
                    task: job.tasks[0].name.clone(),
                    weight: 1.5,
                }),
                reason: "out of range".into(),
            });
            if let Some(node) = snapshot.nodes.first() {
                let node = node.name.as_str();
                actions.push(place(
                    &job.id,
                    tasks.iter().map(|t| (t.name.as_str(), node)),
                ));
            }
        }
        actions.push(place("no-such-job", [("main", "nowhere")].into_iter()));
        Ok(Decision {
            actions,
            labels: vec![],
            next_call_after: None,
            state,
        })
    }
}

fn place<'a>(job: &str, assignments: impl Iterator<Item = (&'a str, &'a str)>) -> Action {
    Action {
        op: Operation::Place(Placement {
            job: job.into(),
            assignments: assignments
                .map(|(task, node)| Assignment {
                    task: task.into(),
                    node: node.into(),
                })
                .collect(),
        }),
        reason: "rogue".into(),
    }
}

// The export names contain `:`, which only the component linker accepts; a native
// build (unit tests, clippy) leaves them out.
#[cfg(target_arch = "wasm32")]
switchyard_policy_sdk::export!(Rogue with_types_in switchyard_policy_sdk::bindings);
