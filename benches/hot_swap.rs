//! Loading and swapping policies: what an operator waits for after an upload.
//!
//! `cargo bench --bench hot_swap`; figures in `docs/performance.md`.
//!
//! - `load/cold`: compile, check and describe the SpeCon component (254 KiB) when its
//!   digest is new (each iteration appends a distinct custom section, so nothing is
//!   cached);
//! - `load/cached`: the same bytes again (the digest cache answers);
//! - `swap/cold` and `swap/cached`: the whole path in a running controller, from handing
//!   the upload to `Controller::load_policy` to the first decision record made by the
//!   new policy (`activate`, then the driver's next round), with the same two caches;
//! - `instantiate`: one call's fresh instance of SpeCon (the `describe` export, which
//!   does no work), what every decision round pays before the policy runs.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use switchyard::live::{Controller, LiveConfig};
use switchyard::registry;
use switchyard::runtime::{Runtime, RuntimeOptions};
use switchyard::sim::Simulator;
use switchyard::workload::Workload;
use wasm_encoder::{ComponentSection, CustomSection};

fn specon_bytes() -> &'static [u8] {
    registry::builtin("specon")
        .expect("specon is built in")
        .bytes
}

/// SpeCon with a custom section that makes its digest unique: a new upload, as far as
/// every cache is concerned, running the same code.
fn fresh_copy() -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = specon_bytes().to_vec();
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
    g.bench_function("cold", |b| {
        b.iter_batched(
            fresh_copy,
            |bytes| black_box(runtime.load(&bytes, "specon").expect("loads")),
            criterion::BatchSize::SmallInput,
        )
    });
    g.bench_function("cached", |b| {
        b.iter(|| black_box(runtime.load(specon_bytes(), "specon").expect("loads")))
    });
    g.finish();
}

fn instantiate(c: &mut Criterion) {
    let runtime = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let module = runtime.load(specon_bytes(), "specon").expect("loads");
    c.bench_function("instantiate", |b| {
        b.iter(|| black_box(module.configure(&Default::default()).expect("configures")))
    });
}

/// A controller on the quickstart workload, run to its end so it is idle: every round
/// measured is the one the swap causes, not one the simulated cluster was due anyway.
fn idle_controller(runtime: &tokio::runtime::Runtime) -> (Controller, impl Drop) {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/quickstart.yaml"
    ));
    let workload = Workload::load(path).expect("quickstart loads");
    let scenario = workload.scenario(workload.seed()).expect("scenario");
    let policies = Runtime::new(RuntimeOptions::default()).expect("runtime");
    let config = LiveConfig {
        speed: 1e9,
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

/// Time from the upload to the first record decided by the uploaded policy.
async fn swap_in(controller: &Controller, bytes: Vec<u8>) -> Duration {
    let start = Instant::now();
    controller
        .load_policy(bytes, "bench upload".into(), BTreeMap::new())
        .await
        .expect("the upload is accepted");
    let applied = controller.activate("specon").await.expect("activates");
    loop {
        let decided = controller.with_status(|s| {
            s.decisions
                .iter()
                .any(|r| r.round >= applied.from_round && r.policy == "specon")
        });
        if decided {
            return start.elapsed();
        }
        tokio::task::yield_now().await;
    }
}

fn swap(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio");
    let (controller, _driver) = idle_controller(&tokio);
    let mut g = c.benchmark_group("swap");
    for (label, cold) in [("cold", true), ("cached", false)] {
        g.bench_function(label, |b| {
            b.iter_custom(|iterations| {
                tokio.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let bytes = if cold {
                            fresh_copy()
                        } else {
                            specon_bytes().to_vec()
                        };
                        total += swap_in(&controller, bytes).await;
                        controller
                            .activate("default")
                            .await
                            .expect("back to default");
                    }
                    total
                })
            })
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
    targets = load, instantiate, swap
}
criterion_main!(benches);
