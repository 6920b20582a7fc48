//! Estimating one job's workload model from its recorded life: its speed from the work
//! its loss samples say it had done (their `step`) against the time it ran and how (the
//! cores its tasks used, its replica count, whether it spanned nodes), its total work
//! from its speed and when it finished, and its loss curve from the samples' values.
//! `docs/recording.md` states the method and what cannot be estimated.

use std::collections::BTreeMap;

use super::history::{JobHistory, RunState};
use crate::simulator::curve::Curve;
use crate::simulator::share::speedup;
use crate::simulator::table_rate;
use crate::workload::{CurveFile, CurveShape, JobTemplate, RoleFile, ScaleFile};

/// A job's template, estimated, and what the estimate had to assume.
#[derive(Clone, Debug)]
pub(crate) struct Estimate {
    /// The template.
    pub(crate) template: JobTemplate,
    /// What could not be told from the recording and was assumed instead.
    pub(crate) assumed: Vec<String>,
}

/// The serial fraction a CPU job is given when the recording never shows it at two
/// core counts (the workload format's default).
const DEFAULT_SERIAL_FRACTION: f64 = 0.1;
/// The penalty for spanning nodes a job is given when the recording never shows it
/// both within one node and across several (the workload format's default).
const DEFAULT_COMM_PENALTY: f64 = 0.8;
/// Fewest samples a curve is fitted to.
const MIN_CURVE_SAMPLES: usize = 3;

/// One stretch of known progress: work `done` between `from` and `to`.
#[derive(Clone, Copy, Debug)]
struct Progress {
    from: f64,
    to: f64,
    done: f64,
}

/// Estimates the template of `job`, whose recording ends at `end`; an error says why
/// it cannot be (it never ran).
pub(crate) fn estimate(job: &JobHistory, end: f64) -> Result<Estimate, String> {
    let mut assumed = Vec::new();
    let stop = job.finished.or(job.left).unwrap_or(end);
    if !job
        .stretches
        .iter()
        .any(|s| s.state.progressing && s.to > s.from)
    {
        return Err(match job.finished {
            Some(_) => "it finished without any round showing it run".into(),
            None => "it never ran, so nothing tells its speed or its work".into(),
        });
    }
    let gpu = job
        .first
        .tasks
        .iter()
        .any(|t| t.role == job.first.replicas.role && t.requests.gpus > 0);
    let progress = progress_of(job);
    let spans_seen = job
        .stretches
        .iter()
        .filter(|s| s.state.progressing)
        .map(|s| s.state.spans)
        .fold((false, false), |(a, b), spans| (a || spans, b || !spans));
    let penalties: Vec<f64> = if spans_seen == (true, true) && !progress.is_empty() {
        (6..=20).map(|i| f64::from(i) * 0.05).collect()
    } else {
        if spans_seen.0 && job.first.tasks.len() > 1 {
            assumed.push(format!(
                "its penalty for spanning nodes ({DEFAULT_COMM_PENALTY}): it never ran within one node"
            ));
        }
        vec![DEFAULT_COMM_PENALTY]
    };
    let (model, notes) = if gpu {
        fit_table(job, &progress, &penalties)
    } else {
        fit_cpu(job, &progress, &penalties)
    };
    assumed.extend(notes);
    let (last_time, last_work) = progress.last().map_or((job.first.submit_time, 0.0), |p| {
        (p.to, cumulative(&progress))
    });
    let work = last_work + model.rate_integral(job, last_time, stop);
    if job.finished.is_none() {
        assumed.push(format!(
            "its work ({}): the work done by {} (it had not finished), a lower bound",
            significant(work),
            if job.left.is_some() {
                "when it left the cluster"
            } else {
                "the recording's end"
            }
        ));
    }
    let mut template = base_template(job);
    template.work = significant(work);
    template.comm_penalty = model.penalty;
    match &model.speed {
        ModelSpeed::Cpu {
            per_core,
            serial_fraction,
        } => {
            template.speed = Some(significant(*per_core));
            template.serial_fraction = *serial_fraction;
        }
        ModelSpeed::Table(table) => {
            template.throughput = Some(table.iter().map(|&r| significant(r)).collect());
        }
    }
    let (curve, noise, every) = fit_curve(job, work, &mut assumed);
    template.curve = Some(curve);
    template.noise = noise;
    template.eval_every = every;
    Ok(Estimate { template, assumed })
}

