//! The default disruption budget against the policies it must leave alone: every
//! shipped policy decides exactly the same on every example workload with the default
//! budget as with none. The same runs measure how the policies disrupt jobs when nothing
//! bounds them (per job: how often within an interval, how soon after it started or
//! restarted; across the cluster: the share of the jobs holding nodes disrupted per
//! minute), and the test checks that the default keeps its margin over that. With
//! `--nocapture` it prints the measurement `docs/security.md` quotes:
//!
//! ```sh
//! cargo test --workspace --test sim disruptions:: -- --nocapture
//! ```

use crate::support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use switchyard_control::{
    ActionOutcome, Advance, Cluster, ControlLoop, DecisionRecord, PolicySlot,
};
use switchyard_core::{Action, DisruptionBudget, JobLabel, JobMove, Snapshot, Trigger};
use switchyard_runtime::Runtime;
use switchyard_sim::{Simulator, Workload};

/// The shipped policies.
const POLICIES: &[&str] = &[
    "default", "dragon", "even", "flowcon", "gang", "specon", "tiresias",
];

/// Every example workload a policy is shown with: all of `examples/` but the Philly
/// replays and the scale examples, which measure throughput and footprint under
/// `default` (a policy that never disrupts) and take minutes each.
const WORKLOADS: &[&str] = &[
    "constrained-gpus.yaml",
    "dragon-table1.yaml",
    "flowcon-random-10.yaml",
    "flowcon-random-5.yaml",
    "flowcon-three-jobs.yaml",
    "gang-three-ps-jobs.yaml",
    "pollux-workload-1.yaml",
    "pollux-workload-2.yaml",
    "pollux-workload-3.yaml",
    "pollux-workload-4.yaml",
    "pollux-workload-5.yaml",
    "pollux-workload-6.yaml",
    "pollux-workload-7.yaml",
    "pollux-workload-8.yaml",
    "quickstart.yaml",
    "specon-8-workers-50.yaml",
    "specon-fixed-vae.yaml",
    "specon-random-20.yaml",
    "specon-random-30.yaml",
];

/// The intervals the measurement counts one job's disruptions over, seconds.
const INTERVALS: [f64; 4] = [60.0, 600.0, 3600.0, 86400.0];

/// The simulator, watched: every job's whole move history (the snapshot keeps only the
/// most recent moves) and, per round, how many jobs held nodes.
struct Watched {
    sim: Simulator,
    moves: BTreeMap<String, Vec<JobMove>>,
    holding: Vec<(f64, usize)>,
}

impl Watched {
    fn new(sim: Simulator) -> Self {
        Self {
            sim,
            moves: BTreeMap::new(),
            holding: Vec::new(),
        }
    }

    /// Adds the moves of `snapshot` not seen before: its history is a suffix of the
    /// whole one, so what follows the last move already kept is new.
    fn watch(&mut self, snapshot: &Snapshot) {
        let holding = snapshot
            .jobs
            .iter()
            .filter(|j| j.tasks.iter().any(|t| t.node.is_some()))
            .count();
        self.holding.push((snapshot.time, holding));
        for job in &snapshot.jobs {
            let kept = self.moves.entry(job.id.clone()).or_default();
            let new_from = kept
                .last()
                .and_then(|last| job.moves.iter().rposition(|m| m == last))
                .map_or(0, |at| at + 1);
            kept.extend(job.moves[new_from..].iter().cloned());
        }
    }
}

impl Cluster for Watched {
    fn now(&self) -> f64 {
        self.sim.now()
    }
    fn advance(&mut self, until: Option<f64>) -> Advance {
        self.sim.advance(until)
    }
    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        let snapshot = self.sim.snapshot(triggers);
        self.watch(&snapshot);
        snapshot
    }
    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) -> Vec<ActionOutcome> {
        self.sim.apply(accepted, labels)
    }
    fn finished_jobs(&self) -> usize {
        self.sim.finished_jobs()
    }
}

/// How one run disrupted its jobs.
#[derive(Clone, Debug, Default)]
struct Measured {
    /// Disruptions in all.
    disruptions: usize,
    /// Jobs disrupted at least once.
    jobs: usize,
    /// Per interval of [`INTERVALS`], the most disruptions of one job within it.
    most_per_job: [usize; INTERVALS.len()],
    /// The shortest time a job ran from its last start or restart to a disruption.
    shortest_run: Option<f64>,
    /// The largest share of the jobs holding nodes disrupted within one minute.
    largest_share: f64,
}

