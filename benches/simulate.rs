//! Wall time of simulating workloads with the Wasm `default` policy in the loop.
//!
//! `cargo bench --bench simulate` (the Philly figure in docs/performance.md comes from
//! `switchyard simulate examples/philly-6214e9.yaml --policy default`, see there).

use criterion::{Criterion, criterion_group, criterion_main};
use switchyard_control::{ControlLoop, PolicySlot};
use switchyard_runtime::{PolicyRef, Runtime, RuntimeOptions};
use switchyard_sim::{Simulator, Workload};

fn quickstart(c: &mut Criterion) {
    let path = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    ));
    let workload = Workload::load(path).unwrap();
    let scenario = workload.scenario(workload.seed()).unwrap();
    let runtime = Runtime::new(RuntimeOptions::default()).unwrap();
    let module = PolicyRef::parse("default").unwrap().load(&runtime).unwrap();
    let slot = PolicySlot::configure(module, &Default::default()).unwrap();
    c.bench_function("simulate quickstart under default", |b| {
        b.iter(|| {
            let mut sim = Simulator::new(scenario.clone());
            let mut control = ControlLoop::new(slot.clone(), slot.clone(), 1).keep_records(false);
            control.run(&mut sim, |_, _| {})
        })
    });
}

criterion_group!(benches, quickstart);
criterion_main!(benches);
