//! Incremental policies: a kept instance that receives only what changed must hold
//! exactly the snapshot a fresh instance would receive whole, round after round, and the
//! shipped policies must decide the same either way.

use crate::support;

use std::sync::Arc;

use proptest::prelude::*;
use support::{cluster, job, node, res};
use switchyard_core::{Job, JobPhase, LossSample, Settings, Snapshot, TaskPhase, Trigger};
use switchyard_runtime::{
    PolicyModule, PolicyRef, Runtime, RuntimeOptions, SandboxLimits, Session,
};

/// The host's lowering over the guest SDK's types, so the whole snapshot can be printed
/// exactly as the guest prints what it holds.
mod native {
    switchyard_core::snapshot_lowering!(switchyard_policy_sdk);
}

fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions::default()).unwrap()
}

/// The mirror guest, saying whether it reads loss series.
fn mirror(runtime: &Runtime, reads_loss: bool) -> Arc<PolicyModule> {
    let bytes = support::guest_reading_loss("mirror", reads_loss);
    let module = runtime.load(&bytes, "mirror").unwrap();
    assert_eq!(module.description().reads_loss, reads_loss);
    module
}

/// What the mirror guest answers: what the host sent, and what it holds after.
#[derive(Debug, PartialEq)]
struct Mirrored {
    /// The change was a reset.
    reset: bool,
    /// Jobs the change carried whole.
    jobs: usize,
    /// Jobs whose loss series the change moved on.
    loss_updates: usize,
    /// The snapshot held, as the guest prints it.
    held: String,
}

fn held(module: &PolicyModule, session: &Session, snapshot: &Snapshot) -> Mirrored {
    let decision = module
        .decide_in(session, &Settings::new(), snapshot, &[], 1)
        .unwrap();
    let text = String::from_utf8(decision.state).unwrap();
    let (head, held) = text.split_once('\n').unwrap();
    let field = |name: &str| {
        head.split(' ')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name} in {head}"))
            .to_string()
    };
    Mirrored {
        reset: field("reset") == "true",
        jobs: field("jobs").parse().unwrap(),
        loss_updates: field("loss-updates").parse().unwrap(),
        held: held.to_string(),
    }
}

/// The whole snapshot as a policy that reads loss series receives it.
fn whole(snapshot: &Snapshot) -> String {
    format!("{:?}", native::snapshot_to_wit(snapshot))
}

/// The whole snapshot with every job's loss series empty.
fn without_loss(snapshot: &Snapshot) -> String {
    format!("{:?}", native::snapshot_for(snapshot, false))
}

/// The same job but for its loss series.
fn same_but_loss(a: &Job, b: &Job) -> bool {
    let blank = |j: &Job| Job {
        loss: Default::default(),
        ..j.clone()
    };
    blank(a) == blank(b)
}

/// What a delta from `before` to `after` must carry, counted independently of the host's
/// diff: (jobs sent whole, loss updates). A job whose only change is its loss series is
/// a loss update for a policy that reads loss, and nothing at all for one that does not.
fn expected_change(before: &Snapshot, after: &Snapshot, reads_loss: bool) -> (usize, usize) {
    let (mut whole, mut updates) = (0, 0);
    for job in &after.jobs {
        match before.jobs.iter().find(|held| held.id == job.id) {
            None => whole += 1,
            Some(held) if **held == **job => {}
            Some(held) if same_but_loss(held, job) => updates += usize::from(reads_loss),
            Some(_) => whole += 1,
        }
    }
    (whole, updates)
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
                let first = &mut Arc::make_mut(&mut j.tasks)[0];
                first.node = Some(node);
                first.phase = TaskPhase::Running;
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

    /// After every round the kept instance holds exactly the whole snapshot (every loss
    /// series empty for a policy that reads none), only the first round and rounds that
    /// reorder the cluster are sent as resets, and a delta carries exactly the jobs that
    /// changed and, for a policy that reads loss, a loss update per job whose series
    /// alone moved on.
    #[test]
    fn a_kept_instance_holds_exactly_the_whole_snapshot_every_round(
        rounds in prop::collection::vec(prop::collection::vec(step(), 0..4), 1..12)
    ) {
        let runtime = runtime();
        for reads_loss in [true, false] {
            let module = mirror(&runtime, reads_loss);
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
                let got = held(&module, &session, &snapshot);
                let expected = match reads_loss {
                    true => whole(&snapshot),
                    false => without_loss(&snapshot),
                };
                let context = format!("reads_loss {reads_loss}, round {round}: {steps:?}");
                prop_assert_eq!(&got.held, &expected, "{}", context);
                prop_assert_eq!(got.reset, round == 0 || reorders, "{}", context);
                if !got.reset {
                    let carried = (got.jobs, got.loss_updates);
                    let wanted = expected_change(&before, &snapshot, reads_loss);
                    prop_assert_eq!(carried, wanted, "{}", context);
                }
            }
        }
    }
}