/// The spec as recorded: roles and requests, replicas, priority, utility, labels.
fn base_template(job: &JobHistory) -> JobTemplate {
    let first = &job.first;
    let cpus = |millis: u64| millis as f64 / 1000.0;
    let gib = |bytes: u64| bytes as f64 / (1u64 << 30) as f64;
    let max_cores = |role: &super::history::RoleSeen| {
        let used = role.max_cores_used;
        (used > 0.0).then_some(used)
    };
    let mut template = JobTemplate {
        work: 0.0,
        speed: None,
        serial_fraction: DEFAULT_SERIAL_FRACTION,
        throughput: None,
        model: None,
        cpus: 1.0,
        memory_gib: 1.0,
        gpus: 0,
        max_cores: None,
        roles: Vec::new(),
        scale: None,
        curve: None,
        replay: None,
        noise: 0.0,
        eval_every: None,
        comm_penalty: DEFAULT_COMM_PENALTY,
        checkpointable: first.checkpointable,
        checkpoint_cost: None,
        checkpoint_grace: None,
        acknowledge: Default::default(),
        priority: first.priority,
        utility: first.utility,
        labels: BTreeMap::clone(&first.labels),
        node_selector: BTreeMap::new(),
        tolerations: Vec::new(),
        required_node_affinity: Vec::new(),
    };
    let single = job.roles.len() == 1
        && job.roles[0].name == "main"
        && job.roles[0].count == 1
        && first.replicas.min == 1
        && first.replicas.max == 1;
    if single {
        let role = &job.roles[0];
        template.cpus = cpus(role.requests.cpu_millis);
        template.memory_gib = gib(role.requests.memory_bytes);
        template.gpus = role.requests.gpus;
        template.max_cores = max_cores(role);
        return template;
    }
    let arrived = job.roles.first().map_or(0.0, |r| r.first_seen);
    template.roles = job
        .roles
        .iter()
        .map(|role| RoleFile {
            name: role.name.clone(),
            count: role.count,
            cpus: cpus(role.requests.cpu_millis),
            memory_gib: gib(role.requests.memory_bytes),
            gpus: role.requests.gpus,
            max_cores: max_cores(role),
            create_after: role.first_seen - arrived,
        })
        .collect();
    template.scale = Some(ScaleFile {
        role: first.replicas.role.clone(),
        min: Some(first.replicas.min),
        max: Some(first.replicas.max),
    });
    template
}

/// The work done between the job's submission and each loss sample, as increments.
/// An increment that goes back (a job without checkpoints losing its work) ends the
/// series: what follows measures work done again.
fn progress_of(job: &JobHistory) -> Vec<Progress> {
    let mut out = Vec::new();
    let (mut time, mut step) = (job.first.submit_time, 0u64);
    for sample in &job.samples {
        if sample.step < step {
            break;
        }
        if sample.time > time {
            out.push(Progress {
                from: time,
                to: sample.time,
                done: (sample.step - step) as f64,
            });
            time = sample.time;
            step = sample.step;
        }
    }
    out
}

fn cumulative(progress: &[Progress]) -> f64 {
    progress.iter().map(|p| p.done).sum()
}

/// A fitted speed.
#[derive(Clone, Debug)]
struct Model {
    speed: ModelSpeed,
    penalty: f64,
}

#[derive(Clone, Debug)]
enum ModelSpeed {
    /// Work per second on one core and the speed-up curve's serial fraction.
    Cpu { per_core: f64, serial_fraction: f64 },
    /// Work per second with 1, 2, ... replicas.
    Table(Vec<f64>),
}

impl Model {
    /// Work per second in `state`.
    fn rate(&self, state: &RunState) -> f64 {
        if !state.progressing {
            return 0.0;
        }
        let base = match &self.speed {
            ModelSpeed::Cpu {
                per_core,
                serial_fraction,
            } => {
                per_core
                    * state
                        .cores_millis
                        .iter()
                        .map(|&m| speedup(m as f64 / 1000.0, *serial_fraction))
                        .sum::<f64>()
            }
            ModelSpeed::Table(table) => table_rate(table, state.replicas),
        };
        if state.spans {
            base * self.penalty
        } else {
            base
        }
    }

