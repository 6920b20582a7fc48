//! One decision round, Wasm component against the same policy compiled natively, on
//! synthetic clusters of 10 to 5,000 nodes (10 tasks per node), and where the time of a
//! Wasm round goes.
//!
//! `cargo bench --bench decision`; the figures and their reading are in
//! `docs/performance.md`.
//!
//! Groups:
//! - `round/<policy>/<impl>/<nodes>`: a SpeCon round (second call, so jobs are
//!   categorised) and a DRAGON round, `wasm` (host lowering, fresh instance, the whole
//!   snapshot, decision back) against `native` (the policy's `decide` on an owned
//!   snapshot, the same state), and `kept` (the steady state of a controller: the
//!   instance kept from the previous round, every job reported one new loss sample
//!   since, so the host sends a loss update per job, and the state is the one the
//!   previous round returned) against `native-kept` (the same rounds and states,
//!   natively);
//! - `round/idle/<impl>/<nodes>` and `round/idle-reading-loss/...`: the same `kept` and
//!   `native-kept` rounds of the `idle` test guest, bound as the shipped policies are
//!   and deciding nothing, saying it reads no loss (as DRAGON) or reads it (as SpeCon):
//!   what a kept call costs before the policy's own work;
//! - `steady/diff/<nodes>`: the host's half of a `kept` round alone: diffing the
//!   snapshot against the held copy and lowering the delta;
//! - `breakdown/<part>/<nodes>`: the host's lowering of the snapshot to WIT values, a
//!   call of the `null` policy (decides nothing) on an empty snapshot (instantiation and
//!   call overhead) and on the full snapshot (plus moving the snapshot into the guest);
//! - `placement/<policy>/<impl>`: 10,000 pending pods (5,000 two-task jobs) on 5,000
//!   nodes that already run 50,000 tasks, `default` (pod by pod) and DRAGON (gangs);
//! - `sandbox/<with|without>`: a SpeCon round at 1,000 nodes with and without the epoch
//!   deadline and memory cap.

#[path = "support/synthetic.rs"]
mod synthetic;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use switchyard_core::{Change, HeldSnapshot, LossSample, Settings, Snapshot};
use switchyard_policy_sdk::IncrementalGuest;
use switchyard_runtime::{
    PolicyModule, PolicyRef, Runtime, RuntimeOptions, SandboxLimits, Session, delta_to_wit,
    snapshot_to_wit,
};

/// The allocator the `switchyard` binary ships with: the host's half of a round builds,
/// diffs and drops thousands of small strings and vectors, and glibc's allocator times
/// that differently.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The model-to-WIT lowering the host uses, over the guest SDK's types: the native
/// policies get exactly the snapshot the components get.
mod native {
    switchyard_core::snapshot_lowering!(switchyard_policy_sdk);
}

const SIZES: [usize; 4] = [10, 100, 1_000, 5_000];

/// A snapshot of 5,000 nodes lowered into a guest takes more than the default 64 MiB,
/// so the benches give components room; `docs/performance.md` says how much they use.
fn runtime(unsandboxed: bool) -> Runtime {
    Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline: Duration::from_secs(30),
            memory_bytes: 1 << 30,
            ..SandboxLimits::default()
        },
        unsandboxed,
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

fn load(runtime: &Runtime, name: &str) -> Arc<PolicyModule> {
    PolicyRef::parse(name)
        .expect("a policy name")
        .load(runtime)
        .expect("the policy loads")
}

/// A policy both ways: its component and its native `decide`.
struct Subject {
    name: &'static str,
    module: Arc<PolicyModule>,
    /// The policy module's own `decide`, as `policy_binding!` calls it: on a borrowed
    /// snapshot, so dropping the snapshot is not part of the round.
    native: NativeDecide,
    /// The same policy natively as its component is bound (`policy_binding!`): the
    /// SDK applies a change to the snapshot it holds, then calls `decide`.
    incremental: IncrementalDecide,
    /// What its description says.
    reads_loss: bool,
}

/// A policy binding's `IncrementalGuest::decide`.
type IncrementalDecide = fn(
    Vec<switchyard_policy_sdk::Setting>,
    switchyard_policy_sdk::SnapshotDelta,
    Vec<u8>,
) -> Result<switchyard_policy_sdk::Decision, String>;

/// A policy module's `policy::decide`.
type NativeDecide = fn(
    &[switchyard_policy_sdk::Setting],
    &switchyard_policy_sdk::Snapshot,
    &[u8],
) -> Result<switchyard_policy_sdk::Decision, String>;

