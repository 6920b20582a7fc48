//! The validator's integration tests, one binary, one module per subject: the rules of a
//! placement (room, gangs, eligibility, one task per node, cordons), the rules of a move
//! (migration, rescale, preemption, CPU weights, one move per job per round), then a
//! property test that random action lists against random snapshots never get an
//! invalid action past it.

use switchyard_test_support as support;

mod moves;
mod placements;
mod property;

use switchyard_core::{Action, Assignment, Decision, Operation, Snapshot, check_decision};

fn action(op: Operation) -> Action {
    Action {
        op,
        reason: "test".into(),
    }
}

fn place(job: &str, pairs: &[(&str, &str)]) -> Action {
    action(Operation::Place {
        job: job.into(),
        assignments: pairs
            .iter()
            .map(|(t, n)| Assignment {
                task: t.to_string(),
                node: n.to_string(),
            })
            .collect(),
    })
}

fn migrate(job: &str, node: &str, purpose: &str) -> Action {
    action(Operation::Migrate {
        job: job.into(),
        task: None,
        node: node.into(),
        purpose: purpose.into(),
    })
}

fn preempt(job: &str) -> Action {
    action(Operation::Preempt { job: job.into() })
}

fn decide(snapshot: &Snapshot, actions: Vec<Action>) -> switchyard_core::Checked {
    check_decision(
        snapshot,
        &Decision {
            actions,
            ..Decision::default()
        },
    )
}
