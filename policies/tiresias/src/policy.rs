//! Tiresias as a plain function of (settings, snapshot, state): ranking, admission,
//! preemption, placement and labels; the state blob is [`crate::blob`]'s. No WIT glue.

use switchyard_policy_sdk::{
    Action, Decision, Description, JobLabel, Operation, Placement, Resources, Setting, Snapshot,
    cluster::{Ledger, ResourcesExt, pending_tasks},
    log,
    settings::{ParamSpec, Settings, parameters},
};

use crate::blob;
use crate::facts::Facts;
use crate::queues::{Queues, Standing, Transition, ranking};

/// Tiresias's parameters, with the artifact's values as defaults.
pub const SPEC: &[ParamSpec] = &[
    ParamSpec {
        name: "queue_thresholds",
        default: "57600",
        doc: "attained service (GPU-seconds, or core-seconds for a job without GPUs) at which a job moves down a queue: comma-separated, ascending; one more queue than values",
    },
    ParamSpec {
        name: "promote_knob",
        default: "0",
        doc: "starvation rule: a job that ran before returns to the top queue after waiting this many times its service time in its queue (0: never)",
    },
    ParamSpec {
        name: "interval",
        default: "60",
        doc: "seconds between rounds when nothing arrives or leaves (service is counted at each round)",
    },
];

/// The label each job carries: its queue.
pub const QUEUE_LABEL: &str = "tiresias.queue";

struct Params {
    queues: Queues,
    interval: f64,
}

fn params(settings: &[Setting]) -> Result<Params, String> {
    let s = Settings::resolve(SPEC, settings)?;
    let thresholds = parse_thresholds(s.text("queue_thresholds"))?;
    Ok(Params {
        queues: Queues {
            thresholds,
            promote_knob: s.f64_in("promote_knob", 0.0, 1e6)?,
        },
        interval: s.f64_in("interval", 1.0, 86_400.0)?,
    })
}

/// `57600` or `3600, 57600`: positive, finite, strictly ascending; empty: one queue
/// (first come, first served with preemption only by the starvation rule).
fn parse_thresholds(text: &str) -> Result<Vec<f64>, String> {
    let values: Vec<f64> = text
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
            _ => Err(format!(
                "parameter `queue_thresholds`: `{v}` is not a positive number of seconds"
            )),
        })
        .collect::<Result<_, _>>()?;
    if values.len() > 16 {
        return Err("parameter `queue_thresholds`: at most 16 thresholds".into());
    }
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(format!(
            "parameter `queue_thresholds` must ascend strictly, got `{text}`"
        ));
    }
    Ok(values)
}

/// Name, version, summary, parameters.
pub fn describe() -> Description {
    Description {
        name: "tiresias".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        summary: "Tiresias (NSDI 2019): discretized 2D least-attained-service queues; lower queues are preempted for higher ones".into(),
        parameters: parameters(SPEC),
        reads_loss: false, // attained service is time and GPUs, never loss
    }
}

/// Checks the settings and answers the effective ones.
pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
    params(settings)?;
    Ok(Settings::resolve(SPEC, settings)?.to_settings())
}

