//! What the offline tests share: a configured policy slot, a simulator built from
//! workload YAML, and the runtime the offline-run tests (reproduction, peer agreement,
//! constrained placement) use. It builds; it must not run a loop or judge a result.

use std::path::Path;
use std::time::Duration;

use switchyard_control::PolicySlot;
use switchyard_runtime::{PolicyRef, Runtime, RuntimeOptions, SandboxLimits};
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

/// The default sandbox with a generous deadline, because a slow call on a loaded machine
/// must not become a fallback round and change what is measured: calls may take 5 s,
/// and no compile cache is kept on disk.
pub fn generous_runtime() -> Runtime {
    Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline: Duration::from_secs(5),
            ..SandboxLimits::default()
        },
        cache_dir: None,
        ..Default::default()
    })
    .expect("runtime")
}
