//! Arithmetic on the WIT's resource record: sums, differences floored at zero, and
//! comparisons. A leaf: it knows nothing of nodes, tasks or ledgers.

use crate::Resources;

/// Resource arithmetic on the WIT record.
pub trait ResourcesExt {
    /// All zero.
    fn zero() -> Resources;
    /// `self + other`.
    fn plus(&self, other: &Resources) -> Resources;
    /// `self - other`, floored at zero.
    fn saturating_minus(&self, other: &Resources) -> Resources;
    /// Every component of `other` is at most `self`'s.
    fn covers(&self, other: &Resources) -> bool;
}

impl ResourcesExt for Resources {
    fn zero() -> Resources {
        Resources {
            cpu_millis: 0,
            memory_bytes: 0,
            gpus: 0,
        }
    }
    fn plus(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis + other.cpu_millis,
            memory_bytes: self.memory_bytes + other.memory_bytes,
            gpus: self.gpus + other.gpus,
        }
    }
    fn saturating_minus(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
            gpus: self.gpus.saturating_sub(other.gpus),
        }
    }
    fn covers(&self, other: &Resources) -> bool {
        self.cpu_millis >= other.cpu_millis
            && self.memory_bytes >= other.memory_bytes
            && self.gpus >= other.gpus
    }
}

/// The smaller of each component.
pub(super) trait MinEach {
    /// Each component of `self` capped at `other`'s.
    fn min_each(&self, other: &Resources) -> Resources;
}

impl MinEach for Resources {
    fn min_each(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.min(other.cpu_millis),
            memory_bytes: self.memory_bytes.min(other.memory_bytes),
            gpus: self.gpus.min(other.gpus),
        }
    }
}

/// Whether `a` and `b` ask for the same of everything.
pub(super) fn same(a: &Resources, b: &Resources) -> bool {
    a.covers(b) && b.covers(a)
}

/// `part / whole`, 0 for nothing of a whole (a node without memory, say).
pub(super) fn ratio(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 { 0.0 } else { part / whole }
}
