//! The disruption budget: how often the host lets a policy disrupt running jobs.
//!
//! A disruption is an action that stops a running job at a checkpoint: a migration that
//! moves a task to another node, a rescale, a preemption. The validator checks each one
//! on its own merits; the budget ([`DisruptionBudget`]) bounds them over time, so that a
//! policy which disrupts every job every round (each action valid alone) cannot keep
//! the cluster from making progress:
//!
//! - **minimum run time**: a job that was started, restarted, migrated, rescaled or
//!   preempted is not disrupted again until that many seconds of cluster time have
//!   passed since;
//! - **cap per interval**: within any interval, at most a share of the jobs holding nodes
//!   (never fewer than one job) is disrupted, across the whole cluster.
//!
//! Both rules read the snapshot alone (each job's move history, which every backend keeps
//! with the host clock's times, and its start time), so they hold the same way on the
//! simulator and on Kubernetes, and across a controller restart or a change of leader.
//! The validator consults a [`Gate`] for every disruption it would otherwise accept
//! (`check_decision_within`); this module must not know about capacity, eligibility or
//! phases, which are the validator's rules.

use crate::model::{Job, JobMove, MoveKind, Snapshot};

/// Limits on how often running jobs may be disrupted (migrated to another node, rescaled
/// or preempted). [`Default`] is the host's default, on; [`DisruptionBudget::OFF`]
/// lets every valid disruption through.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DisruptionBudget {
    /// Cluster seconds a job runs after it was started, restarted, migrated, rescaled or
    /// preempted before it may be disrupted again; 0 sets no minimum.
    pub min_run_time: f64,
    /// The largest share of the jobs holding nodes that may be disrupted within one
    /// [`DisruptionBudget::interval`], in (0, 1]; at least one job per interval is
    /// always allowed. 1 sets no cap.
    pub max_share: f64,
    /// The interval the share is counted over, cluster seconds; 0 sets no cap.
    pub interval: f64,
}

/// The default minimum run time, cluster seconds.
pub const DEFAULT_MIN_RUN_TIME: f64 = 20.0;
/// The default share of the jobs holding nodes that may be disrupted per interval.
pub const DEFAULT_MAX_DISRUPTED_SHARE: f64 = 0.5;
/// The default interval of the cap, cluster seconds.
pub const DEFAULT_DISRUPTION_INTERVAL: f64 = 60.0;

impl Default for DisruptionBudget {
    fn default() -> Self {
        Self {
            min_run_time: DEFAULT_MIN_RUN_TIME,
            max_share: DEFAULT_MAX_DISRUPTED_SHARE,
            interval: DEFAULT_DISRUPTION_INTERVAL,
        }
    }
}

/// A disruption budget setting out of range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DisruptionBudgetError {
    /// The minimum run time is negative or not a number.
    #[error("the minimum run time must be a number of seconds, 0 or more (0: no minimum); got {0}")]
    MinRunTime(f64),
    /// The share is outside (0, 1].
    #[error(
        "the share of jobs that may be disrupted per interval must be more than 0 and at most 1 (1: no cap); got {0}"
    )]
    Share(f64),
    /// The interval is negative or not a number.
    #[error("the disruption interval must be a number of seconds, 0 or more (0: no cap); got {0}")]
    Interval(f64),
}

impl DisruptionBudget {
    /// No limit: every disruption the validator accepts goes through.
    pub const OFF: DisruptionBudget = DisruptionBudget {
        min_run_time: 0.0,
        max_share: 1.0,
        interval: 0.0,
    };

    /// A budget of these settings, each checked against its range.
    pub fn new(
        min_run_time: f64,
        max_share: f64,
        interval: f64,
    ) -> Result<Self, DisruptionBudgetError> {
        let seconds = |s: f64| s.is_finite() && s >= 0.0;
        if !seconds(min_run_time) {
            return Err(DisruptionBudgetError::MinRunTime(min_run_time));
        }
        if !(max_share > 0.0 && max_share <= 1.0) {
            return Err(DisruptionBudgetError::Share(max_share));
        }
        if !seconds(interval) {
            return Err(DisruptionBudgetError::Interval(interval));
        }
        Ok(Self {
            min_run_time,
            max_share,
            interval,
        })
    }