/// One round: bring every job's standing up to date, admit jobs in rank order while
/// capacity lasts, preempt the running ones left out, place the waiting ones let in.
pub fn decide(settings: &[Setting], snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    let params = params(settings)?;
    let mut memory = blob::read(blob)?;
    memory.follow(snapshot);
    let now = snapshot.time;
    let mut tickets = memory.tickets;
    let slots = memory.slots.values_mut();
    let mut standings: Vec<Standing> = Vec::with_capacity(slots.len());
    // Standings come, and tickets are handed out, in snapshot order.
    for (job, slot) in snapshot.jobs.iter().zip(slots.iter_mut()) {
        let mut standing = slot.standing.take().unwrap_or_else(|| {
            tickets += 1;
            Standing::new(now, tickets - 1)
        });
        let moved = standing.advance(
            now,
            slot.facts.holds,
            slot.facts.width,
            &params.queues,
            &mut tickets,
        );
        if let Some(transition) = moved {
            log::debug(&describe_transition(&job.id, standing.queue, &transition));
        }
        standings.push(standing);
    }
    let facts: Vec<&Facts> = slots.iter().map(|s| &s.facts).collect();
    let order = ranking(&standings);
    let admitted = admit(snapshot, &facts, &order);
    let mut ledger = Ledger::new(snapshot);
    let mut actions = Vec::new();
    for (rank, &i) in order.iter().enumerate() {
        let job = &snapshot.jobs[i];
        let standing = &standings[i];
        match (facts[i].holds, admitted[i]) {
            (true, false) if facts[i].preemptible => actions.push(Action {
                op: Operation::Preempt(job.id.clone()),
                reason: format!(
                    "Q{} rank {}: jobs ranked above it need its resources (service {:.0})",
                    standing.queue,
                    rank + 1,
                    standing.service(facts[i].width)
                ),
            }),
            (false, true) => {
                let tasks = pending_tasks(job);
                if tasks.is_empty() {
                    continue;
                }
                if let Some(assignments) = ledger.pack_gang_of(job, &tasks) {
                    actions.push(Action {
                        op: Operation::Place(Placement {
                            job: job.id.clone(),
                            assignments,
                        }),
                        reason: format!(
                            "Q{} rank {}: admitted; whole gang of {} task(s) packed",
                            standing.queue,
                            rank + 1,
                            tasks.len()
                        ),
                    });
                }
            }
            _ => {}
        }
    }
    let labels = queue_labels(snapshot, &mut standings);
    for (slot, standing) in memory.slots.values_mut().iter_mut().zip(standings) {
        slot.standing = Some(standing);
    }
    memory.tickets = tickets;
    Ok(Decision {
        actions,
        labels,
        next_call_after: Some(params.interval),
        state: memory.write_and_keep(now),
    })
}

/// Which jobs may hold resources this round: jobs that cannot be preempted keep theirs,
/// then the rest, in rank order, while the schedulable nodes' capacity lasts. A job
/// too large for what is left does not stop smaller ones ranked below it. `order` is
/// the jobs' positions in rank order ([`ranking`]).
fn admit(snapshot: &Snapshot, facts: &[&Facts], order: &[usize]) -> Vec<bool> {
    let mut left = snapshot
        .nodes
        .iter()
        .filter(|n| n.schedulable)
        .fold(Resources::zero(), |acc, n| acc.plus(&n.allocatable));
    let mut admitted = vec![false; facts.len()];
    for (i, fact) in facts.iter().enumerate() {
        if fact.holds && !fact.preemptible {
            left = left.saturating_minus(&fact.demand);
            admitted[i] = true;
        }
    }
    for &i in order {
        if admitted[i] {
            continue;
        }
        let demand = &facts[i].demand;
        if left.covers(demand) {
            left = left.saturating_minus(demand);
            admitted[i] = true;
        }
    }
    admitted
}

/// `tiresias.queue=Q<k>` for every job whose queue the host has not been told yet.
fn queue_labels(snapshot: &Snapshot, standings: &mut [Standing]) -> Vec<JobLabel> {
    snapshot
        .jobs
        .iter()
        .zip(standings.iter_mut())
        .filter(|(_, s)| s.shown != Some(s.queue))
        .map(|(job, s)| {
            s.shown = Some(s.queue);
            JobLabel {
                job: job.id.clone(),
                key: QUEUE_LABEL.into(),
                value: format!("Q{}", s.queue),
            }
        })
        .collect()
}

