//! Reading one model directory in the Pollux artifact's format into
//! [`Measurements`]: `placements.csv`, `scalability.csv`, one `validation-<batch>.csv`
//! per measured batch size, and an optional `application.yaml` with the limits the
//! artifact sets per model. Any directory in this format works; nothing here knows a
//! model by name. Every fault names the file, and where it has one the line and column.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::error::WorkloadError;
use super::limits::InputLimits;
use super::table::{Row, Table};
use crate::simulator::goodput::{Measurements, ModelLimits, Run, StepTable, StepTime};

/// Where the files come from, for the error about a missing one.
pub(crate) const ORIGIN: &str = "the Pollux measurements and workloads (petuum/adaptdl, \
    branch `osdi21-artifact`, folder `simulator/`, Apache-2.0) are kept in the repository \
    under `data/pollux/` (see its README.md); paths in a workload file are relative to \
    that file";

/// `application.yaml`: the artifact's per-model arguments, each optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplicationFile {
    /// Epochs a job trains (default: the fewest rows of any validation file).
    max_epochs: Option<usize>,
    /// Batch size `progress` is counted at (default: the smallest validation batch).
    init_batch_size: Option<u32>,
    /// Largest total batch (default: the largest validation batch).
    max_batch_size: Option<u32>,
    /// Smallest local batch (default: the smallest in `placements.csv`).
    min_local_bsz: Option<u32>,
    /// Largest local batch computed at once (default: the largest in `placements.csv`).
    max_local_bsz: Option<u32>,
}

/// Reads the model directory `dir`, within the default [`InputLimits`].
pub fn load_application(dir: &Path) -> Result<Measurements, WorkloadError> {
    load_within(dir, &InputLimits::default())
}

/// Reads the model directory `dir`, each file within `limits`.
pub(crate) fn load_within(dir: &Path, limits: &InputLimits) -> Result<Measurements, WorkloadError> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let runs = read_runs(dir, limits)?;
    let placements_table = Table::read(&dir.join("placements.csv"), ORIGIN, limits)?;
    let (placements, placed_shapes) = read_placements(&placements_table)?;
    let scalability = Table::read(&dir.join("scalability.csv"), ORIGIN, limits)?;
    let shapes = merge_shapes(placed_shapes, &scalability)?;
    let limits = model_limits(dir, &runs, &placements_table, limits)?;
    Ok(Measurements::new(name, placements, shapes, runs, limits))
}

/// Every `validation-<batch>.csv`, rising in batch size.
fn read_runs(dir: &Path, limits: &InputLimits) -> Result<Vec<Run>, WorkloadError> {
    if !dir.is_dir() {
        return Err(WorkloadError::MissingData {
            path: dir.to_path_buf(),
            origin: ORIGIN,
        });
    }
    let fault = |path: &Path, message: String| WorkloadError::Import {
        path: path.to_path_buf(),
        message,
    };
    let mut runs: Vec<Run> = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| fault(dir, e.to_string()))?;
    for entry in entries {
        let path = entry.map_err(|e| fault(dir, e.to_string()))?.path();
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Some(batch) = file
            .strip_prefix("validation-")
            .and_then(|n| n.strip_suffix(".csv"))
        else {
            continue;
        };
        let batch_size = batch
            .parse::<u32>()
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                fault(
                    &path,
                    format!(
                        "the batch size in the file name, `{batch}`, is not a whole number \
                         above 0 (validation files are named validation-<batch>.csv)"
                    ),
                )
            })?;
        if let Some(twin) = runs.iter().find(|r| r.batch_size == batch_size) {
            return Err(fault(
                &path,
                format!("a second run at batch size {}", twin.batch_size),
            ));
        }
        runs.push(read_run(&Table::read(&path, ORIGIN, limits)?, batch_size)?);
    }
    if runs.is_empty() {
        return Err(fault(
            dir,
            "no validation-<batch>.csv: a model needs at least one measured run".into(),
        ));
    }
    runs.sort_by_key(|r| r.batch_size);
    Ok(runs)
}

