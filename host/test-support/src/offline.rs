//! What the offline tests share: a configured policy slot and a simulator built from
//! workload YAML (their runtime is `runtimes`'s). It builds; it must not run a loop or
//! judge a result.

use std::path::Path;

use switchyard_control::PolicySlot;
use switchyard_runtime::{PolicyRef, Runtime};
use switchyard_sim::{Simulator, Workload};

/// Policy `name` (a built-in name or a `.wasm` path) with its default settings.
pub fn policy_slot(runtime: &Runtime, name: &str) -> PolicySlot {
    let module = PolicyRef::parse(name).unwrap().load(runtime).unwrap();
    PolicySlot::configure(module, &Default::default()).unwrap()
}

/// The simulator of `workload` (YAML) with `seed`.
pub fn simulator_of(workload: &str, seed: u64) -> Simulator {
    let scenario = Workload::parse(workload, Path::new("workload.yaml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .scenario(seed)
        .unwrap();
    Simulator::new(scenario)
}
