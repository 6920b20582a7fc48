//! The measured job model of the Pollux artifact (Qiao et al., OSDI 2021): how much
//! training a job gets done per second on the GPUs it actually holds.
//!
//! A job trains with a fixed total batch size. On `r` replicas each replica computes a
//! local batch of `ceil(batch / r)`; above the largest measured local batch it
//! accumulates gradients, `accum` extra micro-batches before each synchronisation, so
//! one step costs `step_time + accum (step_time - sync_time)` at the micro-batch size.
//! Step and synchronisation times come from measurements at the job's placement (GPUs
//! per node), linearly interpolated in the local batch; a placement never measured is
//! interpolated between measured node and replica counts, so crossing nodes costs what
//! the measurements say it costs, and only there. Progress is counted in the
//! measurements' `progress` units: one step adds the statistical-efficiency gain of its
//! batch size in the current epoch, computed from the gradient's measured square and
//! variance, and a job is done after its last epoch.
//!
//! This module owns the arithmetic only; `workload::application` reads a model
//! directory into [`Measurements`] and checks it, so nothing here reads files or fails.

use std::collections::BTreeMap;
use std::sync::Arc;

/// One measured step time: seconds per step and, of it, seconds of synchronisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepTime {
    /// Seconds per optimizer step (one micro-batch plus synchronisation).
    pub step: f64,
    /// Seconds of gradient synchronisation in it.
    pub sync: f64,
}

/// Step times by local batch size for one placement or one (nodes, replicas) shape,
/// local batch strictly rising.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StepTable {
    rows: Vec<(f64, StepTime)>,
}

impl StepTable {
    /// A table from `(local batch, time)` rows; rows must rise in local batch (the
    /// reader checks it and names the file when they do not).
    pub(crate) fn new(rows: Vec<(f64, StepTime)>) -> Self {
        Self { rows }
    }

    /// The times at `local_bsz`, linear between measured batches; outside the measured
    /// range, the nearest measured row (the artifact refuses to extrapolate).
    pub(crate) fn at(&self, local_bsz: f64) -> Option<StepTime> {
        let (first, last) = (self.rows.first()?, self.rows.last()?);
        if local_bsz <= first.0 {
            return Some(first.1);
        }
        if local_bsz >= last.0 {
            return Some(last.1);
        }
        let i = self.rows.partition_point(|r| r.0 <= local_bsz);
        let ((b0, t0), (b1, t1)) = (self.rows[i - 1], self.rows[i]);
        let w = (local_bsz - b0) / (b1 - b0);
        Some(StepTime {
            step: t0.step + w * (t1.step - t0.step),
            sync: t0.sync + w * (t1.sync - t0.sync),
        })
    }
}

/// One measured training run at one total batch size, epoch by epoch.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Run {
    /// Its total batch size.
    pub(crate) batch_size: u32,
    /// `progress` at the end of each epoch.
    pub(crate) progress: Vec<f64>,
    /// The validation metric after each epoch.
    pub(crate) metric: Vec<f64>,
    /// Squared gradient norm during each epoch.
    pub(crate) grad_sqr: Vec<f64>,
    /// Gradient variance during each epoch.
    pub(crate) grad_var: Vec<f64>,
}

/// Limits the artifact sets per model (its `Application`), each defaulting to what the
/// measurements say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelLimits {
    /// Batch size the `progress` units are counted at (default: the smallest run's).
    pub init_batch_size: u32,
    /// Largest total batch size (default: the largest run's).
    pub max_batch_size: u32,
    /// Smallest local batch (default: the smallest in `placements.csv`).
    pub min_local_bsz: u32,
    /// Largest local batch one replica computes at once; above it, it accumulates
    /// (default: the largest in `placements.csv`).
    pub max_local_bsz: u32,
    /// Epochs a job trains (default: the fewest any run has).
    pub max_epochs: usize,
}

/// How a job's batch is split: each replica computes `atomic_bsz` samples
/// `accum_steps + 1` times per optimizer step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSplit {
    /// Samples one replica computes at once.
    pub atomic_bsz: u32,
    /// Micro-batches accumulated before each synchronisation, beyond the first.
    pub accum_steps: u32,
    /// The total batch this gives: replicas x atomic x (accum + 1).
    pub batch_size: u32,
}