impl Subject {
    fn new(runtime: &Runtime, name: &'static str) -> Self {
        let (native, incremental, described): (NativeDecide, IncrementalDecide, _) = match name {
            "specon" => (
                switchyard_policy_specon::policy::decide,
                <switchyard_policy_specon::SpeconPolicy as IncrementalGuest>::decide,
                switchyard_policy_specon::policy::describe(),
            ),
            "dragon" => (
                switchyard_policy_dragon::policy::decide,
                <switchyard_policy_dragon::DragonPolicy as IncrementalGuest>::decide,
                switchyard_policy_dragon::policy::describe(),
            ),
            "default" => (
                switchyard_policy_default::policy::decide,
                <switchyard_policy_default::DefaultPolicy as IncrementalGuest>::decide,
                switchyard_policy_default::policy::describe(),
            ),
            other => panic!("no native build of {other} in this bench"),
        };
        // A build of the policy with its symbols, for profiles (`docs/performance.md`).
        let module = match std::env::var_os(format!("DECISION_BENCH_{}", name.to_uppercase())) {
            Some(path) => runtime
                .load(&std::fs::read(&path).expect("the component file"), name)
                .expect("the component loads"),
            None => load(runtime, name),
        };
        Self {
            name,
            module,
            native,
            incremental,
            reads_loss: described.reads_loss,
        }
    }

    /// The state after one earlier round, as the controller would hand it in.
    fn warmed_state(&self, snapshot: &Snapshot) -> Vec<u8> {
        let mut earlier = snapshot.clone();
        earlier.time -= 30.0;
        self.wasm(&earlier, &[]).state
    }

    fn wasm(&self, snapshot: &Snapshot, state: &[u8]) -> switchyard_core::Decision {
        self.module
            .decide(&Settings::default(), snapshot, state, 1)
            .unwrap_or_else(|e| panic!("{} decides: {e}", self.name))
    }

    /// Rounds on an instance kept between them, each on the next round's snapshot and
    /// the state the previous round returned, as a controller hands them in.
    fn bench_kept(
        &self,
        g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        label: &str,
        snapshot: &Snapshot,
        state: &[u8],
    ) {
        let session = Session::default();
        kept_rounds(
            g,
            BenchmarkId::new("kept", label),
            snapshot,
            state,
            |s, state| {
                let decision = self
                    .module
                    .decide_in(&session, &Settings::default(), s, state, 1)
                    .unwrap_or_else(|e| panic!("{} decides: {e}", self.name));
                (decision.state, decision.actions)
            },
        );
    }

    /// The same rounds as [`Subject::bench_kept`], natively (`native-kept`): each on the
    /// next round's snapshot (lowered outside the measurement) and the state the
    /// previous round returned.
    fn bench_native_kept(
        &self,
        g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        label: &str,
        snapshot: &Snapshot,
        state: &[u8],
    ) {
        let current = std::cell::RefCell::new(snapshot.clone());
        let state = std::cell::RefCell::new(state.to_vec());
        g.bench_function(BenchmarkId::new("native-kept", label), |b| {
            b.iter_batched_ref(
                || {
                    let mut s = current.borrow_mut();
                    next_round(&mut s);
                    native::snapshot_to_wit(&s)
                },
                |s| {
                    let decision = (self.native)(&[], s, &state.borrow()).expect("native decides");
                    *state.borrow_mut() = decision.state;
                    black_box(decision.actions)
                },
                BatchSize::PerIteration,
            )
        });
    }

    /// The same rounds as [`Subject::bench_kept`], with the policy compiled natively
    /// and driven as its component is (`native-incremental`): the host's diff against
    /// its held copy, the change lowered to the SDK's types, the SDK applying it to the
    /// snapshot it holds and the policy following what it named, then `decide`. What is
    /// left between this row and `kept` is the cost of Wasm itself: the call across
    /// the component boundary, the copies in and out of linear memory, Wasm code.
    fn bench_native_incremental(
        &self,
        g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        label: &str,
        snapshot: &Snapshot,
        state: &[u8],
    ) {
        // The first round is a reset: the SDK drops what an earlier row left it.
        let held = std::cell::RefCell::new(HeldSnapshot::for_policy(self.reads_loss));
        let id = BenchmarkId::new("native-incremental", label);
        kept_rounds(g, id, snapshot, state, |s, state| {
            let mut held = held.borrow_mut();
            let change = held.change_to(s);
            let delta = native::delta_for(s, &change, self.reads_loss);
            let decision = (self.incremental)(vec![], delta, state.to_vec())
                .unwrap_or_else(|e| panic!("{} decides natively: {e}", self.name));
            held.commit(s, &change);
            (decision.state, decision.actions)
        });
    }

