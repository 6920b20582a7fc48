//! A policy that disrupts as much as the validator lets it: every round it preempts
//! every running job and places every waiting one, pod by pod, on the node with the most
//! room left. Each action is valid on its own, so only the host's disruption budget
//! (its minimum run time and its cap per interval) lets the jobs make progress.

pub mod policy {
    //! Preempts whatever runs, places whatever waits.

    use switchyard_policy_sdk::cluster::Ledger;
    use switchyard_policy_sdk::placement::{Scoring, pod_by_pod};
    use switchyard_policy_sdk::{
        Action, Decision, Description, JobPhase, Operation, Setting, Snapshot,
    };

    /// Its name; no parameters.
    pub fn describe() -> Description {
        Description {
            name: "preempt-all".into(),
            version: "0.0.0".into(),
            summary: "preempts every running job every round and places them back".into(),
            parameters: vec![],
            reads_loss: false,
        }
    }

    /// Takes no settings.
    pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
        match settings.first() {
            Some(s) => Err(format!("preempt-all takes no parameters, got `{}`", s.name)),
            None => Ok(vec![]),
        }
    }

    /// A preemption for every running job, a placement for every waiting one.
    pub fn decide(_: &[Setting], snapshot: &Snapshot, state: &[u8]) -> Result<Decision, String> {
        let mut actions: Vec<Action> = snapshot
            .jobs
            .iter()
            .filter(|j| j.phase == JobPhase::Running)
            .map(|j| Action {
                op: Operation::Preempt(j.id.clone()),
                reason: "preempt everything, every round".into(),
            })
            .collect();
        let mut ledger = Ledger::new(snapshot);
        actions.extend(pod_by_pod(snapshot, &mut ledger, Scoring::LeastAllocated));
        Ok(Decision {
            actions,
            labels: vec![],
            next_call_after: None,
            state: state.to_vec(),
        })
    }
}

switchyard_policy_sdk::policy_binding!(PreemptAll, policy);