    fn caps(&self) -> bool {
        self.interval > 0.0 && self.max_share < 1.0
    }
}

/// Why the budget turned a disruption down.
#[derive(Clone, Debug, PartialEq, thiserror::Error, serde::Serialize)]
#[serde(tag = "budget", rename_all = "kebab-case")]
pub enum DisruptionRefusal {
    /// The job started, restarted or was disrupted less than the minimum run time ago.
    #[error(
        "job `{job}` was {what} at t={since:.3}s; the disruption budget lets it run {min_run_time}s before it is migrated, rescaled or preempted again (from t={until:.3}s)"
    )]
    MinRunTime {
        /// Job id.
        job: String,
        /// What happened last (`started`, `restarted`, `migrated`, ...).
        what: &'static str,
        /// When, cluster seconds.
        since: f64,
        /// The minimum run time, seconds.
        min_run_time: f64,
        /// The earliest time it may be disrupted again.
        until: f64,
    },
    /// The cluster already had its share of disruptions in the current interval.
    #[error(
        "job `{job}`: {disrupted} of the {holding} jobs holding nodes were disrupted in the last {interval}s; the disruption budget allows {allowed} per interval ({share} of them, at least one)"
    )]
    Cap {
        /// Job id.
        job: String,
        /// Disruptions in the last interval, this decision's included.
        disrupted: usize,
        /// Jobs holding nodes.
        holding: usize,
        /// Disruptions allowed per interval.
        allowed: usize,
        /// The share the budget allows.
        share: f64,
        /// The interval, seconds.
        interval: f64,
    },
}

impl DisruptionRefusal {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            DisruptionRefusal::MinRunTime { .. } => "disruption-min-run-time",
            DisruptionRefusal::Cap { .. } => "disruption-cap",
        }
    }
}

/// Whether `moved` stopped the job or started it: a migration that only marked the job
/// (no task changed node) did neither.
fn restarts(moved: &JobMove) -> bool {
    !(moved.kind == MoveKind::Migrated && moved.from_nodes == moved.to_nodes)
}

/// Whether `moved` disrupted a running job.
fn disrupts(moved: &JobMove) -> bool {
    moved.kind != MoveKind::Placed && restarts(moved)
}

/// The last time `job` started or restarted, and what happened then.
fn last_restart(job: &Job) -> Option<(f64, &'static str)> {
    let moved = job.moves.iter().rev().find(|m| restarts(m));
    let from_history = moved.map(|m| {
        let what = match m.kind {
            // A placement after a preemption resumes the job from its checkpoint.
            MoveKind::Placed if job.moves.iter().any(|m| m.kind == MoveKind::Preempted) => {
                "restarted"
            }
            MoveKind::Placed => "started",
            MoveKind::Migrated => "migrated",
            MoveKind::Rescaled => "rescaled",
            MoveKind::Preempted => "preempted",
        };
        (m.time, what)
    });
    // A job whose history was lost (or is older than the history kept) still has the
    // time it started.
    match (from_history, job.start_time) {
        (Some(last), _) => Some(last),
        (None, Some(start)) => Some((start, "started")),
        (None, None) => None,
    }
}

/// The budget applied to one decision: the minimum run time per job, and the cap with
/// the disruptions this decision has accepted so far. What the cap counts is read from
/// the snapshot only when a decision holds a disruption.
pub(crate) struct Gate<'a> {
    budget: DisruptionBudget,
    snapshot: &'a Snapshot,
    /// Disruptions in the interval so far (the snapshot's and this decision's), and
    /// jobs holding nodes.
    counted: Option<(usize, usize)>,
}

impl<'a> Gate<'a> {
    pub(crate) fn new(budget: DisruptionBudget, snapshot: &'a Snapshot) -> Self {
        Self {
            budget,
            snapshot,
            counted: None,
        }
    }