/// One model's measurements, ready to answer "how fast" for any placement and batch.
#[derive(Debug, PartialEq)]
pub struct Measurements {
    name: String,
    /// `placements.csv` by placement, written as the lexicographically smallest rotation
    /// of its GPUs per node (the artifact's normal form).
    placements: BTreeMap<Vec<u32>, StepTable>,
    /// By node count, then replica count: the mean of the placements of that shape and
    /// `scalability.csv`'s rows.
    shapes: BTreeMap<u32, BTreeMap<u32, StepTable>>,
    /// By batch size, rising.
    runs: Vec<Run>,
    limits: ModelLimits,
    /// `progress` at which each epoch ends: the least any run needed.
    epoch_ends: Vec<f64>,
}

impl Measurements {
    /// Measurements from checked parts: `runs` rising in batch size, each with at least
    /// `limits.max_epochs` epochs; `placements` keyed by GPUs per node.
    pub(crate) fn new(
        name: String,
        placements: BTreeMap<Vec<u32>, StepTable>,
        shapes: BTreeMap<u32, BTreeMap<u32, StepTable>>,
        runs: Vec<Run>,
        limits: ModelLimits,
    ) -> Self {
        let epoch_ends = (0..limits.max_epochs)
            .map(|e| {
                runs.iter()
                    .filter_map(|r| r.progress.get(e).copied())
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let placements = placements
            .into_iter()
            .map(|(p, t)| (smallest_rotation(&p), t))
            .collect();
        Self {
            name,
            placements,
            shapes,
            runs,
            limits,
            epoch_ends,
        }
    }

    /// The model's name (its directory).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its limits.
    pub fn limits(&self) -> ModelLimits {
        self.limits
    }

    /// The measured runs, rising in batch size.
    pub(crate) fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Progress a job must make: the end of its last epoch.
    pub fn total_progress(&self) -> f64 {
        self.epoch_ends.last().copied().unwrap_or(0.0)
    }

    /// The largest replica count measured.
    pub fn max_measured_replicas(&self) -> u32 {
        let placed = self.placements.keys().map(|p| p.iter().sum::<u32>());
        let shaped = self.shapes.values().flat_map(|r| r.keys().copied());
        placed.chain(shaped).max().unwrap_or(1)
    }

    /// The artifact's split of `batch_size` over `replicas`: local batch
    /// `ceil(batch / replicas)`, accumulation above `max_local_bsz`, at least one
    /// accumulation step for a lone replica above the initial batch size (its gradient
    /// statistics need two micro-batches), and never more than `max_batch_size` in all.
    pub fn split(&self, replicas: u32, batch_size: u32) -> BatchSplit {
        const EPS: f64 = 1e-8;
        let l = &self.limits;
        let replicas = replicas.max(1);
        let local = (f64::from(batch_size) / f64::from(replicas) - EPS)
            .ceil()
            .max(1.0);
        let mut accum = ((local / f64::from(l.max_local_bsz.max(1)) - EPS).ceil() - 1.0).max(0.0);
        if replicas == 1 && batch_size > l.init_batch_size {
            accum = accum.max(1.0);
        }
        let atomic = (local / (accum + 1.0) - EPS).ceil();
        let count = f64::from(replicas) * (accum + 1.0);
        let atomic = atomic
            .min((f64::from(l.max_batch_size) / count).floor())
            .max(1.0);
        let (atomic, accum) = (atomic as u32, accum as u32);
        BatchSplit {
            atomic_bsz: atomic,
            accum_steps: accum,
            batch_size: replicas.saturating_mul(atomic).saturating_mul(accum + 1),
        }
    }

    /// Step times with `placement` (GPUs on each node it uses) at `local_bsz`: measured
    /// for that placement when it was, else interpolated over node and replica counts.
    pub fn step_time(&self, placement: &[u32], local_bsz: f64) -> StepTime {
        let placement: Vec<u32> = placement.iter().copied().filter(|&g| g > 0).collect();
        if let Some(t) = self
            .placements
            .get(&smallest_rotation(&placement))
            .and_then(|table| table.at(local_bsz))
        {
            return t;
        }
        let nodes = placement.len().max(1) as f64;
        let replicas = f64::from(placement.iter().sum::<u32>().max(1));
        self.by_shape(nodes, replicas, local_bsz)
    }

    /// Interpolation between measured shapes: linear in the node count between the
    /// nearest measured ones, each taken at the same replicas per node and linear in the
    /// replica count there (clamped to what was measured).
    fn by_shape(&self, nodes: f64, replicas: f64, local_bsz: f64) -> StepTime {
        let per_node = replicas / nodes;
        let at = |n: u32| -> Option<StepTime> {
            let tables = self.shapes.get(&n)?;
            let r = per_node * f64::from(n);
            let below = tables.range(..=r.floor() as u32).next_back();
            let above = tables.range(r.ceil() as u32..).next();
            match (below, above) {
                (Some((&r0, t0)), Some((&r1, t1))) if r1 > r0 => {
                    let (t0, t1) = (t0.at(local_bsz)?, t1.at(local_bsz)?);
                    Some(lerp(t0, t1, (r - f64::from(r0)) / f64::from(r1 - r0)))
                }
                (Some((_, t)), _) | (None, Some((_, t))) => t.at(local_bsz),
                (None, None) => None,
            }
        };
        let below = self.shapes.range(..=nodes.floor() as u32).next_back();
        let above = self.shapes.range(nodes.ceil() as u32..).next();
        let time = match (below, above) {
            (Some((&n0, _)), Some((&n1, _))) if n1 > n0 => match (at(n0), at(n1)) {
                (Some(t0), Some(t1)) => {
                    Some(lerp(t0, t1, (nodes - f64::from(n0)) / f64::from(n1 - n0)))
                }
                (t0, t1) => t0.or(t1),
            },
            (Some((&n, _)), _) | (None, Some((&n, _))) => at(n),
            (None, None) => None,
        };
        // The reader refuses a model without any measured step time, so this is only a
        // guard: a step of one second and no synchronisation.
        time.unwrap_or(StepTime {
            step: 1.0,
            sync: 0.0,
        })
    }

    /// Statistical efficiency of `batch_size` during `epoch`: the progress one step
    /// makes, `(var + sqr) / (var / scale + sqr)` with `scale` the batch over the
    /// initial batch and the gradient statistics interpolated between the runs at the
    /// nearest batch sizes (clamped to the measured ones).
    pub fn gain(&self, batch_size: u32, epoch: usize) -> f64 {
        let batch = f64::from(batch_size);
        // Past a run's last epoch its last statistics hold (the reader makes every run
        // at least `max_epochs` long, so this only guards).
        let stats = |r: &Run| {
            let e = epoch.min(r.grad_sqr.len().saturating_sub(1));
            let at = |v: &[f64]| v.get(e).copied().unwrap_or(0.0);
            (at(&r.grad_sqr), at(&r.grad_var))
        };
        let upper = self
            .runs
            .partition_point(|r| f64::from(r.batch_size) < batch);
        let (sqr, var) = match (upper.checked_sub(1), self.runs.get(upper)) {
            (_, Some(hi)) if f64::from(hi.batch_size) == batch => stats(hi),
            (Some(lo), Some(hi)) => {
                let lo = &self.runs[lo];
                let w =
                    (batch - f64::from(lo.batch_size)) / f64::from(hi.batch_size - lo.batch_size);
                let ((s0, v0), (s1, v1)) = (stats(lo), stats(hi));
                (s0 + w * (s1 - s0), v0 + w * (v1 - v0))
            }
            (None, Some(hi)) => stats(hi),
            (Some(lo), None) => stats(&self.runs[lo]),
            (None, None) => return 1.0,
        };
        let scale = batch / f64::from(self.limits.init_batch_size.max(1));
        let denominator = var / scale + sqr;
        if denominator > 0.0 {
            (var + sqr) / denominator
        } else {
            1.0
        }
    }

    /// The epoch a job is in after `progress`, and the progress at which it ends
    /// (`None` after the last).
    pub fn epoch(&self, progress: f64) -> (usize, Option<f64>) {
        let e = self.epoch_ends.partition_point(|&end| end <= progress);
        (e, self.epoch_ends.get(e).copied())
    }
}

/// A job under the measured model: which model, and the total batch it trains with.
#[derive(Clone, Debug, PartialEq)]
pub struct Goodput {
    /// The model's measurements (shared by every job of the model).
    pub model: Arc<Measurements>,
    /// Its total batch size.
    pub batch_size: u32,
}

impl Goodput {
    /// Progress per second on `placement` (GPUs per node) after `progress`, and the
    /// progress at which that rate next changes (its epoch's end).
    pub fn rate(&self, placement: &[u32], progress: f64) -> (f64, Option<f64>) {
        let replicas: u32 = placement.iter().sum();
        if replicas == 0 {
            return (0.0, None);
        }
        let split = self.model.split(replicas, self.batch_size);
        let time = self.model.step_time(placement, f64::from(split.atomic_bsz));
        let (epoch, end) = self.model.epoch(progress);
        let gain = self.model.gain(split.batch_size, epoch);
        let seconds = time.step + f64::from(split.accum_steps) * (time.step - time.sync);
        if seconds > 0.0 {
            (gain / seconds, end)
        } else {
            (0.0, end)
        }
    }
}

/// The lexicographically smallest rotation: the artifact names a ring of nodes by it.
fn smallest_rotation(placement: &[u32]) -> Vec<u32> {
    (0..placement.len())
        .map(|i| [&placement[i..], &placement[..i]].concat())
        .min()
        .unwrap_or_default()
}

fn lerp(a: StepTime, b: StepTime, w: f64) -> StepTime {
    StepTime {
        step: a.step + w * (b.step - a.step),
        sync: a.sync + w * (b.sync - a.sync),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(step: f64, sync: f64) -> StepTime {
        StepTime { step, sync }
    }

    fn model(max_local_bsz: u32) -> Measurements {
        let table = |scale: f64| {
            StepTable::new(vec![
                (32.0, time(0.1 * scale, 0.02 * scale)),
                (64.0, time(0.2 * scale, 0.04 * scale)),
            ])
        };
        let run = |batch: u32, sqr: f64, var: f64| Run {
            batch_size: batch,
            progress: vec![100.0, 200.0],
            metric: vec![0.5, 0.6],
            grad_sqr: vec![sqr, sqr],
            grad_var: vec![var, var],
        };
        Measurements::new(
            "toy".into(),
            BTreeMap::from([
                (vec![1], table(1.0)),
                (vec![2], table(1.2)),
                (vec![1, 1], table(2.0)),
            ]),
            BTreeMap::from([
                (1, BTreeMap::from([(1, table(1.0)), (2, table(1.2))])),
                (2, BTreeMap::from([(2, table(2.0)), (4, table(2.4))])),
                (4, BTreeMap::from([(4, table(3.0)), (8, table(3.2))])),
            ]),
            vec![run(32, 1.0, 1.0), run(256, 1.0, 3.0)],
            ModelLimits {
                init_batch_size: 32,
                max_batch_size: 256,
                min_local_bsz: 32,
                max_local_bsz,
                max_epochs: 2,
            },
        )
    }

    #[test]
    fn a_measured_placement_is_interpolated_in_the_local_batch() {
        let m = model(64);
        let t = m.step_time(&[2], 48.0);
        assert!((t.step - 0.18).abs() < 1e-12, "{t:?}");
        // Rotations name the same ring; zeros are not nodes.
        assert_eq!(m.step_time(&[1, 0, 1], 32.0), m.step_time(&[1, 1], 32.0));
    }

    #[test]
    fn an_unmeasured_placement_is_interpolated_between_node_counts_at_the_same_load() {
        let m = model(64);
        // 3 nodes x 2 GPUs: halfway between 2 nodes x 2 (4 replicas) and 4 nodes x 2 (8).
        let t = m.step_time(&[2, 2, 2], 32.0);
        assert!((t.step - 0.5 * (0.24 + 0.32)).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn above_the_largest_local_batch_a_replica_accumulates() {
        let m = model(64);
        let split = m.split(2, 256);
        assert_eq!(
            split,
            BatchSplit {
                atomic_bsz: 64,
                accum_steps: 1,
                batch_size: 256
            }
        );
        let job = Goodput {
            model: Arc::new(m),
            batch_size: 256,
        };
        let (rate, end) = job.rate(&[2], 0.0);
        // One step: 0.24 + 1 x (0.24 - 0.048) s; gain (3 + 1) / (3 / 8 + 1).
        let expected = (4.0 / (3.0 / 8.0 + 1.0)) / (0.24 + 0.192);
        assert!((rate - expected).abs() < 1e-9, "{rate} vs {expected}");
        assert_eq!(end, Some(100.0));
    }

    #[test]
    fn a_lone_replica_above_the_initial_batch_accumulates_at_least_once() {
        assert_eq!(model(64).split(1, 64).accum_steps, 1);
        assert_eq!(model(64).split(1, 32).accum_steps, 0);
    }

    #[test]
    fn progress_moves_through_epochs_and_ends_after_the_last() {
        let m = model(64);
        assert_eq!(m.epoch(0.0), (0, Some(100.0)));
        assert_eq!(m.epoch(100.0), (1, Some(200.0)));
        assert_eq!(m.epoch(200.0), (2, None));
        assert_eq!(m.total_progress(), 200.0);
    }

    #[test]
    fn the_gain_interpolates_gradient_statistics_between_measured_batches() {
        let m = model(64);
        assert_eq!(m.gain(32, 0), 1.0);
        // At 144 (halfway): var 2, sqr 1, scale 4.5.
        let g = m.gain(144, 0);
        assert!((g - 3.0 / (2.0 / 4.5 + 1.0)).abs() < 1e-12, "{g}");
    }
}
