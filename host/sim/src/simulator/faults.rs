//! Injected failures: the simulator can make accepted actions fail, at a rate per
//! operation, the way a real cluster's API calls fail (a refused bind, a conflicting
//! status write), so the control loop's handling of failures is tested offline. A
//! failed action changes nothing (a gang is bound whole or not at all) and is reported
//! as [`FailureReason::Injected`]. The draws come from their own seeded stream, taken
//! only for operations whose rate is above zero, so rates of zero change nothing about
//! a run, and a run with faults is the same every time for the same seed.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use serde::Serialize;

use switchyard_control::{ActionFailure, FailureReason};
use switchyard_core::{Action, Operation};

/// The share of each operation's actions that fail, each in [0, 1].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Faults {
    /// `place` (the binds of a placement, all or none).
    pub place: f64,
    /// `migrate`.
    pub migrate: f64,
    /// `set-cpu-weight` (an in-place resize).
    pub set_cpu_weight: f64,
    /// `scale`.
    pub scale: f64,
    /// `preempt`.
    pub preempt: f64,
}

impl Faults {
    /// The rates by their names in a workload file, in the order they are documented.
    pub fn named(&self) -> [(&'static str, f64); 5] {
        [
            ("place", self.place),
            ("migrate", self.migrate),
            ("set_cpu_weight", self.set_cpu_weight),
            ("scale", self.scale),
            ("preempt", self.preempt),
        ]
    }

    /// The rate for `op`, and its name; `wait` never fails.
    fn rate_of(&self, op: &Operation) -> Option<(&'static str, f64)> {
        let named = self.named();
        let i = match op {
            Operation::Place { .. } => 0,
            Operation::Migrate { .. } => 1,
            Operation::SetCpuWeight { .. } => 2,
            Operation::Scale { .. } => 3,
            Operation::Preempt { .. } => 4,
            Operation::Wait { .. } => return None,
        };
        Some(named[i])
    }
}

/// The rates and the stream of draws.
pub(crate) struct Injector {
    faults: Faults,
    rng: Pcg64,
    /// Failures injected so far.
    injected: u64,
}

impl Injector {
    /// Draws for `faults` from a stream seeded by `seed` (apart from the evaluation
    /// noise's stream, so adding faults does not change the noise).
    pub(crate) fn new(faults: Faults, seed: u64) -> Self {
        Self {
            faults,
            rng: Pcg64::seed_from_u64(seed ^ 0x6661_756c_7473_2121),
            injected: 0,
        }
    }

    /// Failures injected so far.
    pub(crate) fn injected(&self) -> u64 {
        self.injected
    }

    /// Whether `action` fails this time, and how.
    pub(crate) fn draw(&mut self, action: &Action) -> Option<ActionFailure> {
        let (name, rate) = self.faults.rate_of(&action.op)?;
        if rate <= 0.0 || self.rng.random::<f64>() >= rate {
            return None;
        }
        self.injected += 1;
        Some(ActionFailure::new(
            FailureReason::Injected,
            format!(
                "{name} of job {} failed: a fault injected by the simulator (simulator.faults.{name} = {rate})",
                action.op.job()
            ),
        ))
    }
}
