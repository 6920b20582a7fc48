//! Incremental policies: a kept instance that receives only what changed must hold
//! exactly the snapshot a fresh instance would receive whole, round after round, and the
//! shipped policies must decide the same either way.

use crate::support;
use support::guests;

use std::sync::Arc;

use proptest::prelude::*;
use support::{cluster, job, node, res};
use switchyard_core::model::{JobPhase, LossSample, Settings, Snapshot, TaskPhase, Trigger};
use switchyard_runtime::registry::PolicyRef;
use switchyard_runtime::{PolicyModule, Runtime, RuntimeOptions, Session};

static MIRROR: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| guests::path("mirror"));

/// The host's lowering over the guest SDK's types, so the whole snapshot can be printed
/// exactly as the guest prints what it holds.
mod native {
    switchyard_core::snapshot_lowering!(switchyard_policy_sdk);
}

fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions::default()).unwrap()
}

fn mirror(runtime: &Runtime) -> std::sync::Arc<PolicyModule> {
    runtime
        .load(&std::fs::read(&*MIRROR).unwrap(), "mirror")
        .unwrap()
}

/// What the mirror guest answers: whether it was reset, and what it holds.
fn held(module: &PolicyModule, session: &Session, snapshot: &Snapshot) -> (bool, String) {
    let decision = module
        .decide_in(session, &Settings::new(), snapshot, &[], 1)
        .unwrap();
    let text = String::from_utf8(decision.state).unwrap();
    let (reset, held) = text.split_once('\n').unwrap();
    (reset == "reset=true", held.to_string())
}

fn whole(snapshot: &Snapshot) -> String {
    format!("{:?}", native::snapshot_to_wit(snapshot))
}

/// One change to the cluster between two rounds.
#[derive(Clone, Debug)]
enum Step {
    /// A job arrives (after the others).
    Arrive,
    /// The job at this index (modulo the count) finishes.
    Finish(usize),
    /// The job's loss series moves on: `drop` oldest samples leave, `add` new ones come.
    Progress(usize, usize, usize),
    /// The job's loss series is replaced by an unrelated one.
    NewLoss(usize),
    /// The job's first task is bound to a node and runs.
    Start(usize),
    /// A node's requested resources change.
    Load(usize),
    /// A node leaves.
    NodeLeaves(usize),
    /// A node joins.
    NodeJoins,
    /// A new job is put first: the delta cannot say that, so the host resets.
    ArriveFirst,
    /// Two jobs trade places: likewise a reset.
    Swap(usize, usize),
}

/// True when `after`'s jobs can be reached from `before`'s by removals, in-place
/// changes and appends: the jobs both hold are in the same order and the new ones come
/// last. Otherwise the host must send a reset.
fn reachable_by_delta(before: &Snapshot, after: &Snapshot) -> bool {
    let held = |s: &Snapshot, other: &Snapshot| -> Vec<String> {
        s.jobs
            .iter()
            .filter(|j| other.jobs.iter().any(|o| o.id == j.id))
            .map(|j| j.id.clone())
            .collect()
    };
    let old_in_new = held(after, before);
    let new_follow_old = after.jobs[..old_in_new.len()]
        .iter()
        .all(|j| before.jobs.iter().any(|o| o.id == j.id));
    held(before, after) == old_in_new && new_follow_old
}