fn read_run(table: &Table, batch_size: u32) -> Result<Run, WorkloadError> {
    let [progress, iteration, metric, grad_sqr, grad_var] =
        table.columns(["progress", "iteration", "metric", "grad_sqr", "grad_var"])?;
    let mut run = Run {
        batch_size,
        progress: Vec::new(),
        metric: Vec::new(),
        grad_sqr: Vec::new(),
        grad_var: Vec::new(),
    };
    let mut last_iteration = 0.0;
    for row in table.rows() {
        let previous = run.progress.last().copied().unwrap_or(0.0);
        let p = row.number(progress)?;
        if p <= previous {
            return Err(row.fault(
                progress,
                format!("{p} is not above {previous}: progress must rise from row to row"),
            ));
        }
        let it = row.number(iteration)?;
        if it < last_iteration {
            return Err(row.fault(
                iteration,
                format!("{it} is below {last_iteration}: iterations cannot go back"),
            ));
        }
        last_iteration = it;
        run.progress.push(p);
        run.metric.push(row.number(metric)?);
        run.grad_sqr
            .push(row.number_where(grad_sqr, ">= 0", |v| v >= 0.0)?);
        run.grad_var
            .push(row.number_where(grad_var, ">= 0", |v| v >= 0.0)?);
    }
    if run.progress.is_empty() {
        return Err(table.fault("no rows: a run needs at least one epoch"));
    }
    Ok(run)
}

/// `(local batch, step time, sync time)` of a row, checked.
fn step_row(
    row: &Row<'_>,
    [bsz, step, sync]: [usize; 3],
) -> Result<(f64, StepTime), WorkloadError> {
    let local = f64::from(row.whole(bsz, 1, u32::MAX)?);
    let step_time = row.number_where(step, "above 0 seconds", |v| v > 0.0)?;
    let sync_time = row.number_where(
        sync,
        &format!("between 0 and the step time ({step_time} s)"),
        |v| (0.0..=step_time).contains(&v),
    )?;
    Ok((
        local,
        StepTime {
            step: step_time,
            sync: sync_time,
        },
    ))
}

/// Adds a row to the table of `key`, refusing one that does not rise in local batch.
fn push_rising<K: Ord + Clone>(
    tables: &mut BTreeMap<K, Vec<(f64, StepTime)>>,
    key: &K,
    described: impl Fn() -> String,
    row: &Row<'_>,
    bsz_col: usize,
    entry: (f64, StepTime),
) -> Result<(), WorkloadError> {
    let rows = tables.entry(key.clone()).or_default();
    if let Some(&(last, _)) = rows.last()
        && entry.0 <= last
    {
        return Err(row.fault(
            bsz_col,
            format!(
                "{} is not above {last}, the previous local batch of {}: each one's rows \
                 must rise in local_bsz",
                entry.0,
                described()
            ),
        ));
    }
    rows.push(entry);
    Ok(())
}

type ShapeRows = BTreeMap<(u32, u32), Vec<(f64, StepTime)>>;

/// `placements.csv` by placement, and the rows by (nodes, replicas) shape.
fn read_placements(
    table: &Table,
) -> Result<(BTreeMap<Vec<u32>, StepTable>, ShapeRows), WorkloadError> {
    let [placement, bsz, step, sync] =
        table.columns(["placement", "local_bsz", "step_time", "sync_time"])?;
    let mut by_placement: BTreeMap<Vec<u32>, Vec<(f64, StepTime)>> = BTreeMap::new();
    let mut shapes: ShapeRows = BTreeMap::new();
    for row in table.rows() {
        let text = row.text(placement);
        let gpus: Option<Vec<u32>> = text
            .chars()
            .map(|c| c.to_digit(10).filter(|&d| d > 0))
            .collect();
        let Some(gpus) = gpus.filter(|g| !g.is_empty()) else {
            return Err(row.fault(
                placement,
                format!("`{text}` is not GPUs per node, one digit 1-9 a node (e.g. `22`)"),
            ));
        };
        let entry = step_row(&row, [bsz, step, sync])?;
        push_rising(
            &mut by_placement,
            &gpus,
            || format!("placement `{text}`"),
            &row,
            bsz,
            entry,
        )?;
        let shape = (gpus.len() as u32, gpus.iter().sum());
        shapes.entry(shape).or_default().push(entry);
    }
    if table.len() == 0 {
        return Err(table.fault("no rows: a model needs at least one measured placement"));
    }
    let placements = by_placement
        .into_iter()
        .map(|(p, rows)| (p, StepTable::new(rows)))
        .collect();
    Ok((placements, shapes))
}

