//! Scaled real time: lets a discrete-event [`Cluster`] (the simulator) advance no faster
//! than `speed` virtual seconds per wall second, so the controller around it behaves as
//! it would on a real cluster. The wrapped cluster is used unchanged; between slices of
//! waiting, a callback lets the driver apply operator commands, which is why a swap
//! takes effect between rounds and never inside one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::control::{Advance, Cluster};

/// How long the pacer sleeps before looking at the clock and the commands again.
pub const SLICE: Duration = Duration::from_millis(5);

/// A cluster whose virtual clock follows the wall clock, `speed` times faster.
pub struct Paced<C> {
    inner: C,
    speed: f64,
    origin_wall: Instant,
    origin_virtual: f64,
    stop: Arc<AtomicBool>,
}

impl<C: Cluster> Paced<C> {
    /// Paces `inner` from its current time on; `stop` ends any wait.
    pub fn new(inner: C, speed: f64, stop: Arc<AtomicBool>) -> Self {
        let origin_virtual = inner.now();
        Self {
            inner,
            speed,
            origin_wall: Instant::now(),
            origin_virtual,
            stop,
        }
    }

    /// The wrapped cluster.
    pub fn inner(&mut self) -> &mut C {
        &mut self.inner
    }

    /// The virtual time the wall clock stands at.
    fn virtual_now(&self) -> f64 {
        self.origin_virtual + self.speed * self.origin_wall.elapsed().as_secs_f64()
    }

    /// Like [`Cluster::advance`], but never past the wall clock's virtual time: it
    /// sleeps in [`SLICE`]s until an event is due, calling `between` before each slice.
    /// Returns [`Advance::Stopped`] as soon as the stop flag is set.
    pub fn advance(&mut self, until: Option<f64>, between: &mut dyn FnMut(&mut C)) -> Advance {
        loop {
            between(&mut self.inner);
            if self.stop.load(Ordering::Relaxed) {
                return Advance::Stopped;
            }
            let wall = self.virtual_now();
            let limit = until.map_or(wall, |u| u.min(wall));
            if limit > self.inner.now() {
                match self.inner.advance(Some(limit)) {
                    Advance::Events(triggers) => return Advance::Events(triggers),
                    Advance::Reached { quiescent } => {
                        if until.is_some_and(|u| u <= limit) {
                            return Advance::Reached { quiescent };
                        }
                        if quiescent && until.is_none() {
                            return Advance::Idle;
                        }
                    }
                    other => return other,
                }
            }
            std::thread::sleep(SLICE);
        }
    }
}
