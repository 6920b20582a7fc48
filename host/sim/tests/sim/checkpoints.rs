//! A stopped job's checkpoint in the simulator: one that takes longer than the job's
//! grace period is timed out, and the job loses the work since its last complete
//! checkpoint (which shows in its completion time); one acknowledged over the API ends
//! the stop at once; acknowledgements that come late, name a task not asked or go to a
//! job that does not wait for them are refused; the policy sees on a restarted job
//! whether its checkpoint was kept; and in whole offline runs, a policy that preempts
//! jobs whose checkpoints time out finishes them later, while one that moves nothing is
//! untouched.

use crate::simulator::{cpu_job, node, place, preempt, run_to_end, sim};
use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use switchyard_control::{
    AckRefused, Advance, CHECKPOINT_KEPT_LABEL, CheckpointAck, CheckpointOutcome, Cluster,
};
use switchyard_core::{JobPhase, Settings, Trigger};
use switchyard_sim::{
    CheckpointSpec, JobSpec, OfflineRun, Records, Simulator, Workload, load_slot, run_offline,
};

/// A one-core job of `work` units at one unit a second that saves its checkpoint in
/// `cost` seconds and has `grace` seconds to.
fn job_saving(id: &str, work: f64, cost: f64, grace: f64) -> JobSpec {
    JobSpec {
        checkpoint: CheckpointSpec {
            cost: Some(cost),
            grace: Some(grace),
            acknowledged_by_api: false,
        },
        ..cpu_job(id, work, 1.0, 1.0)
    }
}

/// A one-core job whose checkpoint completes only when the API acknowledges it, within
/// `grace` seconds.
fn job_acknowledged_by_api(id: &str, work: f64, grace: f64) -> JobSpec {
    JobSpec {
        checkpoint: CheckpointSpec {
            cost: None,
            grace: Some(grace),
            acknowledged_by_api: true,
        },
        ..cpu_job(id, work, 1.0, 1.0)
    }
}

fn ack(path: &str, task: Option<&str>) -> CheckpointAck {
    CheckpointAck {
        path: path.into(),
        step: None,
        task: task.map(str::to_string),
    }
}

fn kept_label(s: &mut Simulator, job: &str) -> Option<String> {
    let snapshot = s.snapshot(vec![]);
    snapshot
        .job(job)?
        .labels
        .get(CHECKPOINT_KEPT_LABEL)
        .cloned()
}

/// Advances to the next event, which must be the job's preemption.
fn until_preempted(s: &mut Simulator, job: &str) {
    let Advance::Events(triggers) = s.advance(None) else {
        panic!("the checkpoint's end is an event");
    };
    assert_eq!(triggers, [Trigger::JobPreempted(job.into())]);
}

#[test]
fn a_checkpoint_slower_than_the_grace_period_stops_the_job_at_the_grace_and_loses_its_work() {
    // Saving takes 20 s, the grace is 10 s: preempted at t=30, it stops at t=40 with
    // nothing kept (it never completed a checkpoint), so all 100 units are done again.
    let mut s = sim(
        vec![node("n1", 1.0)],
        vec![job_saving("a", 100.0, 20.0, 10.0)],
    );
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    s.advance(Some(30.0));
    s.apply(&[preempt("a")], &[]);
    assert_eq!(s.checkpoint_request("a").requested_at, Some(30.0));
    assert_eq!(kept_label(&mut s, "a"), None, "not restarted yet");
    until_preempted(&mut s, "a");
    assert_eq!(s.now(), 40.0, "stopped at the grace period, not the cost");
    let last: Vec<_> = s
        .last_checkpoints()
        .map(|(id, l)| (id, l.clone()))
        .collect();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].0, "a");
    assert_eq!(
        (last[0].1.outcome, last[0].1.seconds),
        (CheckpointOutcome::TimedOut, 10.0)
    );
    assert_eq!(kept_label(&mut s, "a").as_deref(), Some("false"));
    assert_eq!(s.work_lost("a"), Some(30.0));
    s.advance(Some(100.0));
    s.apply(&[place("a", "main", "n1")], &[]);
    run_to_end(&mut s);
    // Placed at 100, 5 s restoring, then the whole 100 units.
    assert_eq!(s.finish_time("a"), Some(205.0));
    assert_eq!(s.outcomes()[0].work_lost, 30.0);
}

