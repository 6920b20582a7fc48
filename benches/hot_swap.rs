//! Loading and swapping policies: what an operator waits for after an upload.
//!
//! `cargo bench --bench hot_swap`; figures in `docs/performance.md`.
//!
//! - `load/cold/<policy>`: compile, check and describe a component when its digest is
//!   new (each iteration appends a distinct custom section, so nothing is cached), for
//!   `even` (about the size the target names) and `specon` (the largest shipped
//!   policy); the sizes are printed;
//! - `load/quick/<policy>`: the same new component on a runtime with `quick_first`, as
//!   `switchyard run` has it: Winch compiles it and Cranelift follows in the background
//!   (each iteration waits, untimed, for Cranelift to finish, so compiles do not pile up);
//! - `load/cached/<policy>`: the same bytes again (the digest cache answers);
//! - `swap/<cold|cached>/least-loaded`: the whole path in a running controller with
//!   `quick_first`, as `switchyard run` has it, from handing the upload to
//!   `Controller::load_policy` to the first decision record made by the new policy
//!   (`activate`, then the driver's next round), with the same two caches; cold
//!   iterations wait, untimed, for Cranelift's code; `swap/cold-cranelift/least-loaded` is
//!   the cold path on a controller without `quick_first` (Cranelift only); the policy
//!   swapped in is the least-loaded test guest, because a built-in's name is reserved
//!   for the built-in;
//! - `registry/<cold|cached>/least-loaded`: the same path for a policy named by OCI reference
//!   (`Controller::load_reference`), against Debian's `docker-registry` on loopback
//!   (`SWITCHYARD_DOCKER_REGISTRY`; skipped without it): cold, a tag pushed just before
//!   (untimed) and new to every cache, so the tag is resolved, the manifest and the
//!   component downloaded and verified, and the component compiled; cached, a pinned
//!   reference already pulled once, which the on-disk cache and the compile cache answer
//!   without the registry;
//! - `tiers/<winch|cranelift>/<policy>`: one SpeCon or DRAGON round at 1,000 nodes on a
//!   fresh instance, on each compiler's code: what an upload's rounds cost before
//!   Cranelift's code replaces Winch's;
//! - `instantiate`: one call's fresh instance of SpeCon (the `describe` export, which
//!   does no work), what a `policy` component's every round, and an incremental one's
//!   first round after a reset, pay before the policy runs;
//! - `sustained/<steady-default|steady-even|swapping>`: decision rounds per second of a
//!   controller running flat out on a busy simulated cluster, left alone on `default` or
//!   on `even`, and with an operator activating `default` and `even` in turn as fast as
//!   the controller answers (about one swap per round); criterion's throughput is the
//!   decisions per second.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use switchyard_controller::{Controller, DriverHandle, LiveConfig, RegistryAccess};
use switchyard_runtime::{Compiler, PolicyModule, Runtime, RuntimeOptions, builtin};
use switchyard_sim::{Simulator, Workload};
use wasm_encoder::{ComponentSection, CustomSection};

#[path = "support/synthetic.rs"]
mod synthetic;

/// The policies uploaded: one of about 200 KB and the largest shipped.
const UPLOADED: [&str; 2] = ["even", "specon"];

fn builtin_bytes(name: &str) -> &'static [u8] {
    builtin(name).expect("a built-in policy").bytes
}

/// The built-in `name` with a custom section that makes its digest unique: a new
/// upload, as far as every cache is concerned, running the same code.
fn fresh_copy(name: &str) -> Vec<u8> {
    unique_copy(builtin_bytes(name))
}

/// `component` with a custom section that makes its digest unique.
fn unique_copy(component: &[u8]) -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = component.to_vec();
    CustomSection {
        name: Cow::Borrowed("switchyard-bench-copy"),
        data: Cow::Owned(n.to_le_bytes().to_vec()),
    }
    .append_to_component(&mut bytes);
    bytes
}

fn load(c: &mut Criterion) {
    let runtime = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let mut g = c.benchmark_group("load");
    for name in UPLOADED {
        eprintln!("{name}: {} bytes", builtin_bytes(name).len());
        g.bench_function(BenchmarkId::new("cold", name), |b| {
            b.iter_batched(
                || fresh_copy(name),
                |bytes| black_box(runtime.load(&bytes, name).expect("loads")),
                criterion::BatchSize::SmallInput,
            )
        });
        g.bench_function(BenchmarkId::new("cached", name), |b| {
            b.iter(|| black_box(runtime.load(builtin_bytes(name), name).expect("loads")))
        });
    }
    let quick = Runtime::new(RuntimeOptions {
        quick_first: true,
        ..RuntimeOptions::default()
    })
    .expect("runtime");
    for name in UPLOADED {
        g.bench_function(BenchmarkId::new("quick", name), |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let bytes = fresh_copy(name);
                    let start = Instant::now();
                    let module = black_box(quick.load(&bytes, name).expect("loads"));
                    total += start.elapsed();
                    wait_for_cranelift(&module);
                }
                total
            })
        });
    }
    g.finish();
}