    /// Whether `job` may be disrupted now. Counts nothing: [`Gate::disrupted`] does,
    /// once the validator accepted the action.
    pub(crate) fn admit(&mut self, job: &Job) -> Result<(), DisruptionRefusal> {
        let now = self.snapshot.time;
        let min_run_time = self.budget.min_run_time;
        if min_run_time > 0.0
            && let Some((since, what)) = last_restart(job)
            && now - since < min_run_time
        {
            return Err(DisruptionRefusal::MinRunTime {
                job: job.id.clone(),
                what,
                since,
                min_run_time,
                until: since + min_run_time,
            });
        }
        if !self.budget.caps() {
            return Ok(());
        }
        let (disrupted, holding) = *self
            .counted
            .get_or_insert_with(|| count(self.snapshot, now - self.budget.interval));
        let allowed = ((self.budget.max_share * holding as f64).floor() as usize).max(1);
        if disrupted >= allowed {
            return Err(DisruptionRefusal::Cap {
                job: job.id.clone(),
                disrupted,
                holding,
                allowed,
                share: self.budget.max_share,
                interval: self.budget.interval,
            });
        }
        Ok(())
    }

    /// Counts an accepted disruption against the cap.
    pub(crate) fn disrupted(&mut self) {
        if let Some((disrupted, _)) = self.counted.as_mut() {
            *disrupted += 1;
        }
    }
}

