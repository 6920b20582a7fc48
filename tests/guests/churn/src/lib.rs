//! A policy that disrupts the same jobs over and over, in one of two ways (`mode`):
//!
//! - `ping-pong`: every round it migrates every running job to another node where the
//!   whole job fits, so a job moves back and forth forever;
//! - `before-finish`: every round it preempts every running job whose newest evaluation
//!   is at step `step` or later (near its end on a workload whose jobs train for more
//!   steps than that), so a job that nears its end is stopped again and again.
//!
//! Either way it places every waiting job pod by pod and asks to be called every
//! second. Each action is valid on its own, so only the host's disruption budget lets
//! the jobs finish.

pub mod policy {
    //! Disrupts the same jobs every round, places what waits.

    use switchyard_policy_sdk::cluster::Ledger;
    use switchyard_policy_sdk::placement::{Scoring, pod_by_pod};
    use switchyard_policy_sdk::settings::{ParamSpec, Settings, parameters};
    use switchyard_policy_sdk::{
        Action, Decision, Description, Job, JobPhase, Migration, Operation, Setting, Snapshot,
    };

    const MODES: &[&str] = &["ping-pong", "before-finish"];

    const SPEC: &[ParamSpec] = &[
        ParamSpec {
            name: "mode",
            default: "ping-pong",
            doc: "ping-pong: migrate every running job every round; before-finish: preempt every running job past `step`",
        },
        ParamSpec {
            name: "step",
            default: "1000",
            doc: "the training step from which before-finish preempts a job",
        },
    ];

    /// Its name and parameters.
    pub fn describe() -> Description {
        Description {
            name: "churn".into(),
            version: "0.0.0".into(),
            summary: "migrates every running job every round, or preempts each near its end".into(),
            parameters: parameters(SPEC),
            reads_loss: true,
        }
    }

    /// Checks the mode and the step.
    pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
        let resolved = Settings::resolve(SPEC, settings)?;
        resolved.choice("mode", MODES)?;
        resolved.f64("step")?;
        Ok(resolved.to_settings())
    }

    /// A disruption for every running job the mode picks, a placement for every
    /// waiting one.
    pub fn decide(
        settings: &[Setting],
        snapshot: &Snapshot,
        state: &[u8],
    ) -> Result<Decision, String> {
        let resolved = Settings::resolve(SPEC, settings)?;
        let mode = resolved.choice("mode", MODES)?;
        let step = resolved.f64("step")?;
        let mut ledger = Ledger::new(snapshot);
        let running = snapshot
            .jobs
            .iter()
            .filter(|j| j.phase == JobPhase::Running);
        let mut actions: Vec<Action> = match mode {
            "ping-pong" => running.filter_map(|j| elsewhere(j, &mut ledger)).collect(),
            _ => running
                .filter(|j| j.loss.steps.last().is_some_and(|&s| s as f64 >= step))
                .map(|j| Action {
                    op: Operation::Preempt(j.id.clone()),
                    reason: format!("past step {step}: preempt it again"),
                })
                .collect(),
        };
        actions.extend(pod_by_pod(snapshot, &mut ledger, Scoring::LeastAllocated));
        Ok(Decision {
            actions,
            labels: vec![],
            next_call_after: Some(1.0),
            state: state.to_vec(),
        })
    }

    /// A migration of the whole of `job` to the first node other than its first task's
    /// where all its tasks fit, charged to `ledger`.
    fn elsewhere(job: &Job, ledger: &mut Ledger) -> Option<Action> {
        let here = job.tasks.first()?.node.clone()?;
        let tasks: Vec<_> = job.tasks.iter().collect();
        let there = ledger
            .node_names()
            .map(str::to_string)
            .collect::<Vec<_>>()
            .into_iter()
            .find(|n| *n != here && ledger.charge_tasks(n, &tasks))?;
        Some(Action {
            op: Operation::Migrate(Migration {
                job: job.id.clone(),
                task: None,
                node: there,
                purpose: "ping-pong".into(),
            }),
            reason: format!("away from {here}, again"),
        })
    }
}

switchyard_policy_sdk::policy_binding!(Churn, policy);