    fn bench(&self, c: &mut Criterion, group: &str, label: &str, snapshot: &Snapshot, kept: bool) {
        let state = self.warmed_state(snapshot);
        let actions = self.wasm(snapshot, &state).actions.len();
        let lowered = native::snapshot_to_wit(snapshot);
        let native_actions = (self.native)(&[], &lowered, &state)
            .expect("native decides")
            .actions
            .len();
        assert_eq!(
            actions, native_actions,
            "{} decides differently natively",
            self.name
        );
        eprintln!("{group}/{}/{label}: {actions} actions", self.name);
        let mut g = c.benchmark_group(format!("{group}/{}", self.name));
        g.bench_function(BenchmarkId::new("wasm", label), |b| {
            b.iter(|| black_box(self.wasm(snapshot, &state)))
        });
        if kept {
            self.bench_kept(&mut g, label, snapshot, &state);
        }
        g.bench_function(BenchmarkId::new("native", label), |b| {
            b.iter(|| black_box((self.native)(&[], &lowered, &state)))
        });
        if kept {
            self.bench_native_kept(&mut g, label, snapshot, &state);
            self.bench_native_incremental(&mut g, label, snapshot, &state);
        }
        g.finish();
    }
}

/// Rounds as a controller hands them to a kept instance, timed one per setup: each on
/// the next round's snapshot ([`next_round`]) and the state `decide` returned the round
/// before (`decide` gives the state and what the round decided). The first round, on
/// `snapshot` and `state`, primes the instance outside the measurement.
///
/// The previous round's snapshot is kept until the next setup: the host's held copy
/// lets go of its jobs during the round, and if it held the last reference the round
/// would time freeing them, which the `native-kept` row does outside the measurement
/// (criterion drops its lowered snapshot after the round).
fn kept_rounds<A>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    snapshot: &Snapshot,
    state: &[u8],
    decide: impl Fn(&Snapshot, &[u8]) -> (Vec<u8>, A),
) {
    let current = std::cell::RefCell::new(snapshot.clone());
    let state = std::cell::RefCell::new(decide(&current.borrow(), state).0);
    let previous = std::cell::RefCell::new(None::<Snapshot>);
    g.bench_function(id, |b| {
        b.iter_batched_ref(
            || {
                let mut s = current.borrow_mut();
                *previous.borrow_mut() = Some(s.clone());
                next_round(&mut s);
                s.clone()
            },
            |s| {
                let (next, decided) = decide(s, &state.borrow());
                *state.borrow_mut() = next;
                black_box(decided)
            },
            BatchSize::PerIteration,
        )
    });
}

/// The next round's snapshot in a busy steady state: every job with a loss series
/// reported one new sample (the oldest leaves the window), nothing else moved. The
/// clock stays where it is: DRAGON's and SpeCon's own work depends on it (jobs become
/// due for a rescale as time passes), and the `kept` row must do the same policy work as
/// the `wasm` and `native` rows so that the difference is the cost of the call. So the
/// new sample is taken at the current time too: a sample after the clock would, after
/// a window's worth of rounds, leave no job with a value as of now, and the policies
/// would skip every job.
fn next_round(snapshot: &mut Snapshot) {
    for job in &mut snapshot.jobs {
        if let Some(last) = job.loss.last().copied() {
            let job = std::sync::Arc::make_mut(job);
            let next = LossSample {
                time: last.time,
                step: last.step + 100,
                value: last.value * 0.999,
            };
            job.loss = job.loss[1..].iter().copied().chain([next]).collect();
        }
    }
}

/// Whether a round of `name` on `snapshot` fits the default sandbox (64 MiB, 100 ms):
/// the controller's defaults, reported beside the figures.
fn fits_default_sandbox(name: &str, snapshot: &Snapshot) -> String {
    let runtime = Runtime::new(RuntimeOptions::default()).expect("runtime");
    match load(&runtime, name).decide(&Settings::default(), snapshot, &[], 1) {
        Ok(_) => "fits the default sandbox".into(),
        Err(error) => format!("does not fit the default sandbox: {error}"),
    }
}

fn rounds(c: &mut Criterion) {
    let runtime = runtime(false);
    for name in ["specon", "dragon"] {
        let subject = Subject::new(&runtime, name);
        for nodes in SIZES {
            let snapshot = synthetic::cluster(nodes, 0, synthetic::NOW);
            eprintln!(
                "round/{name}/{nodes}: {}",
                fits_default_sandbox(name, &snapshot)
            );
            subject.bench(c, "round", &nodes.to_string(), &snapshot, true);
        }
    }
    // What a kept call costs before the policy's own work, for a policy that reads no
    // loss (as DRAGON) and one that does (as SpeCon): the `idle` guest, bound as they
    // are, deciding nothing.
    for (name, reads_loss) in [("idle", false), ("idle-reading-loss", true)] {
        let module = runtime
            .load(
                &switchyard_test_support::guest_reading_loss("idle", reads_loss),
                name,
            )
            .expect("the idle guest loads");
        let subject = Subject {
            name,
            module,
            native: switchyard_test_guest_idle::policy::decide,
            incremental: <switchyard_test_guest_idle::Idle as IncrementalGuest>::decide,
            reads_loss,
        };
        for nodes in [1_000, 5_000] {
            let snapshot = synthetic::cluster(nodes, 0, synthetic::NOW);
            let state = subject.warmed_state(&snapshot);
            let mut g = c.benchmark_group(format!("round/{name}"));
            subject.bench_kept(&mut g, &nodes.to_string(), &snapshot, &state);
            subject.bench_native_kept(&mut g, &nodes.to_string(), &snapshot, &state);
            subject.bench_native_incremental(&mut g, &nodes.to_string(), &snapshot, &state);
            g.finish();
        }
    }
}