    /// Work the model says the job did between `from` and `to`.
    fn rate_integral(&self, job: &JobHistory, from: f64, to: f64) -> f64 {
        exposure(job, from, to, |s| self.rate(s))
    }
}

/// `∫ weight(state) dt` over the job's stretches between `from` and `to`.
fn exposure(job: &JobHistory, from: f64, to: f64, weight: impl Fn(&RunState) -> f64) -> f64 {
    job.stretches
        .iter()
        .filter(|s| s.to > from && s.from < to)
        .map(|s| weight(&s.state) * (s.to.min(to) - s.from.max(from)))
        .sum()
}

/// Fits `per_core` (work per second per core, from the total work over the total
/// core-seconds weighted by the speed-up curve) and, when the job ran at more than one
/// core count, the serial fraction and spanning penalty that best explain each
/// stretch between two samples (least squares over a grid).
fn fit_cpu(job: &JobHistory, progress: &[Progress], penalties: &[f64]) -> (Model, Vec<String>) {
    let mut notes = Vec::new();
    let core_counts: std::collections::BTreeSet<u64> = job
        .stretches
        .iter()
        .filter(|s| s.state.progressing)
        .flat_map(|s| s.state.cores_millis.iter().copied())
        .collect();
    let fractions: Vec<f64> = if core_counts.len() >= 2 && progress.len() >= 2 {
        (0..=50).map(|i| f64::from(i) * 0.02).collect()
    } else {
        vec![DEFAULT_SERIAL_FRACTION]
    };
    if progress.is_empty() {
        notes.push(
            "its speed: it reported no loss samples, so its work is counted as one unit per \
             core-second it ran (speed 1)"
                .into(),
        );
        let model = Model {
            speed: ModelSpeed::Cpu {
                per_core: 1.0,
                serial_fraction: DEFAULT_SERIAL_FRACTION,
            },
            penalty: penalties[0],
        };
        return (model, notes);
    }
    if fractions.len() == 1 && core_counts.iter().any(|&m| m > 1000) {
        notes.push(format!(
            "its serial fraction ({DEFAULT_SERIAL_FRACTION}): it ran at one core count only"
        ));
    }
    let mut best: Option<(f64, Model)> = None;
    for &serial_fraction in &fractions {
        for &penalty in penalties {
            let unit = Model {
                speed: ModelSpeed::Cpu {
                    per_core: 1.0,
                    serial_fraction,
                },
                penalty,
            };
            let exposures: Vec<f64> = progress
                .iter()
                .map(|p| unit.rate_integral(job, p.from, p.to))
                .collect();
            let total: f64 = exposures.iter().sum();
            if total <= 0.0 {
                continue;
            }
            let per_core = cumulative(progress) / total;
            let error: f64 = progress
                .iter()
                .zip(&exposures)
                .map(|(p, e)| (p.done - per_core * e).powi(2))
                .sum();
            if best.as_ref().is_none_or(|(b, _)| error < *b) {
                best = Some((
                    error,
                    Model {
                        speed: ModelSpeed::Cpu {
                            per_core,
                            serial_fraction,
                        },
                        penalty,
                    },
                ));
            }
        }
    }
    let model = best.map(|(_, m)| m).unwrap_or(Model {
        speed: ModelSpeed::Cpu {
            per_core: 1.0,
            serial_fraction: DEFAULT_SERIAL_FRACTION,
        },
        penalty: penalties[0],
    });
    (model, notes)
}

