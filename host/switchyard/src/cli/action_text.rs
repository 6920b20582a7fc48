//! One policy action as a line of text, for the commands that show decisions (`ctl
//! decisions`, `replay`): the operation with every task and value it carries. Names
//! and reasons pass through [`super::terminal::escaped`]; this module must not decide
//! what a command prints around the line.

use switchyard_core::{Action, Operation};

use super::terminal::escaped;

/// `op` without its job: `place worker-0→gpu-1 ps-0→cpu-2`, `migrate worker-0→gpu-2
/// (purpose consolidate)`, `set-cpu-weight worker-0=0.25`, `scale to 4 (+gpu-1 gpu-2)`,
/// `wait`, `preempt`.
pub(crate) fn operation(op: &Operation) -> String {
    match op {
        Operation::Place { assignments, .. } => format!(
            "place {}",
            assignments
                .iter()
                .map(|a| format!("{}→{}", escaped(&a.task), escaped(&a.node)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Operation::Migrate {
            task,
            node,
            purpose,
            ..
        } => {
            let task = task.as_deref().map_or("all tasks".into(), escaped);
            let mut text = format!("migrate {task}→{}", escaped(node));
            if !purpose.is_empty() {
                text.push_str(&format!(" (purpose {})", escaped(purpose)));
            }
            text
        }
        Operation::SetCpuWeight { task, weight, .. } => {
            format!("set-cpu-weight {}={weight}", escaped(task))
        }
        Operation::Scale {
            replicas, nodes, ..
        } => format!(
            "scale to {replicas} (+{})",
            nodes
                .iter()
                .map(|n| escaped(n))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Operation::Wait { .. } => "wait".into(),
        Operation::Preempt { .. } => "preempt".into(),
    }
}

/// `action` with its job in front and the policy's reason after it.
pub(crate) fn with_job(action: &Action) -> String {
    format!(
        "{} {} — {}",
        escaped(action.op.job()),
        operation(&action.op),
        escaped(&action.reason)
    )
}
