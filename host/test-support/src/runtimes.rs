//! The sandboxes the tests run policies in: the default limits with a call deadline the
//! test chooses ([`runtime_with_deadline`]), and a generous one for runs whose results
//! must not depend on the machine's load ([`generous_runtime`]). It builds runtimes; it
//! must not load or call a policy.

use std::time::Duration;

use switchyard_runtime::{Runtime, RuntimeOptions, SandboxLimits};

/// The default sandbox with calls cut at `deadline`, and no compile cache on disk.
pub fn runtime_with_deadline(deadline: Duration) -> Runtime {
    Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline,
            ..SandboxLimits::default()
        },
        cache_dir: None,
        ..Default::default()
    })
    .expect("a runtime")
}

/// The default sandbox with a generous deadline, because a slow call on a loaded machine
/// must not become a fallback round and change what is measured: calls may take 5 s,
/// and no compile cache is kept on disk.
pub fn generous_runtime() -> Runtime {
    runtime_with_deadline(Duration::from_secs(5))
}
