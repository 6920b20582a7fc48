//! The clock behind call deadlines: a thread that advances the engines' epoch every
//! [`TICK`], so a store's deadline of N ticks stops a guest between N-1 and N ticks after
//! the call began.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::Engine;

/// Epoch granularity. Small against the default 100 ms deadline, large enough that the
/// ticker costs nothing measurable.
pub(crate) const TICK: Duration = Duration::from_millis(5);

/// Deadline in ticks, rounded up, at least one.
pub(crate) fn ticks_for(deadline: Duration) -> u64 {
    (deadline.as_nanos().div_ceil(TICK.as_nanos()) as u64).max(1)
}

/// Advances the epoch until dropped.
pub(crate) struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Advances the epoch of every engine in `engines` (the runtime's compiler tiers).
    pub(crate) fn start(engines: Vec<Engine>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("switchyard-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    for engine in &engines {
                        engine.increment_epoch();
                    }
                }
            })
            .expect("cannot start the epoch thread");
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