/// The most frequent change of a busy cluster, every job reporting progress, is no
/// change at all for a policy that reads no loss.
#[test]
fn a_policy_that_reads_no_loss_is_sent_nothing_when_jobs_only_report_progress() {
    let runtime = runtime();
    let mut snapshot = cluster()
        .node(node("n1"))
        .job(job("j1").loss(&[5.0, 4.0]))
        .job(job("j2").loss(&[3.0]))
        .build();
    let (blind, reading) = (mirror(&runtime, false), mirror(&runtime, true));
    let (blind_session, reading_session) = (Session::default(), Session::default());
    let first = held(&blind, &blind_session, &snapshot);
    assert!(first.reset);
    assert_eq!(first.held, without_loss(&snapshot));
    assert_ne!(
        first.held,
        whole(&snapshot),
        "the series were not empty to begin with"
    );
    held(&reading, &reading_session, &snapshot);

    let mut serial = 0;
    Step::Progress(0, 1, 2).apply(&mut snapshot, &mut serial);
    Step::Progress(1, 0, 1).apply(&mut snapshot, &mut serial);
    let progress = held(&blind, &blind_session, &snapshot);
    assert_eq!(
        (progress.reset, progress.jobs, progress.loss_updates),
        (false, 0, 0)
    );
    assert_eq!(progress.held, without_loss(&snapshot));
    let read = held(&reading, &reading_session, &snapshot);
    assert_eq!((read.reset, read.jobs, read.loss_updates), (false, 0, 2));
    assert_eq!(read.held, whole(&snapshot));

    // A job that changed in more than its loss still comes whole, its series empty.
    Step::Start(0).apply(&mut snapshot, &mut serial);
    Step::Progress(0, 0, 1).apply(&mut snapshot, &mut serial);
    let started = held(&blind, &blind_session, &snapshot);
    assert_eq!(
        (started.reset, started.jobs, started.loss_updates),
        (false, 1, 0)
    );
    assert_eq!(started.held, without_loss(&snapshot));
}

/// A `policy` component gets the whole snapshot on a fresh instance every call; one that
/// reads no loss gets every job's series empty and the rest as before.
#[test]
fn a_whole_snapshot_policy_that_reads_no_loss_gets_every_series_empty() {
    let runtime = runtime();
    let snapshot = cluster()
        .node(node("n1"))
        .job(job("j1").loss(&[5.0, 4.0, 3.0]).running_on("n1"))
        .job(job("j2"))
        .build();
    for reads_loss in [true, false] {
        let echo = runtime
            .load(&support::guest_reading_loss("echo", reads_loss), "echo")
            .unwrap();
        assert_eq!(echo.world(), "switchyard:policy/scheduler@0.3.0");
        let session = Session::default();
        for decision in [
            echo.decide(&Settings::new(), &snapshot, &[], 1),
            echo.decide_in(&session, &Settings::new(), &snapshot, &[], 1),
        ] {
            let given = String::from_utf8(decision.unwrap().state).unwrap();
            let expected = match reads_loss {
                true => whole(&snapshot),
                false => without_loss(&snapshot),
            };
            assert_eq!(given, expected, "reads_loss {reads_loss}");
        }
    }
    assert_ne!(whole(&snapshot), without_loss(&snapshot));
}