#[test]
fn a_checkpoint_within_the_grace_period_keeps_the_job_s_progress_as_before() {
    let mut s = sim(
        vec![node("n1", 1.0)],
        vec![job_saving("a", 100.0, 5.0, 10.0)],
    );
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    s.advance(Some(30.0));
    s.apply(&[preempt("a")], &[]);
    until_preempted(&mut s, "a");
    assert_eq!(s.now(), 35.0);
    assert_eq!(kept_label(&mut s, "a").as_deref(), Some("true"));
    s.advance(Some(100.0));
    s.apply(&[place("a", "main", "n1")], &[]);
    run_to_end(&mut s);
    // Placed at 100, 5 s restoring, the 70 units left.
    assert_eq!(s.finish_time("a"), Some(175.0));
    assert_eq!(s.work_lost("a"), Some(0.0));
}

#[test]
fn an_acknowledged_job_stops_at_once_and_a_later_timed_out_one_loses_only_the_work_since() {
    let mut s = sim(
        vec![node("n1", 1.0)],
        vec![job_acknowledged_by_api("a", 1000.0, 100.0)],
    );
    s.advance(None);
    s.apply(&[place("a", "main", "n1")], &[]);
    s.advance(Some(30.0));
    s.apply(&[preempt("a")], &[]);
    let asked = s.checkpoint_request("a");
    assert!(asked.requested);
    assert_eq!(
        (asked.requested_at, asked.deadline),
        (Some(30.0), Some(130.0))
    );
    // It waits for the acknowledgement, well past its checkpoint cost.
    s.advance(Some(42.0));
    assert_eq!(s.snapshot(vec![]).jobs[0].phase, JobPhase::Restarting);
    let taken = s
        .acknowledge_checkpoint("a", ack("/ckpt/30", Some("main")))
        .unwrap();
    assert_eq!(taken.after_seconds, 12.0);
    assert!(taken.waiting_for.is_empty());
    assert!(
        !s.checkpoint_request("a").requested,
        "over once acknowledged"
    );
    until_preempted(&mut s, "a");
    assert_eq!(s.now(), 42.0, "stopped at the acknowledgement");
    let (_, last) = s.last_checkpoints().next().unwrap();
    assert_eq!(last.outcome, CheckpointOutcome::Acknowledged);
    assert_eq!(last.path.as_deref(), Some("/ckpt/30"));
    assert_eq!(
        s.acknowledge_checkpoint("a", ack("/ckpt/30", None)),
        Err(AckRefused::NotRequested { job: "a".into() }),
        "a repeated acknowledgement comes too late"
    );
    // Placed again at 50: 5 s restoring, then 25 units by t=80, never acknowledged.
    s.advance(Some(50.0));
    s.apply(&[place("a", "main", "n1")], &[]);
    s.advance(Some(80.0));
    s.apply(&[preempt("a")], &[]);
    until_preempted(&mut s, "a");
    assert_eq!(s.now(), 180.0, "stopped at the grace period");
    assert_eq!(kept_label(&mut s, "a").as_deref(), Some("false"));
    assert_eq!(
        s.work_lost("a"),
        Some(25.0),
        "back to the 30 units of its acknowledged checkpoint"
    );
}

#[test]
fn acknowledgements_not_asked_for_are_refused_with_the_reason() {
    let mut s = sim(
        vec![node("n1", 2.0)],
        vec![
            job_acknowledged_by_api("api", 1000.0, 100.0),
            job_saving("own", 1000.0, 5.0, 10.0),
        ],
    );
    s.advance(None);
    assert_eq!(
        s.acknowledge_checkpoint("api", ack("/c", None)),
        Err(AckRefused::NotRequested { job: "api".into() }),
        "nothing asked yet"
    );
    s.apply(
        &[place("api", "main", "n1"), place("own", "main", "n1")],
        &[],
    );
    s.advance(Some(10.0));
    s.apply(&[preempt("api"), preempt("own")], &[]);
    let refused = s
        .acknowledge_checkpoint("api", ack("/c", Some("worker-7")))
        .unwrap_err();
    assert!(
        matches!(&refused, AckRefused::UnknownTask { asked, .. } if asked == "main"),
        "{refused:?}"
    );
    assert_eq!(
        s.acknowledge_checkpoint("own", ack("/c", None)),
        Err(AckRefused::NotAwaited { job: "own".into() })
    );
    assert_eq!(
        s.acknowledge_checkpoint("api", ack("", None)),
        Err(AckRefused::BadPath { bytes: 0 })
    );
    let huge = "x".repeat(1 << 20);
    assert!(matches!(
        s.acknowledge_checkpoint("api", ack(&huge, None)),
        Err(AckRefused::BadPath { .. })
    ));
    let long_task = "t".repeat(1 << 20);
    assert_eq!(
        s.acknowledge_checkpoint("api", ack("/c", Some(&long_task))),
        Err(AckRefused::BadTask { bytes: 1 << 20 })
    );
    assert!(s.checkpoint_request("api").requested, "still waiting");
}