fn describe_transition(job: &str, queue: usize, transition: &Transition) -> String {
    match transition {
        Transition::Demoted { from, service } => {
            format!("{job}: Q{from} -> Q{queue} (service {service:.0})")
        }
        Transition::Promoted { from, waited } => {
            format!("{job}: Q{from} -> Q{queue} (starved: waited {waited:.0}s)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::State;
    use switchyard_policy_sdk::testing::*;
    use switchyard_policy_sdk::{Operation, Trigger, state};

    fn gpu_nodes(count: usize, gpus: u32) -> Vec<switchyard_policy_sdk::Node> {
        (0..count)
            .map(|i| node(&format!("n{i}"), 64_000).gpus(gpus))
            .collect()
    }

    /// `(preempted, placed)` job ids of a decision.
    fn moves(d: &Decision) -> (Vec<String>, Vec<String>) {
        let mut preempted = Vec::new();
        let mut placed = Vec::new();
        for a in &d.actions {
            match &a.op {
                Operation::Preempt(job) => preempted.push(job.clone()),
                Operation::Place(p) => placed.push(p.job.clone()),
                other => panic!("unexpected {other:?}"),
            }
        }
        (preempted, placed)
    }

    fn label_of(d: &Decision, job: &str) -> Option<String> {
        d.labels
            .iter()
            .find(|l| l.job == job && l.key == QUEUE_LABEL)
            .map(|l| l.value.clone())
    }

    #[test]
    fn waiting_jobs_are_placed_first_come_first_served_and_labelled_q0() {
        let s = snapshot(
            0.0,
            gpu_nodes(1, 4),
            vec![
                job("a").requests(1000, 2),
                job("b").requests(1000, 4).submitted_at(1.0),
                job("c").requests(1000, 2).submitted_at(2.0),
            ],
        );
        let d = decide(&[], &s, &[]).unwrap();
        // a takes 2 GPUs; b (4) no longer fits and is skipped, c (2) fits.
        assert_eq!(moves(&d), (vec![], vec!["a".into(), "c".into()]));
        assert_eq!(label_of(&d, "b").as_deref(), Some("Q0"));
        assert_eq!(d.next_call_after, Some(60.0));
    }

    #[test]
    fn a_job_demoted_past_the_threshold_is_preempted_for_a_waiting_top_queue_job() {
        let settings = [setting("queue_thresholds", "1000")];
        let nodes = gpu_nodes(1, 4);
        let old = job("old").requests(1000, 4).running_on("n0");
        let d0 = decide(
            &settings,
            &snapshot(0.0, nodes.clone(), vec![old.clone()]),
            &[],
        )
        .unwrap();
        assert_eq!(label_of(&d0, "old").as_deref(), Some("Q0"));
        // 4 GPUs x 300 s = 1200 GPU-s: demoted to Q1. A new job arrives needing all 4.
        let s = snapshot(
            300.0,
            nodes,
            vec![old, job("new").requests(1000, 4).submitted_at(300.0)],
        )
        .triggered_by(vec![Trigger::JobArrived("new".into())]);
        let d1 = decide(&settings, &s, &d0.state).unwrap();
        assert_eq!(
            moves(&d1),
            (vec!["old".into()], vec![]),
            "no room until it is saved"
        );
        assert_eq!(label_of(&d1, "old").as_deref(), Some("Q1"));
        assert!(
            d1.actions[0].reason.contains("Q1"),
            "{}",
            d1.actions[0].reason
        );
        // The checkpoint is saved: `old` waits, `new` is placed, and `old` stays out.
        let s = snapshot(
            305.0,
            gpu_nodes(1, 4),
            vec![
                job("old").requests(1000, 4),
                job("new").requests(1000, 4).submitted_at(300.0),
            ],
        )
        .triggered_by(vec![Trigger::JobPreempted("old".into())]);
        let d2 = decide(&settings, &s, &d1.state).unwrap();
        assert_eq!(moves(&d2), (vec![], vec!["new".into()]));
    }

    #[test]
    fn a_job_that_cannot_checkpoint_is_never_preempted() {
        let settings = [setting("queue_thresholds", "10")];
        let pinned = job("pinned")
            .requests(1000, 4)
            .running_on("n0")
            .not_checkpointable();
        let d0 = decide(
            &settings,
            &snapshot(0.0, gpu_nodes(1, 4), vec![pinned.clone()]),
            &[],
        )
        .unwrap();
        let s = snapshot(
            100.0,
            gpu_nodes(1, 4),
            vec![pinned, job("new").requests(1000, 4).submitted_at(100.0)],
        );
        let d1 = decide(&settings, &s, &d0.state).unwrap();
        assert_eq!(moves(&d1), (vec![], vec![]));
    }

    /// `s` after the host applied `d`: placements bound and running, preempted jobs
    /// waiting again with their nodes released.
    fn after(s: &Snapshot, d: &Decision) -> Snapshot {
        use switchyard_policy_sdk::cluster::ResourcesExt;
        use switchyard_policy_sdk::{JobPhase, TaskPhase};
        let mut next = applied(s, d);
        for action in &d.actions {
            let Operation::Preempt(id) = &action.op else {
                continue;
            };
            let job = next.jobs.iter_mut().find(|j| j.id == *id).unwrap();
            job.phase = JobPhase::Waiting;
            for t in &mut job.tasks {
                if let Some(n) = next
                    .nodes
                    .iter_mut()
                    .find(|n| Some(&n.name) == t.node.as_ref())
                {
                    n.requested = n.requested.saturating_minus(&t.requests);
                }
                t.node = None;
                t.phase = TaskPhase::Pending;
            }
            next.triggers = vec![Trigger::JobPreempted(id.clone())];
        }
        next
    }

    /// A kept instance, given only what changed each round, against a fresh instance
    /// given the same snapshot and blob: the same decisions, the same blob.
    #[test]
    fn a_kept_instance_decides_and_writes_as_a_fresh_instance_would() {
        let settings = [setting("queue_thresholds", "1000")];
        let round = snapshot(
            0.0,
            gpu_nodes(1, 4),
            vec![job("old").requests(1000, 4), job("small").requests(1000, 1)],
        );
        let changes: [Change; 7] = [
            &|s| s.time = 60.0,
            &|s| {
                s.time = 300.0;
                s.jobs
                    .push(job("new").requests(1000, 4).submitted_at(300.0));
            },
            &|s| s.time = 305.0,
            &|s| s.time = 365.0,
            &|s| {
                s.time = 400.0;
                s.jobs.retain(|j| j.id != "new");
                s.nodes[0].requested = Resources::zero();
                s.triggers = vec![Trigger::JobFinished("new".into())];
            },
            &|s| s.time = 460.0,
            &|s| s.time = 520.0,
        ];
        kept_against_fresh(
            round,
            Vec::new(),
            &changes,
            |s, blob| decide(&settings, s, blob).unwrap(),
            |s, blob, _| as_fresh_instance(blob::kept(), || decide(&settings, s, blob).unwrap()),
            after,
            |s, kept| {
                let read: State = state::decode(&kept.state).unwrap();
                assert_eq!(read.jobs.len(), s.jobs.len(), "a standing per job");
            },
        );
    }

    #[test]
    fn jobs_that_left_are_forgotten() {
        let d0 = decide(
            &[],
            &snapshot(0.0, gpu_nodes(1, 4), vec![job("a"), job("b")]),
            &[],
        )
        .unwrap();
        let d1 = decide(
            &[],
            &snapshot(10.0, gpu_nodes(1, 4), vec![job("b")]),
            &d0.state,
        )
        .unwrap();
        let st: State = state::decode(&d1.state).unwrap();
        let ids: Vec<&str> = st.jobs.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["b"]);
        assert!(d1.labels.is_empty(), "b's label was sent already");
    }

    #[test]
    fn placement_stays_inside_the_eligible_nodes() {
        let s =
            snapshot(0.0, gpu_nodes(2, 4), vec![job("a").requests(1000, 2)]).only_on("a", &["n1"]);
        let d = decide(&[], &s, &[]).unwrap();
        let Operation::Place(p) = &d.actions[0].op else {
            panic!("{:?}", d.actions)
        };
        assert_eq!(p.assignments[0].node, "n1");
    }

    #[test]
    fn bad_thresholds_are_refused_naming_the_value() {
        for bad in ["-5", "100, 50", "abc"] {
            let error = configure(&[setting("queue_thresholds", bad)]).unwrap_err();
            assert!(error.contains("queue_thresholds"), "{bad}: {error}");
        }
        assert!(configure(&[setting("queue_thresholds", "3600, 57600")]).is_ok());
    }
}