fn breakdown(c: &mut Criterion) {
    let runtime = runtime(false);
    let null = runtime
        .load(
            &std::fs::read(switchyard_test_support::guest("null")).expect("the null guest"),
            "null",
        )
        .expect("the null guest loads");
    let call = |snapshot: &Snapshot| {
        null.decide(&Settings::default(), snapshot, &[], 1)
            .expect("null decides")
    };
    let mut g = c.benchmark_group("breakdown");
    g.bench_function("null-call/empty", |b| {
        let empty = Snapshot::default();
        b.iter(|| black_box(call(&empty)))
    });
    for nodes in SIZES {
        let snapshot = synthetic::cluster(nodes, 0, synthetic::NOW);
        g.bench_function(BenchmarkId::new("lower", nodes), |b| {
            b.iter(|| black_box(snapshot_to_wit(&snapshot)))
        });
        g.bench_function(BenchmarkId::new("null-call", nodes), |b| {
            b.iter(|| black_box(call(&snapshot)))
        });
    }
    g.finish();
}

fn steady(c: &mut Criterion) {
    let mut g = c.benchmark_group("steady");
    for nodes in SIZES {
        let mut snapshot = synthetic::cluster(nodes, 0, synthetic::NOW);
        let mut held = HeldSnapshot::default();
        held.commit(&snapshot, &Change::Reset);
        next_round(&mut snapshot);
        g.bench_function(BenchmarkId::new("diff", nodes), |b| {
            b.iter(|| {
                let change = held.change_to(&snapshot);
                black_box(delta_to_wit(&snapshot, &change))
            })
        });
    }
    g.finish();
}

fn placement(c: &mut Criterion) {
    let runtime = runtime(false);
    let snapshot = synthetic::cluster(5_000, 10_000, synthetic::NOW);
    for name in ["default", "dragon"] {
        eprintln!(
            "placement/{name}: {}",
            fits_default_sandbox(name, &snapshot)
        );
        Subject::new(&runtime, name).bench(
            c,
            "placement",
            "10000-pods-5000-nodes",
            &snapshot,
            false,
        );
    }
}

/// The contract's cost of eligibility sets: a kept-instance round of SpeCon and DRAGON
/// on the same cluster without sets, with three sets that no task names (what carrying
/// them costs), and with the sets shared by three quarters of the jobs (what a
/// constrained cluster costs, decisions included; `synthetic::with_eligibility`), and
/// the lowering of the whole snapshot without and with them.
fn eligibility(c: &mut Criterion) {
    let runtime = runtime(false);
    for nodes in [1_000, 5_000] {
        let plain = synthetic::cluster(nodes, 0, synthetic::NOW);
        let carried = synthetic::with_eligibility(plain.clone(), false);
        let constrained = synthetic::with_eligibility(plain.clone(), true);
        for name in ["specon", "dragon"] {
            let subject = Subject::new(&runtime, name);
            let mut g = c.benchmark_group(format!("eligibility/{name}"));
            let rows = [
                ("none", &plain),
                ("unnamed", &carried),
                ("sets", &constrained),
            ];
            for (label, snapshot) in rows {
                let state = subject.warmed_state(snapshot);
                subject.bench_kept(&mut g, &format!("{label}-{nodes}"), snapshot, &state);
            }
            g.finish();
        }
        let mut g = c.benchmark_group("eligibility/lower");
        for (label, snapshot) in [("none", &plain), ("sets", &constrained)] {
            g.bench_function(BenchmarkId::new(label, nodes), |b| {
                b.iter(|| black_box(snapshot_to_wit(snapshot)))
            });
        }
        g.finish();
    }
}

fn sandbox(c: &mut Criterion) {
    let snapshot = synthetic::cluster(1_000, 0, synthetic::NOW);
    let mut g = c.benchmark_group("sandbox/specon-1000");
    for (label, unsandboxed) in [("with", false), ("without", true)] {
        let runtime = runtime(unsandboxed);
        let subject = Subject::new(&runtime, "specon");
        let state = subject.warmed_state(&snapshot);
        g.bench_function(label, |b| {
            b.iter(|| black_box(subject.wasm(&snapshot, &state)))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = rounds, breakdown, steady, placement, sandbox, eligibility
}
criterion_main!(benches);
