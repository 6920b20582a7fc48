//! The runtime the offline-run tests share (reproduction, peer agreement, constrained
//! placement): the default sandbox with a generous deadline, because a slow call on a
//! loaded machine must not become a fallback round and change what is measured.

use std::time::Duration;

use switchyard_runtime::{Runtime, RuntimeOptions, SandboxLimits};

/// A runtime whose calls may take 5 s and that keeps no compile cache on disk.
pub(crate) fn generous() -> Runtime {
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