/// Fits the work per second at each replica count the job ran with (least squares over
/// the stretches between samples), then fills the counts it never ran with in
/// proportion to the nearest one it did.
fn fit_table(job: &JobHistory, progress: &[Progress], penalties: &[f64]) -> (Model, Vec<String>) {
    let mut notes = Vec::new();
    let max = job.first.replicas.max.max(1);
    let counts: Vec<u32> = {
        let seen: std::collections::BTreeSet<u32> = job
            .stretches
            .iter()
            .filter(|s| s.state.progressing && s.state.replicas > 0)
            .map(|s| s.state.replicas)
            .collect();
        seen.into_iter().collect()
    };
    if progress.is_empty() {
        notes.push(
            "its speed: it reported no loss samples, so its work is counted as one unit per \
             replica-second it ran"
                .into(),
        );
        let table = (1..=max).map(f64::from).collect();
        let model = Model {
            speed: ModelSpeed::Table(table),
            penalty: penalties[0],
        };
        return (model, notes);
    }
    let mut best: Option<(f64, Vec<f64>, f64)> = None;
    for &penalty in penalties {
        let weight = |r: u32| {
            move |s: &RunState| {
                if s.progressing && s.replicas == r {
                    if s.spans { penalty } else { 1.0 }
                } else {
                    0.0
                }
            }
        };
        let rows: Vec<Vec<f64>> = progress
            .iter()
            .map(|p| {
                counts
                    .iter()
                    .map(|&r| exposure(job, p.from, p.to, weight(r)))
                    .collect()
            })
            .collect();
        let done: Vec<f64> = progress.iter().map(|p| p.done).collect();
        let rates = least_squares(&rows, &done)
            .filter(|rates| rates.iter().all(|&r| r > 0.0))
            .unwrap_or_else(|| {
                // Too few stretches to tell the counts apart: one rate per replica.
                let per_replica: f64 = rows
                    .iter()
                    .map(|row| {
                        row.iter()
                            .zip(&counts)
                            .map(|(e, &r)| e * f64::from(r))
                            .sum::<f64>()
                    })
                    .sum();
                let per_replica = cumulative(progress) / per_replica.max(f64::MIN_POSITIVE);
                counts.iter().map(|&r| per_replica * f64::from(r)).collect()
            });
        let error: f64 = rows
            .iter()
            .zip(&done)
            .map(|(row, d)| (d - row.iter().zip(&rates).map(|(e, r)| e * r).sum::<f64>()).powi(2))
            .sum();
        if best.as_ref().is_none_or(|(b, _, _)| error < *b) {
            best = Some((error, rates, penalty));
        }
    }
    let (_, rates, penalty) = best.unwrap_or((0.0, Vec::new(), penalties[0]));
    let table = fill_table(&counts, &rates, max);
    if counts.len() < max as usize {
        let ran: Vec<String> = counts.iter().map(u32::to_string).collect();
        notes.push(format!(
            "its throughput at replica counts it never ran with (it ran with {}): in \
             proportion to the nearest count it ran with",
            ran.join(", ")
        ));
    }
    (
        Model {
            speed: ModelSpeed::Table(table),
            penalty,
        },
        notes,
    )
}

/// A throughput for each replica count from 1 to `max`: the fitted rate where the job
/// ran with that count, else the nearest fitted count's rate scaled by the ratio of
/// the counts.
fn fill_table(counts: &[u32], rates: &[f64], max: u32) -> Vec<f64> {
    (1..=max)
        .map(|r| match counts.iter().position(|&c| c == r) {
            Some(i) => rates[i],
            None => counts
                .iter()
                .zip(rates)
                .min_by_key(|(c, _)| c.abs_diff(r))
                .map_or(f64::from(r), |(&c, &rate)| {
                    rate * f64::from(r) / f64::from(c)
                }),
        })
        .collect()
}

/// The least-squares solution of `rows · x = values` by the normal equations, or none
/// when they are singular.
fn least_squares(rows: &[Vec<f64>], values: &[f64]) -> Option<Vec<f64>> {
    let n = rows.first()?.len();
    let mut a = vec![vec![0.0; n + 1]; n];
    for (row, value) in rows.iter().zip(values) {
        for i in 0..n {
            for j in 0..n {
                a[i][j] += row[i] * row[j];
            }
            a[i][n] += row[i] * value;
        }
    }
    // Gauss-Jordan elimination with partial pivoting.
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let factor = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= factor * p;
                }
            }
        }
    }
    Some((0..n).map(|i| a[i][n] / a[i][i]).collect())
}

