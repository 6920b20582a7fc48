//! The disruption budget as a specification: which disruptions (migrations to another
//! node, rescales, preemptions) of a valid decision it lets through, which it refuses
//! and in what words, read from each job's move history alone.

use std::sync::Arc;

use switchyard_core::{
    Action, Decision, DisruptionBudget, DisruptionRefusal, Job, JobMove, JobPhase, MOVE_HISTORY,
    MoveKind, Node, Operation, Rejection, Replicas, Resources, Snapshot, Task, TaskPhase,
    check_decision_within,
};

const BUDGET: DisruptionBudget = DisruptionBudget {
    min_run_time: 300.0,
    max_per_job: 0,
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
fn a_job_started_less_than_the_minimum_run_time_ago_is_not_preempted_and_one_started_earlier_is() {
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
fn every_kind_of_restart_starts_the_minimum_run_time_again_and_every_disruption_is_held_to_it() {
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
fn a_migration_to_the_node_the_job_is_on_only_marks_it_and_neither_waits_for_nor_uses_the_budget() {
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
        ..BUDGET
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
        ..BUDGET
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
    assert!(DisruptionBudget::new(60.0, 2, 0.5, 60.0).is_ok());
    assert!(DisruptionBudget::new(0.0, 0, 1.0, 0.0).is_ok());
    for (budget, says) in [
        (
            DisruptionBudget::new(-1.0, 2, 0.5, 60.0),
            "minimum run time must be a number of seconds, 0 or more",
        ),
        (DisruptionBudget::new(f64::NAN, 2, 0.5, 60.0), "got NaN"),
        (
            DisruptionBudget::new(60.0, 2, 0.0, 60.0),
            "more than 0 and at most 1",
        ),
        (DisruptionBudget::new(60.0, 2, 1.5, 60.0), "got 1.5"),
        (
            DisruptionBudget::new(60.0, 2, 0.5, f64::INFINITY),
            "disruption interval must be",
        ),
    ] {
        let message = budget.unwrap_err().to_string();
        assert!(message.contains(says), "{message}");
    }
}

/// The bound per job alone: `max_per_job` disruptions per `interval`.
fn per_job(max_per_job: u32, interval: f64) -> DisruptionBudget {
    DisruptionBudget {
        min_run_time: 0.0,
        max_per_job,
        max_share: 1.0,
        interval,
    }
}

#[test]
fn a_job_disrupted_as_often_as_its_bound_allows_waits_until_the_oldest_disruption_leaves_the_interval()
 {
    let snapshot = at(
        900.0,
        vec![
            // Two disruptions within the last 600 s: at its bound.
            running(
                "busy",
                &[
                    (MoveKind::Placed, 0.0),
                    (MoveKind::Migrated, 500.0),
                    (MoveKind::Migrated, 700.0),
                ],
            ),
            // One of its two is older than the interval.
            running(
                "rested",
                &[
                    (MoveKind::Placed, 0.0),
                    (MoveKind::Migrated, 200.0),
                    (MoveKind::Migrated, 700.0),
                ],
            ),
        ],
    );
    let checked = check_decision_within(
        &snapshot,
        &decide(vec![preempt("busy"), preempt("rested")]),
        per_job(2, 600.0),
    );
    assert_eq!(checked.accepted.len(), 1);
    assert_eq!(checked.accepted[0].op, preempt("rested"));
    let reason = &checked.rejected[0].reason;
    assert_eq!(reason.metric_label(), "disruption-per-job");
    let message = reason.to_string();
    assert!(
        message.contains("job `busy` was disrupted 2 times in the last 600s")
            && message.contains("allows 2 per job per interval")
            && message.contains("until t=1100.000s"),
        "{message}"
    );
    // A moment after the older one left the interval, one more fits.
    let later = at(1100.5, snapshot.jobs.clone());
    assert!(refused(&later, vec![preempt("busy")], per_job(2, 600.0)).is_empty());
}

#[test]
fn a_preemption_and_the_placement_after_it_count_once_and_marks_not_at_all() {
    let mut marked =
        (*running("j", &[(MoveKind::Placed, 0.0), (MoveKind::Preempted, 10.0)])).clone();
    let mut moves = marked.moves.to_vec();
    moves.push(JobMove {
        time: 20.0,
        kind: MoveKind::Placed,
        purpose: String::new(),
        from_nodes: vec![],
        to_nodes: vec!["n1".into()],
    });
    for t in [30.0, 40.0] {
        moves.push(JobMove {
            time: t,
            kind: MoveKind::Migrated,
            purpose: "mark".into(),
            from_nodes: vec!["n1".into()],
            to_nodes: vec!["n1".into()],
        });
    }
    marked.moves = moves.into();
    let snapshot = at(50.0, vec![Arc::new(marked)]);
    assert!(refused(&snapshot, vec![preempt("j")], per_job(2, 600.0)).is_empty());
    assert_eq!(
        refused(&snapshot, vec![preempt("j")], per_job(1, 600.0)),
        ["disruption-per-job"]
    );
}

#[test]
fn a_job_whose_moves_overflow_its_history_within_the_interval_counts_as_at_its_bound() {
    // A policy that marks a job every round pushes its disruptions out of the history
    // the budget reads; the budget then cannot tell how many there were, and refuses.
    let mut flooded = (*running("j", &[(MoveKind::Placed, 0.0)])).clone();
    flooded.moves = (0..MOVE_HISTORY)
        .map(|i| JobMove {
            time: 100.0 + i as f64,
            kind: MoveKind::Migrated,
            purpose: "mark".into(),
            from_nodes: vec!["n1".into()],
            to_nodes: vec!["n1".into()],
        })
        .collect();
    let snapshot = at(200.0, vec![Arc::new(flooded)]);
    let checked = check_decision_within(&snapshot, &decide(vec![preempt("j")]), per_job(8, 600.0));
    let message = checked.rejected[0].reason.to_string();
    assert!(
        message.contains(&format!("moved {MOVE_HISTORY} times in the last 600s"))
            && message.contains("until t=700.000s"),
        "{message}"
    );
    // With an interval the history covers, it counts them: none is a disruption.
    assert!(refused(&snapshot, vec![preempt("j")], per_job(8, 50.0)).is_empty());
}

#[test]
fn no_bound_per_job_without_an_interval_or_with_a_bound_of_zero() {
    let snapshot = at(
        100.0,
        vec![running(
            "j",
            &[
                (MoveKind::Placed, 0.0),
                (MoveKind::Migrated, 50.0),
                (MoveKind::Migrated, 60.0),
            ],
        )],
    );
    assert_eq!(
        refused(&snapshot, vec![preempt("j")], per_job(1, 600.0)),
        ["disruption-per-job"]
    );
    assert!(refused(&snapshot, vec![preempt("j")], per_job(0, 600.0)).is_empty());
    assert!(refused(&snapshot, vec![preempt("j")], per_job(1, 0.0)).is_empty());
}