/// The shapes of `placements.csv` and `scalability.csv`, rows of one shape at one local
/// batch averaged (as the artifact averages them before interpolating).
fn merge_shapes(
    mut shapes: ShapeRows,
    scalability: &Table,
) -> Result<BTreeMap<u32, BTreeMap<u32, StepTable>>, WorkloadError> {
    let [nodes, replicas, bsz, step, sync] = scalability.columns([
        "num_nodes",
        "num_replicas",
        "local_bsz",
        "step_time",
        "sync_time",
    ])?;
    let mut measured: ShapeRows = BTreeMap::new();
    for row in scalability.rows() {
        let n = row.whole(nodes, 1, u32::MAX)?;
        let r = row.whole(replicas, n, u32::MAX)?;
        let entry = step_row(&row, [bsz, step, sync])?;
        push_rising(
            &mut measured,
            &(n, r),
            || format!("{n} nodes with {r} replicas"),
            &row,
            bsz,
            entry,
        )?;
    }
    for (shape, rows) in measured {
        shapes.entry(shape).or_default().extend(rows);
    }
    let mut out: BTreeMap<u32, BTreeMap<u32, StepTable>> = BTreeMap::new();
    for ((n, r), mut rows) in shapes {
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut averaged: Vec<(f64, StepTime)> = Vec::new();
        let mut counts: Vec<f64> = Vec::new();
        for (b, t) in rows {
            match averaged.last_mut() {
                Some((last, sum)) if *last == b => {
                    sum.step += t.step;
                    sum.sync += t.sync;
                    *counts.last_mut().expect("one count per row") += 1.0;
                }
                _ => {
                    averaged.push((b, t));
                    counts.push(1.0);
                }
            }
        }
        for ((_, t), k) in averaged.iter_mut().zip(counts) {
            t.step /= k;
            t.sync /= k;
        }
        out.entry(n)
            .or_default()
            .insert(r, StepTable::new(averaged));
    }
    Ok(out)
}

/// The limits: `application.yaml`'s where it sets them, else what the files say.
fn model_limits(
    dir: &Path,
    runs: &[Run],
    placements: &Table,
    input: &InputLimits,
) -> Result<ModelLimits, WorkloadError> {
    let path = dir.join("application.yaml");
    let file = if path.exists() {
        let text = crate::yaml::read_text(&path, input).map_err(|source| WorkloadError::Read {
            path: path.clone(),
            source,
        })?;
        crate::yaml::from_str::<ApplicationFile>(&text, input.yaml_depth)
            .map_err(|e| WorkloadError::parse(&path, e))?
    } else {
        ApplicationFile::default()
    };
    let invalid = |field: &str, message: String| WorkloadError::Invalid {
        path: path.clone(),
        field: field.into(),
        message,
    };
    let bsz = placements.column("local_bsz")?;
    let locals: Vec<u32> = placements
        .rows()
        .map(|r| r.whole(bsz, 1, u32::MAX))
        .collect::<Result<_, _>>()?;
    let (shortest, fewest) = runs
        .iter()
        .map(|r| (r, r.progress.len()))
        .min_by_key(|(_, n)| *n)
        .expect("read_runs refuses a model without runs");
    let limits = ModelLimits {
        init_batch_size: file.init_batch_size.unwrap_or(runs[0].batch_size),
        max_batch_size: file
            .max_batch_size
            .unwrap_or(runs[runs.len() - 1].batch_size),
        min_local_bsz: file
            .min_local_bsz
            .unwrap_or_else(|| locals.iter().copied().min().unwrap_or(1)),
        max_local_bsz: file
            .max_local_bsz
            .unwrap_or_else(|| locals.iter().copied().max().unwrap_or(1)),
        max_epochs: file.max_epochs.unwrap_or(fewest),
    };
    if limits.max_epochs == 0 || limits.max_epochs > fewest {
        return Err(invalid(
            "max_epochs",
            format!(
                "{} epochs, but validation-{}.csv has {fewest} rows (one per epoch): give 1 to {fewest}",
                limits.max_epochs, shortest.batch_size
            ),
        ));
    }
    for (field, value) in [
        ("init_batch_size", limits.init_batch_size),
        ("max_batch_size", limits.max_batch_size),
        ("min_local_bsz", limits.min_local_bsz),
        ("max_local_bsz", limits.max_local_bsz),
    ] {
        if value == 0 {
            return Err(invalid(field, "must be at least 1".into()));
        }
    }
    if limits.min_local_bsz > limits.max_local_bsz {
        return Err(invalid(
            "max_local_bsz",
            format!(
                "{} is below min_local_bsz ({})",
                limits.max_local_bsz, limits.min_local_bsz
            ),
        ));
    }
    if limits.init_batch_size > limits.max_batch_size
        || limits.max_batch_size < limits.min_local_bsz
    {
        return Err(invalid(
            "max_batch_size",
            format!(
                "{} must be at least init_batch_size ({}) and min_local_bsz ({})",
                limits.max_batch_size, limits.init_batch_size, limits.min_local_bsz
            ),
        ));
    }
    Ok(limits)
}