/// Waits until `module` runs Cranelift's code (its background compile is done).
fn wait_for_cranelift(module: &PolicyModule) {
    while module.compiler() != Compiler::Cranelift {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One round at 1,000 nodes on each compiler's code, fresh instance and whole snapshot.
fn tiers(c: &mut Criterion) {
    let runtime = Runtime::new(RuntimeOptions {
        limits: switchyard_runtime::SandboxLimits {
            deadline: Duration::from_secs(30),
            memory_bytes: 1 << 30,
            ..Default::default()
        },
        quick_first: true,
        ..RuntimeOptions::default()
    })
    .expect("runtime");
    let snapshot = synthetic::cluster(1_000, 0, synthetic::NOW);
    let mut g = c.benchmark_group("tiers");
    for name in ["specon", "dragon"] {
        for compiler in [Compiler::Winch, Compiler::Cranelift] {
            let module = runtime
                .load_with(compiler, builtin_bytes(name), name)
                .expect("loads");
            let label = format!("{compiler:?}").to_lowercase();
            g.bench_function(BenchmarkId::new(label, name), |b| {
                b.iter(|| {
                    black_box(
                        module
                            .decide(&Default::default(), &snapshot, &[], 1)
                            .expect("decides"),
                    )
                })
            });
        }
    }
    g.finish();
}

fn instantiate(c: &mut Criterion) {
    let runtime = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let module = runtime
        .load(builtin_bytes("specon"), "specon")
        .expect("loads");
    c.bench_function("instantiate", |b| {
        b.iter(|| black_box(module.configure(&Default::default()).expect("configures")))
    });
}

/// A controller on the quickstart workload, run to its end so it is idle: every round
/// measured is the one the swap causes, not one the simulated cluster was due anyway.
fn idle_controller(
    runtime: &tokio::runtime::Runtime,
    quick_first: bool,
    registry: Option<RegistryAccess>,
) -> (Controller, impl Drop) {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    ));
    let workload = Workload::load(path).expect("quickstart loads");
    let scenario = workload.scenario(workload.seed()).expect("scenario");
    let policies = Runtime::new(RuntimeOptions {
        quick_first,
        ..RuntimeOptions::default()
    })
    .expect("runtime");
    let config = LiveConfig {
        speed: 1e9,
        registry,
        ..LiveConfig::default()
    };
    let (controller, driver) =
        Controller::start_simulated(policies, Simulator::new(scenario), config).expect("starts");
    runtime.block_on(async {
        while controller.with_status(|s| s.ended.is_none()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    (controller, driver)
}

/// How a policy reaches the controller.
enum Upload {
    /// Its component, as `POST /v1/policies` sends it.
    Bytes(Vec<u8>),
    /// Its OCI reference, which the controller pulls.
    Reference(String),
}

/// Time from the upload of `name` to the first record decided by it, and the module.
async fn swap_in(
    controller: &Controller,
    name: &str,
    upload: Upload,
) -> (Duration, std::sync::Arc<PolicyModule>) {
    let start = Instant::now();
    let entry = match upload {
        Upload::Bytes(bytes) => {
            controller
                .load_policy(bytes, "bench upload".into(), BTreeMap::new())
                .await
                .expect("the upload is accepted")
                .0
        }
        Upload::Reference(reference) => {
            controller
                .load_reference(&reference)
                .await
                .expect("the reference pulls and loads")
                .entry
        }
    };
    let applied = controller.activate(name).await.expect("activates");
    loop {
        let decided = controller.with_status(|s| {
            s.decisions
                .iter()
                .any(|r| r.round >= applied.from_round && r.arm_a.policy == name)
        });
        if decided {
            return (start.elapsed(), entry.slot.module);
        }
        tokio::task::yield_now().await;
    }
}

/// [`swap_in`]'s time; then, untimed, waits for Cranelift's code and makes `default`
/// active again, so the next iteration swaps from the same place.
async fn swap_and_back(controller: &Controller, name: &str, upload: Upload) -> Duration {
    let (took, module) = swap_in(controller, name, upload).await;
    wait_for_cranelift(&module);
    controller
        .activate("default")
        .await
        .expect("back to default");
    took
}

/// The API side of a controller: one tokio worker, as `switchyard run` has.
fn api_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio")
}

/// The policy the swap and registry groups upload: a built-in's name is reserved for the
/// built-in, so an upload is a policy of another name, the least-loaded test guest.
const SWAPPED_GUEST: &str = "least-loaded";
/// The name the least-loaded guest gives itself.
const SWAPPED_POLICY: &str = "least-loaded-rust";

fn swapped_guest() -> Vec<u8> {
    std::fs::read(switchyard_test_support::guest(SWAPPED_GUEST)).expect("the least-loaded guest")
}

fn swap(c: &mut Criterion) {
    let tokio = api_runtime();
    let (quick, _quick_driver) = idle_controller(&tokio, true, None);
    let (cranelift, _cranelift_driver) = idle_controller(&tokio, false, None);
    let policy = swapped_guest();
    eprintln!("{SWAPPED_GUEST}: {} bytes", policy.len());
    let mut g = c.benchmark_group("swap");
    for (label, cold) in [("cold", true), ("cold-cranelift", true), ("cached", false)] {
        let controller = match label {
            "cold-cranelift" => &cranelift,
            _ => &quick,
        };
        g.bench_function(BenchmarkId::new(label, SWAPPED_GUEST), |b| {
            b.iter_custom(|iterations| {
                tokio.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let bytes = if cold {
                            unique_copy(&policy)
                        } else {
                            policy.clone()
                        };
                        total +=
                            swap_and_back(controller, SWAPPED_POLICY, Upload::Bytes(bytes)).await;
                    }
                    total
                })
            })
        });
    }
    g.finish();
}