impl Step {
    fn apply(&self, s: &mut Snapshot, serial: &mut usize) {
        *serial += 1;
        let id = format!("job-{serial}");
        let jobs = s.jobs.len();
        let nodes = s.nodes.len();
        match *self {
            Step::Arrive => s.jobs.push(job(&id).loss(&[3.0, 2.0]).build().into()),
            Step::ArriveFirst => s.jobs.insert(0, job(&id).build().into()),
            Step::Finish(i) if jobs > 0 => {
                let gone = s.jobs.remove(i % jobs);
                s.triggers.push(Trigger::JobFinished(gone.id.clone()));
            }
            Step::Progress(i, drop, add) if jobs > 0 => {
                let job = Arc::make_mut(&mut s.jobs[i % jobs]);
                let mut loss = job.loss.to_vec();
                loss.drain(..drop.min(loss.len()));
                let last = loss.last().map_or(0.0, |l| l.time);
                for k in 1..=add {
                    loss.push(LossSample {
                        time: last + k as f64,
                        step: *serial as u64 * 10 + k as u64,
                        value: 1.0 / (*serial + k) as f64,
                    });
                }
                job.loss = loss.into();
            }
            Step::NewLoss(i) if jobs > 0 => {
                Arc::make_mut(&mut s.jobs[i % jobs]).loss = [LossSample {
                    time: *serial as f64,
                    step: 1,
                    value: 9.0,
                }]
                .into();
            }
            Step::Start(i) if jobs > 0 && nodes > 0 => {
                let node = s.nodes[i % nodes].name.clone();
                let j = Arc::make_mut(&mut s.jobs[i % jobs]);
                j.phase = JobPhase::Running;
                j.tasks[0].node = Some(node);
                j.tasks[0].phase = TaskPhase::Running;
            }
            Step::Load(i) if nodes > 0 => {
                Arc::make_mut(&mut s.nodes[i % nodes]).requested = res(*serial as f64 % 8.0, 1, 0);
            }
            Step::NodeLeaves(i) if nodes > 0 => {
                s.nodes.remove(i % nodes);
            }
            Step::NodeJoins => s.nodes.push(node(&format!("node-{serial}")).0.into()),
            Step::Swap(a, b) if jobs > 0 => s.jobs.swap(a % jobs, b % jobs),
            _ => {}
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Arrive),
        2 => (0..8usize).prop_map(Step::Finish),
        4 => (0..8usize, 0..3usize, 0..3usize).prop_map(|(i, d, a)| Step::Progress(i, d, a)),
        1 => (0..8usize).prop_map(Step::NewLoss),
        2 => (0..8usize).prop_map(Step::Start),
        2 => (0..8usize).prop_map(Step::Load),
        1 => (0..8usize).prop_map(Step::NodeLeaves),
        1 => Just(Step::NodeJoins),
        1 => Just(Step::ArriveFirst),
        1 => (0..8usize, 0..8usize).prop_map(|(a, b)| Step::Swap(a, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// After every round the kept instance holds exactly the whole snapshot, and only
    /// the first round and rounds that reorder the cluster are sent as resets.
    #[test]
    fn a_kept_instance_holds_exactly_the_whole_snapshot_every_round(
        rounds in prop::collection::vec(prop::collection::vec(step(), 0..4), 1..12)
    ) {
        let runtime = runtime();
        let module = mirror(&runtime);
        let session = Session::default();
        let mut snapshot = cluster()
            .node(node("n1"))
            .node(node("n2"))
            .job(job("j1").loss(&[5.0, 4.0, 3.0]))
            .job(job("j2"))
            .build();
        let mut serial = 0;
        for (round, steps) in rounds.iter().enumerate() {
            snapshot.time = round as f64 * 30.0;
            snapshot.triggers = vec![Trigger::Tick];
            let before = snapshot.clone();
            for step in steps {
                step.apply(&mut snapshot, &mut serial);
            }
            let reorders = !reachable_by_delta(&before, &snapshot);
            let (reset, held) = held(&module, &session, &snapshot);
            prop_assert_eq!(held, whole(&snapshot), "round {}: {:?}", round, steps);
            prop_assert_eq!(reset, round == 0 || reorders, "round {}: {:?}", round, steps);
        }
    }
}

#[test]
fn a_session_moved_to_another_component_starts_that_one_afresh() {
    let runtime = runtime();
    let mirror = mirror(&runtime);
    let even = PolicyRef::parse("even").unwrap().load(&runtime).unwrap();
    let session = Session::default();
    let snapshot = cluster().node(node("n1")).job(job("j1")).build();

    assert!(held(&mirror, &session, &snapshot).0, "first call resets");
    assert!(!held(&mirror, &session, &snapshot).0, "then deltas");
    even.decide_in(&session, &Settings::new(), &snapshot, &[], 1)
        .unwrap();
    let (reset, held) = held(&mirror, &session, &snapshot);
    assert!(reset, "the mirror's instance was replaced by even's");
    assert_eq!(held, whole(&snapshot));
}

/// Each shipped policy, called round after round on a kept instance, decides exactly
/// what a fresh instance given the whole snapshot decides.
#[test]
fn the_shipped_policies_decide_the_same_on_a_kept_instance_as_on_a_fresh_one() {
    let runtime = runtime();
    for name in ["default", "even", "specon", "flowcon", "dragon", "gang"] {
        let mut snapshot = cluster()
            .node(node("n1").cpus(16.0))
            .node(node("n2").cpus(16.0))
            .job(job("j1").loss(&[5.0, 4.0, 3.5, 3.4]).running_on("n1"))
            .job(job("j2").loss(&[6.0, 3.0]).running_on("n2"))
            .job(job("j3"))
            .build();
        let module = PolicyRef::parse(name).unwrap().load(&runtime).unwrap();
        let session = Session::default();
        let (mut kept_state, mut fresh_state) = (Vec::new(), Vec::new());
        let mut serial = 0;
        for round in 0..8 {
            snapshot.time = 100.0 + round as f64 * 60.0;
            Step::Progress(round, 1, 2).apply(&mut snapshot, &mut serial);
            if round % 3 == 0 {
                Step::Arrive.apply(&mut snapshot, &mut serial);
            }
            let kept = module
                .decide_in(
                    &session,
                    &Settings::new(),
                    &snapshot,
                    &kept_state,
                    round as u64,
                )
                .unwrap();
            let fresh = module
                .decide(&Settings::new(), &snapshot, &fresh_state, round as u64)
                .unwrap();
            assert_eq!(kept, fresh, "{name}, round {round}");
            kept_state = kept.state;
            fresh_state = fresh.state;
        }
    }
}

/// On the controller's runtime a new component's first calls run Winch's code; when
/// Cranelift's code replaces it, a kept instance starts over from the whole snapshot.
#[test]
fn a_kept_instance_starts_afresh_on_the_code_that_replaced_it() {
    use switchyard_runtime::Compiler;
    let runtime = Runtime::new(RuntimeOptions {
        quick_first: true,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let mirror = mirror(&runtime);
    assert_eq!(mirror.compiler(), Compiler::Winch);
    let session = Session::default();
    let snapshot = cluster().node(node("n1")).job(job("j1")).build();
    assert!(held(&mirror, &session, &snapshot).0, "first call resets");
    support::wait_until(
        "the mirror to run Cranelift's code",
        std::time::Duration::from_secs(60),
        || mirror.compiler() == Compiler::Cranelift,
    );
    let (reset, held) = held(&mirror, &session, &snapshot);
    assert!(reset, "the instance on Winch's code was replaced");
    assert_eq!(held, whole(&snapshot));
}