/// Disruptions after `since` in the move histories of the snapshot's jobs, and the
/// jobs holding nodes.
fn count(snapshot: &Snapshot, since: f64) -> (usize, usize) {
    let mut disrupted = 0;
    let mut holding = 0;
    for job in &snapshot.jobs {
        if job.tasks.iter().any(|t| t.node.is_some()) {
            holding += 1;
        }
        disrupted += job
            .moves
            .iter()
            .rev()
            .take_while(|m| m.time > since)
            .filter(|m| disrupts(m))
            .count();
    }
    (disrupted, holding)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{
        Action, Decision, JobPhase, Node, Operation, Replicas, Resources, Task, TaskPhase,
    };
    use crate::validate::{Rejection, check_decision_within};

    const BUDGET: DisruptionBudget = DisruptionBudget {
        min_run_time: 300.0,
        max_share: 0.5,
        interval: 60.0,
    };

    fn node(name: &str) -> Arc<Node> {
        Arc::new(Node {
            name: name.into(),
            allocatable: Resources {
                cpu_millis: 64_000,
                memory_bytes: 64 << 30,
                gpus: 0,
            },
            requested: Resources::default(),
            usage: None,
            labels: Default::default(),
            schedulable: true,
        })
    }

    /// A checkpointable one-task job running on `n1`, with `moves` (kind, time) in its
    /// history: a placement on `n1` first, unless the history says otherwise.
    fn running(id: &str, moves: &[(MoveKind, f64)]) -> Arc<Job> {
        let on = |kind| match kind {
            MoveKind::Placed => (vec![], vec!["n1".to_string()]),
            MoveKind::Preempted => (vec!["n1".to_string()], vec![]),
            _ => (vec!["n0".to_string()], vec!["n1".to_string()]),
        };
        Arc::new(Job {
            id: id.into(),
            phase: JobPhase::Running,
            submit_time: 0.0,
            start_time: moves.first().map(|m| m.1),
            priority: 0,
            utility: 1.0,
            tasks: Arc::new([Task {
                name: "main".into(),
                role: "main".into(),
                node: Some("n1".into()),
                phase: TaskPhase::Running,
                requests: Resources {
                    cpu_millis: 1000,
                    memory_bytes: 1 << 30,
                    gpus: 0,
                },
                cpu_weight: 1.0,
                usage: None,
                eligible: None,
            }]),
            replicas: Replicas {
                role: "main".into(),
                current: 1,
                min: 1,
                max: 2,
            },
            loss: Arc::new([]),
            metric_rises: false,
            moves: moves
                .iter()
                .map(|&(kind, time)| {
                    let (from_nodes, to_nodes) = on(kind);
                    JobMove {
                        time,
                        kind,
                        purpose: String::new(),
                        from_nodes,
                        to_nodes,
                    }
                })
                .collect(),
            checkpointable: true,
            labels: Default::default(),
        })
    }

    fn at(time: f64, jobs: Vec<Arc<Job>>) -> Snapshot {
        Snapshot {
            time,
            nodes: vec![node("n1"), node("n2")],
            jobs,
            ..Snapshot::default()
        }
    }

    fn decide(ops: Vec<Operation>) -> Decision {
        Decision {
            actions: ops
                .into_iter()
                .map(|op| Action {
                    op,
                    reason: "test".into(),
                })
                .collect(),
            ..Decision::default()
        }
    }

    fn preempt(job: &str) -> Operation {
        Operation::Preempt { job: job.into() }
    }

    /// Metric labels of the rejections, in order.
    fn refused(
        snapshot: &Snapshot,
        ops: Vec<Operation>,
        budget: DisruptionBudget,
    ) -> Vec<&'static str> {
        check_decision_within(snapshot, &decide(ops), budget)
            .rejected
            .iter()
            .map(|r| r.reason.metric_label())
            .collect()
    }

    #[test]
    fn a_job_started_less_than_the_minimum_run_time_ago_is_not_preempted_and_one_started_earlier_is()
     {
        let snapshot = at(
            1000.0,
            vec![
                running("fresh", &[(MoveKind::Placed, 800.0)]),
                running("old", &[(MoveKind::Placed, 700.0)]),
            ],
        );
        let checked = check_decision_within(
            &snapshot,
            &decide(vec![preempt("fresh"), preempt("old")]),
            DisruptionBudget {
                max_share: 1.0,
                ..BUDGET
            },
        );
        assert_eq!(checked.accepted.len(), 1);
        assert_eq!(checked.accepted[0].op, preempt("old"));
        let reason = &checked.rejected[0].reason;
        assert_eq!(reason.metric_label(), "disruption-min-run-time");
        let message = reason.to_string();
        assert!(
            message.contains("job `fresh` was started at t=800.000s")
                && message.contains("from t=1100.000s"),
            "{message}"
        );
    }

    #[test]
    fn every_kind_of_restart_starts_the_minimum_run_time_again_and_every_disruption_is_held_to_it()
    {
        for (history, what) in [
            (
                vec![(MoveKind::Placed, 0.0), (MoveKind::Migrated, 900.0)],
                "migrated",
            ),
            (
                vec![(MoveKind::Placed, 0.0), (MoveKind::Rescaled, 900.0)],
                "rescaled",
            ),
            (
                vec![
                    (MoveKind::Placed, 0.0),
                    (MoveKind::Preempted, 500.0),
                    (MoveKind::Placed, 900.0),
                ],
                "restarted",
            ),
        ] {
            let snapshot = at(1000.0, vec![running("j", &history)]);
            for op in [
                preempt("j"),
                Operation::Scale {
                    job: "j".into(),
                    replicas: 2,
                    nodes: vec!["n2".into()],
                },
                Operation::Migrate {
                    job: "j".into(),
                    task: None,
                    node: "n2".into(),
                    purpose: String::new(),
                },
            ] {
                let checked = check_decision_within(&snapshot, &decide(vec![op.clone()]), BUDGET);
                let message = checked.rejected[0].reason.to_string();
                assert!(
                    message.contains(&format!("was {what} at t=900.000s")),
                    "{op:?}: {message}"
                );
            }
        }
    }

    #[test]
    fn a_migration_to_the_node_the_job_is_on_only_marks_it_and_neither_waits_for_nor_uses_the_budget()
     {
        let snapshot = at(
            10.0,
            vec![
                running("j", &[(MoveKind::Placed, 5.0)]),
                running("k", &[(MoveKind::Placed, 0.0)]),
            ],
        );
        let mark = Operation::Migrate {
            job: "j".into(),
            task: None,
            node: "n1".into(),
            purpose: "mark".into(),
        };
        let budget = DisruptionBudget {
            min_run_time: 1.0,
            ..BUDGET
        };
        assert!(refused(&snapshot, vec![mark, preempt("k")], budget).is_empty());
    }

    #[test]
    fn the_cap_counts_the_interval_s_disruptions_in_the_history_and_in_the_decision() {
        // Ten jobs holding nodes, half of them may be disrupted per minute; two already
        // were within the last minute, one just before it.
        let mut jobs: Vec<Arc<Job>> = (0..7)
            .map(|i| running(&format!("j{i}"), &[(MoveKind::Placed, 0.0)]))
            .collect();
        for (i, t) in [(7, 950.0), (8, 990.0), (9, 900.0)] {
            jobs.push(running(
                &format!("j{i}"),
                &[(MoveKind::Placed, 0.0), (MoveKind::Migrated, t)],
            ));
        }
        let snapshot = at(1000.0, jobs);
        let budget = DisruptionBudget {
            min_run_time: 0.0,
            ..BUDGET
        };
        let all: Vec<Operation> = (0..7).map(|i| preempt(&format!("j{i}"))).collect();
        let checked = check_decision_within(&snapshot, &decide(all), budget);
        assert_eq!(checked.accepted.len(), 3, "5 allowed, 2 used");
        assert_eq!(checked.rejected.len(), 4);
        let message = checked.rejected[0].reason.to_string();
        assert!(
            message.contains("5 of the 10 jobs holding nodes were disrupted in the last 60s")
                && message.contains("allows 5 per interval"),
            "{message}"
        );
        assert!(
            checked
                .rejected
                .iter()
                .all(|r| r.reason.metric_label() == "disruption-cap")
        );
    }

    #[test]
    fn a_cluster_with_one_job_may_still_disrupt_it_once_per_interval() {
        let budget = DisruptionBudget {
            min_run_time: 0.0,
            max_share: 0.1,
            interval: 60.0,
        };
        let once = at(100.0, vec![running("j", &[(MoveKind::Placed, 0.0)])]);
        assert!(refused(&once, vec![preempt("j")], budget).is_empty());
        let again = at(
            100.0,
            vec![running(
                "j",
                &[(MoveKind::Placed, 0.0), (MoveKind::Migrated, 50.0)],
            )],
        );
        assert_eq!(
            refused(&again, vec![preempt("j")], budget),
            ["disruption-cap"]
        );
    }

    #[test]
    fn a_disruption_the_validator_refuses_for_its_own_reasons_uses_none_of_the_cap() {
        let budget = DisruptionBudget {
            min_run_time: 0.0,
            max_share: 0.5,
            interval: 60.0,
        };
        let snapshot = at(
            100.0,
            vec![
                running("a", &[(MoveKind::Placed, 0.0)]),
                running("b", &[(MoveKind::Placed, 0.0)]),
            ],
        );
        let to_nowhere = Operation::Migrate {
            job: "a".into(),
            task: None,
            node: "no-such-node".into(),
            purpose: String::new(),
        };
        assert_eq!(
            refused(&snapshot, vec![to_nowhere, preempt("b")], budget),
            ["unknown-node"]
        );
        let rejection =
            &check_decision_within(&snapshot, &decide(vec![preempt("a"), preempt("b")]), budget)
                .rejected[0];
        assert!(matches!(
            rejection.reason,
            Rejection::Disruption(DisruptionRefusal::Cap { .. })
        ));
    }

    #[test]
    fn without_a_budget_every_valid_disruption_goes_through() {
        let snapshot = at(
            1.0,
            (0..4)
                .map(|i| running(&format!("j{i}"), &[(MoveKind::Placed, 0.5)]))
                .collect(),
        );
        let all = (0..4).map(|i| preempt(&format!("j{i}"))).collect();
        assert!(refused(&snapshot, all, DisruptionBudget::OFF).is_empty());
    }

    #[test]
    fn settings_out_of_range_are_refused_naming_what_is_accepted() {
        assert!(DisruptionBudget::new(60.0, 0.5, 60.0).is_ok());
        assert!(DisruptionBudget::new(0.0, 1.0, 0.0).is_ok());
        for (budget, says) in [
            (
                DisruptionBudget::new(-1.0, 0.5, 60.0),
                "minimum run time must be a number of seconds, 0 or more",
            ),
            (DisruptionBudget::new(f64::NAN, 0.5, 60.0), "got NaN"),
            (
                DisruptionBudget::new(60.0, 0.0, 60.0),
                "more than 0 and at most 1",
            ),
            (DisruptionBudget::new(60.0, 1.5, 60.0), "got 1.5"),
            (
                DisruptionBudget::new(60.0, 0.5, f64::INFINITY),
                "disruption interval must be",
            ),
        ] {
            let message = budget.unwrap_err().to_string();
            assert!(message.contains(says), "{message}");
        }
    }
}