/// The loss curve fitted to the samples (the parametric family, least squares over its
/// shape), the relative noise around it, and the work between two samples.
fn fit_curve(
    job: &JobHistory,
    work: f64,
    assumed: &mut Vec<String>,
) -> (CurveFile, f64, Option<f64>) {
    let points: Vec<(f64, f64)> = job
        .samples
        .iter()
        .map(|s| ((s.step as f64 / work).clamp(0.0, 1.0), s.value))
        .collect();
    let mut gaps: Vec<f64> = job
        .samples
        .windows(2)
        .filter(|w| w[1].step > w[0].step)
        .map(|w| (w[1].step - w[0].step) as f64)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let every = gaps.get(gaps.len() / 2).copied();
    if points.len() < MIN_CURVE_SAMPLES {
        if !points.is_empty() {
            assumed.push(format!(
                "no loss curve: {} sample(s) are too few to fit one (at least {MIN_CURVE_SAMPLES})",
                points.len()
            ));
        }
        return (CurveFile::Preset("none".into()), 0.0, every);
    }
    let mut best: Option<(f64, CurveShape)> = None;
    for i in 0..160 {
        let share_at_20 = 0.2 + 0.799 * f64::from(i) / 159.0;
        // value = first (1 - R(p)) + last R(p): linear in first and last.
        let shape = Curve::parametric(1.0, 0.0, share_at_20);
        let (mut saa, mut sab, mut sbb, mut sav, mut sbv) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(p, v) in &points {
            let a = shape.value(p);
            let b = 1.0 - a;
            saa += a * a;
            sab += a * b;
            sbb += b * b;
            sav += a * v;
            sbv += b * v;
        }
        let det = saa * sbb - sab * sab;
        if det.abs() < 1e-12 {
            continue;
        }
        let first = (sav * sbb - sbv * sab) / det;
        let last = (saa * sbv - sab * sav) / det;
        let fitted = Curve::parametric(first, last, share_at_20);
        let error: f64 = points
            .iter()
            .map(|&(p, v)| (v - fitted.value(p)).powi(2))
            .sum();
        if best.as_ref().is_none_or(|(b, _)| error < *b) {
            best = Some((
                error,
                CurveShape {
                    first,
                    last,
                    share_at_20,
                },
            ));
        }
    }
    let Some((_, shape)) = best else {
        assumed.push("no loss curve: its samples fit no curve of the family".into());
        return (CurveFile::Preset("none".into()), 0.0, every);
    };
    let fitted = Curve::parametric(shape.first, shape.last, shape.share_at_20);
    let relative: Vec<f64> = points
        .iter()
        .filter_map(|&(p, v)| {
            let f = fitted.value(p);
            (f.abs() > 1e-12).then(|| v / f - 1.0)
        })
        .collect();
    let noise = if relative.is_empty() {
        0.0
    } else {
        (relative.iter().map(|r| r * r).sum::<f64>() / relative.len() as f64).sqrt()
    };
    let shape = CurveShape {
        first: significant(shape.first),
        last: significant(shape.last),
        share_at_20: significant(shape.share_at_20).clamp(0.2, 0.999),
    };
    (CurveFile::Shape(shape), significant(noise), every)
}

/// `value` to six significant digits: what the estimate can claim, and what a person
/// editing the file can read.
pub(super) fn significant(value: f64) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let digits = 6 - 1 - value.abs().log10().floor() as i32;
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_solves_an_overdetermined_consistent_system() {
        // 2 a + 1 b = 7, 1 a + 3 b = 11, 1 a + 1 b = 5: a = 2, b = 3.
        let rows = vec![vec![2.0, 1.0], vec![1.0, 3.0], vec![1.0, 1.0]];
        let x = least_squares(&rows, &[7.0, 11.0, 5.0]).unwrap();
        assert!(
            (x[0] - 2.0).abs() < 1e-9 && (x[1] - 3.0).abs() < 1e-9,
            "{x:?}"
        );
        assert_eq!(
            least_squares(&[vec![1.0, 2.0], vec![2.0, 4.0]], &[1.0, 2.0]),
            None
        );
    }

    #[test]
    fn counts_never_run_with_take_the_nearest_count_in_proportion() {
        let table = fill_table(&[2, 3], &[100.0, 140.0], 5);
        assert_eq!(
            table,
            [50.0, 100.0, 140.0, 140.0 * 4.0 / 3.0, 140.0 * 5.0 / 3.0]
        );
    }

    #[test]
    fn six_significant_digits() {
        assert_eq!(significant(1234.5678), 1234.57);
        assert_eq!(significant(0.000123456789), 0.000123457);
        assert_eq!(significant(0.0), 0.0);
    }
}