/// Two four-core nodes, jobs of an hour of work arriving every minute: `preempt-all`
/// preempts them as often as the default disruption budget lets it.
fn busy_workload(cost: f64, grace: f64) -> Workload {
    let text = format!(
        "seed: 1
cluster:
  nodes:
    - {{name: n, count: 2, cpus: 4, memory_gib: 16}}
simulator: {{checkpoint_cost: {cost}, checkpoint_grace: {grace}}}
templates:
  t: {{work: 3600, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}}
jobs:
  - {{template: t, count: 12, every: 60}}
"
    );
    Workload::parse(&text, Path::new("busy.yaml")).unwrap()
}

fn run(policy: &str, workload: &Workload) -> OfflineRun {
    let runtime = support::generous_runtime();
    let fallback = load_slot(&runtime, "default", &BTreeMap::new()).unwrap();
    run_offline(
        &runtime,
        policy,
        &Settings::new(),
        &fallback,
        workload.scenario(1).unwrap(),
        1,
        Records::Stream,
        |_, _| {},
    )
    .unwrap()
}

fn lost(run: &OfflineRun) -> f64 {
    run.result.jobs.iter().map(|j| j.work_lost).sum()
}

#[test]
fn a_policy_that_preempts_jobs_whose_checkpoints_time_out_finishes_them_later_and_one_that_does_not_is_untouched()
 {
    let preempting = support::guest("preempt-all");
    let kept = run(&preempting, &busy_workload(20.0, 30.0));
    let timed_out = run(&preempting, &busy_workload(20.0, 10.0));
    assert!(kept.result.summary.preemptions > 0);
    assert_eq!(lost(&kept), 0.0);
    assert!(lost(&timed_out) > 0.0, "timed-out checkpoints lose work");
    assert!(
        timed_out.result.summary.avg_completion > kept.result.summary.avg_completion,
        "the lost work is done again: mean completion {} s against {} s",
        timed_out.result.summary.avg_completion,
        kept.result.summary.avg_completion
    );
    let calm_kept = run("default", &busy_workload(20.0, 30.0));
    let calm_timed_out = run("default", &busy_workload(20.0, 10.0));
    assert_eq!(calm_timed_out.result.summary.preemptions, 0);
    assert_eq!(
        calm_timed_out.result.summary.avg_completion, calm_kept.result.summary.avg_completion,
        "a policy that moves nothing never waits on a checkpoint"
    );
}

#[test]
fn a_template_that_waits_for_the_api_needs_a_grace_period_and_the_error_names_the_field() {
    let text = "cluster:
  nodes:
    - {name: n, cpus: 4, memory_gib: 16}
templates:
  t: {work: 10, speed: 1.0, acknowledge: api}
jobs:
  - {template: t}
";
    let error = Workload::parse(text, Path::new("w.yaml"))
        .unwrap()
        .scenario(1)
        .unwrap_err()
        .to_string();
    assert!(error.contains("templates.t.acknowledge"), "{error}");
    assert!(error.contains("checkpoint_grace"), "{error}");
    let negative = text.replace("acknowledge: api", "checkpoint_grace: -1");
    let error = Workload::parse(&negative, Path::new("w.yaml"))
        .unwrap()
        .scenario(1)
        .unwrap_err()
        .to_string();
    assert!(error.contains("templates.t.checkpoint_grace"), "{error}");
}