#[test]
fn a_session_moved_to_another_component_starts_that_one_afresh() {
    let runtime = runtime();
    let mirror = mirror(&runtime, true);
    let even = PolicyRef::parse("even").unwrap().load(&runtime).unwrap();
    let session = Session::default();
    let snapshot = cluster().node(node("n1")).job(job("j1")).build();

    assert!(
        held(&mirror, &session, &snapshot).reset,
        "first call resets"
    );
    assert!(!held(&mirror, &session, &snapshot).reset, "then deltas");
    even.decide_in(&session, &Settings::new(), &snapshot, &[], 1)
        .unwrap();
    let again = held(&mirror, &session, &snapshot);
    assert!(again.reset, "the mirror's instance was replaced by even's");
    assert_eq!(again.held, whole(&snapshot));
}

/// A hot swap between a policy that reads loss and one that does not: each instance is
/// sent what its own description asks for, from its first call on.
#[test]
fn a_session_moved_between_policies_follows_each_ones_loss_choice() {
    let runtime = runtime();
    let (blind, reading) = (mirror(&runtime, false), mirror(&runtime, true));
    let session = Session::default();
    let mut snapshot = cluster()
        .node(node("n1"))
        .job(job("j1").loss(&[5.0, 4.0]))
        .build();
    let mut serial = 0;
    for (module, reads_loss) in [(&blind, false), (&reading, true), (&blind, false)] {
        let first = held(module, &session, &snapshot);
        assert!(first.reset, "reads_loss {reads_loss}: a fresh instance");
        Step::Progress(0, 1, 1).apply(&mut snapshot, &mut serial);
        let next = held(module, &session, &snapshot);
        assert_eq!(
            (next.reset, next.jobs, next.loss_updates),
            (false, 0, usize::from(reads_loss)),
            "reads_loss {reads_loss}"
        );
        let expected = match reads_loss {
            true => whole(&snapshot),
            false => without_loss(&snapshot),
        };
        assert_eq!(next.held, expected, "reads_loss {reads_loss}");
    }
}

/// SpeCon and FlowCon read jobs' progress; the other shipped policies say they read no
/// loss, which their golden traces (`tests/golden/`) hold them to.
#[test]
fn only_specon_and_flowcon_of_the_shipped_policies_read_loss() {
    let runtime = runtime();
    for builtin in switchyard_runtime::BUILTIN_POLICIES {
        let module = PolicyRef::parse(builtin.name)
            .unwrap()
            .load(&runtime)
            .unwrap();
        assert_eq!(
            module.description().reads_loss,
            matches!(builtin.name, "specon" | "flowcon"),
            "{}",
            builtin.name
        );
    }
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
    let mirror = mirror(&runtime, true);
    assert_eq!(mirror.compiler(), Compiler::Winch);
    let session = Session::default();
    let snapshot = cluster().node(node("n1")).job(job("j1")).build();
    assert!(
        held(&mirror, &session, &snapshot).reset,
        "first call resets"
    );
    support::wait_until(
        "the mirror to run Cranelift's code",
        std::time::Duration::from_secs(60),
        || mirror.compiler() == Compiler::Cranelift,
    );
    let again = held(&mirror, &session, &snapshot);
    assert!(again.reset, "the instance on Winch's code was replaced");
    assert_eq!(again.held, whole(&snapshot));
}

/// A Wasm memory never shrinks: a kept instance whose memory passed three quarters of
/// its cap is dropped after its call, and the next call starts a fresh one (a reset)
/// rather than failing later at the cap. Under a roomy cap the same instance is kept.
#[test]
fn a_kept_instance_whose_memory_nears_its_cap_is_replaced_by_a_fresh_one() {
    let snapshot = cluster().node(node("n1")).job(job("j1")).build();
    // The mirror's memory starts at 17 pages (1,088 KiB); three quarters of 1,400 KiB
    // is less, and the whole cap is enough for its calls.
    for (cap, kept) in [(64 << 20, true), (1_400 << 10, false)] {
        let runtime = Runtime::new(RuntimeOptions {
            limits: SandboxLimits {
                memory_bytes: cap,
                ..SandboxLimits::default()
            },
            ..RuntimeOptions::default()
        })
        .unwrap();
        let module = mirror(&runtime, true);
        let session = Session::default();
        assert!(held(&module, &session, &snapshot).reset, "the first call");
        for round in 0..3 {
            let again = held(&module, &session, &snapshot);
            assert_eq!(again.reset, !kept, "cap {cap}, round {round}");
            assert_eq!(again.held, whole(&snapshot));
        }
    }
}