fn registry(c: &mut Criterion) {
    let Some(registry) = switchyard_test_support::TestRegistry::anonymous() else {
        return;
    };
    let cache = tempfile::tempdir().expect("a cache directory");
    let access = RegistryAccess::new(
        switchyard_registry::ClientOptions {
            insecure_registries: vec![registry.address().to_string()],
            cache: Some(switchyard_registry::Cache::new(cache.path())),
            ..Default::default()
        },
        64 << 20,
    )
    .expect("registry access");
    let tokio = api_runtime();
    let (controller, _driver) = idle_controller(&tokio, true, Some(access));
    let pusher = registry.client(switchyard_registry::Credentials::none(), None);
    let push = |tag: &str, bytes: Vec<u8>| {
        let reference =
            switchyard_registry::Reference::parse(&registry.reference(tag)).expect("a tag");
        tokio
            .block_on(pusher.push(&reference, bytes.into()))
            .expect("the registry takes the policy")
            .reference
    };
    let policy = swapped_guest();
    let pinned = push("bench/least-loaded:cached", policy.clone()).to_string();
    let mut g = c.benchmark_group("registry");
    for label in ["cold", "cached"] {
        g.bench_function(BenchmarkId::new(label, SWAPPED_GUEST), |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for i in 0..iterations {
                    let reference = match label {
                        "cold" => push(&format!("bench/least-loaded:{i}"), unique_copy(&policy))
                            .to_string()
                            .split('@')
                            .next()
                            .expect("a tag")
                            .to_string(),
                        _ => pinned.clone(),
                    };
                    total += tokio.block_on(swap_and_back(
                        &controller,
                        SWAPPED_POLICY,
                        Upload::Reference(reference),
                    ));
                }
                total
            })
        });
    }
    g.finish();
}

/// 100 eight-core nodes and a job arriving every ten seconds for 40 days, each running
/// about 1,000 seconds: some 100 jobs at any time, and a round at every arrival and
/// departure, far more rounds than a measurement takes at any speed.
const BUSY: &str = "
seed: 3
cluster:
  nodes:
    - {name: cpu, count: 100, cpus: 8, memory_gib: 64}
simulator:
  max_time: 1.0e9
templates:
  small: {work: 1000, speed: 1.0, cpus: 1, memory_gib: 1, curve: vae}
jobs:
  - {template: small, count: 350000, every: 10}
";

/// A controller deciding as fast as it can: the simulated clock runs a billion times
/// faster than the wall clock, so every round follows the last without waiting.
fn busy_controller(runtime: &tokio::runtime::Runtime, policy: &str) -> (Controller, DriverHandle) {
    let workload = Workload::parse(BUSY, Path::new("busy.yaml")).expect("the busy workload");
    let scenario = workload.scenario(workload.seed()).expect("scenario");
    let policies = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let config = LiveConfig {
        speed: 1e9,
        policy: policy.into(),
        ..LiveConfig::default()
    };
    let (controller, driver) =
        Controller::start_simulated(policies, Simulator::new(scenario), config).expect("starts");
    runtime.block_on(async {
        while controller.with_status(|s| s.rounds) < 100 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    (controller, driver)
}

/// Wall time the controller takes for `rounds` more rounds; when `swapping`, `default`
/// and `even` are activated in turn meanwhile, each waiting for the driver's answer.
async fn time_rounds(controller: &Controller, rounds: u64, swapping: bool) -> Duration {
    let first = controller.with_status(|s| s.rounds);
    let start = Instant::now();
    let mut swaps = 0u64;
    while controller.with_status(|s| s.rounds) < first + rounds {
        if swapping {
            let name = if swaps.is_multiple_of(2) {
                "even"
            } else {
                "default"
            };
            controller.activate(name).await.expect("activates");
            swaps += 1;
        } else {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    start.elapsed()
}

fn sustained(c: &mut Criterion) {
    let tokio = api_runtime();
    let mut g = c.benchmark_group("sustained");
    g.throughput(Throughput::Elements(1));
    for (label, policy, swapping) in [
        ("steady-default", "default", false),
        ("steady-even", "even", false),
        ("swapping", "default", true),
    ] {
        let (controller, _driver) = busy_controller(&tokio, policy);
        g.bench_function(label, |b| {
            b.iter_custom(|rounds| tokio.block_on(time_rounds(&controller, rounds, swapping)))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = load, tiers, instantiate, swap, registry, sustained
}
criterion_main!(benches);