impl Measured {
    fn of(watched: &Watched) -> Self {
        let mut measured = Measured::default();
        let mut all_times = Vec::new();
        for moves in watched.moves.values() {
            let mut since = None;
            let mut times = Vec::new();
            for m in moves {
                if m.disrupts() {
                    times.push(m.time);
                    if let Some(start) = since {
                        let ran: f64 = m.time - start;
                        measured.shortest_run =
                            Some(measured.shortest_run.map_or(ran, |s| s.min(ran)));
                    }
                }
                if m.restarts() {
                    since = Some(m.time);
                }
            }
            if times.is_empty() {
                continue;
            }
            measured.jobs += 1;
            measured.disruptions += times.len();
            for (most, interval) in measured.most_per_job.iter_mut().zip(INTERVALS) {
                *most = (*most).max(most_within(&times, interval));
            }
            all_times.extend(times);
        }
        all_times.sort_by(f64::total_cmp);
        for (i, &t) in all_times.iter().enumerate() {
            let within = i + 1 - all_times.partition_point(|&s| s <= t - 60.0);
            let holding = watched
                .holding
                .iter()
                .rev()
                .find(|(at, _)| *at <= t)
                .map_or(1, |&(_, n)| n.max(1));
            measured.largest_share = measured.largest_share.max(within as f64 / holding as f64);
        }
        measured
    }
}

/// The most of the sorted `times` that fall within one interval (s - interval, s].
fn most_within(times: &[f64], interval: f64) -> usize {
    times
        .iter()
        .enumerate()
        .map(|(i, &t)| i + 1 - times.partition_point(|&s| s <= t - interval))
        .max()
        .unwrap_or(0)
}

/// Where the run under the default budget first decided otherwise than the run
/// without one: the round, and what the budget refused there.
fn first_change(off: &[DecisionRecord], on: &[DecisionRecord]) -> Option<String> {
    let Some((a, b)) = off.iter().zip(on).find(|(a, b)| a != b) else {
        return (off.len() != on.len()).then(|| {
            format!(
                "{} rounds without a budget, {} with it",
                off.len(),
                on.len()
            )
        });
    };
    let refused: Vec<&str> = b
        .arm_a
        .rejected
        .iter()
        .map(|r| r.rejected_because.as_str())
        .filter(|reason| {
            !a.arm_a
                .rejected
                .iter()
                .any(|r| r.rejected_because == *reason)
        })
        .collect();
    Some(format!(
        "round {} at t={:.0}s: {refused:?}",
        b.round, b.time
    ))
}

fn example(name: &str) -> Workload {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    Workload::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs `workload` on its own seed under `policy` with its defaults and `budget`,
/// keeping every record.
fn run(
    runtime: &Runtime,
    workload: &Workload,
    policy: &str,
    budget: DisruptionBudget,
) -> (Vec<DecisionRecord>, Watched) {
    let fallback: PolicySlot = support::policy_slot(runtime, "default");
    let scenario = workload.scenario(workload.seed()).unwrap();
    let mut watched = Watched::new(Simulator::new(scenario));
    let mut control = ControlLoop::new(
        support::policy_slot(runtime, policy),
        fallback,
        workload.seed(),
    )
    .keep_records(true)
    .with_disruption_budget(budget);
    control.run(&mut watched, |_, _| {});
    (control.records().to_vec(), watched)
}

#[test]
fn every_shipped_policy_decides_alike_on_every_example_with_the_default_budget_and_without_one() {
    let runtime = support::generous_runtime();
    let budget = DisruptionBudget::default();
    let rows: Vec<(String, Measured, Option<String>)> = std::thread::scope(|scope| {
        let runs: Vec<_> = POLICIES
            .iter()
            .map(|&policy| {
                let runtime = &runtime;
                scope.spawn(move || {
                    WORKLOADS
                        .iter()
                        .map(|&file| {
                            let workload = example(file);
                            let (off, watched) =
                                run(runtime, &workload, policy, DisruptionBudget::OFF);
                            let (on, _) = run(runtime, &workload, policy, budget);
                            let changed = first_change(&off, &on);
                            (
                                format!("{policy} on {file}"),
                                Measured::of(&watched),
                                changed,
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|r| r.join().expect("a policy's runs"))
            .collect()
    });

    println!(
        "| policy on workload | disruptions | jobs disrupted | most of one job per {} | shortest run before one | largest share per 60 s |",
        INTERVALS.map(|i| format!("{i} s")).join(" / ")
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, m, _) in rows.iter().filter(|(_, m, _)| m.disruptions > 0) {
        let most = m.most_per_job.map(|n| n.to_string()).join(" / ");
        let shortest = m.shortest_run.map_or("-".into(), |s| format!("{s:.1} s"));
        println!(
            "| {name} | {} | {} | {most} | {shortest} | {:.2} |",
            m.disruptions, m.jobs, m.largest_share
        );
    }
    let changed: Vec<String> = rows
        .iter()
        .filter_map(|(name, _, changed)| Some(format!("{name}: {}", changed.as_ref()?)))
        .collect();
    assert!(
        changed.is_empty(),
        "the default budget changes decisions:\n{}",
        changed.join("\n")
    );

    // The default's margin: no job of any paper policy comes within half of the bound
    // per job, over the default interval.
    let at = INTERVALS
        .iter()
        .position(|&i| i == budget.interval)
        .expect("the default interval is one the measurement counts over");
    let (name, most) = rows
        .iter()
        .map(|(name, m, _)| (name, m.most_per_job[at]))
        .max_by_key(|&(_, most)| most)
        .expect("runs");
    assert!(
        most * 2 <= budget.max_per_job as usize,
        "{name} disrupts one job {most} times within {}s, more than half the default bound of {}",
        budget.interval,
        budget.max_per_job
    );
}
