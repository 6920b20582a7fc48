//! Importers of real data (the Pollux artifact's measurements and workloads, and the
//! Philly trace) into [`JobSpec`]s, plus the DRAGON Fig. 2 throughput tables.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{WorkloadError, resources};
use crate::sim::curve::Curve;
use crate::sim::{JobSpec, RoleSpec, Speed};

/// Images per second with 1-4 workers, DRAGON Fig. 2.
pub fn dragon_throughput(model: &str) -> Option<&'static [f64]> {
    match model {
        "inceptionv3" => Some(&[92.12, 154.14, 192.01, 280.79]),
        "resnet50" => Some(&[115.06, 176.65, 277.37, 346.51]),
        "alexnet" => Some(&[38.09, 59.1, 77.76, 97.69]),
        _ => None,
    }
}

fn import_error(path: &Path, message: impl std::fmt::Display) -> WorkloadError {
    WorkloadError::Import {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn read_rows<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, WorkloadError> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| import_error(path, e))?;
    reader
        .deserialize()
        .collect::<Result<Vec<T>, _>>()
        .map_err(|e| import_error(path, e))
}

#[derive(Deserialize)]
struct PhillyRow {
    timestamp: String,
    duration: f64,
    num_gpus: u32,
    #[allow(dead_code)]
    gpu_time: f64,
    cluster: String,
}

/// The first `jobs` jobs of virtual cluster `cluster` (of every cluster when none) in
/// `philly.csv`, by submission time, submitted relative to the first of them.
///
/// A Philly job ran for a measured `duration`; here it does `duration` units of work at
/// one unit per second whatever its placement (the trace has no scaling data). It asks
/// for its GPUs, one core and 4 GiB per GPU; a job with more GPUs than the largest node
/// (`node_gpus`) becomes a gang of workers of `node_gpus` GPUs each.
pub fn philly(
    path: &Path,
    cluster: Option<&str>,
    jobs: Option<usize>,
    node_gpus: u32,
) -> Result<Vec<JobSpec>, WorkloadError> {
    let rows: Vec<PhillyRow> = read_rows(path)?;
    let mut picked: Vec<(i64, PhillyRow)> = Vec::new();
    for row in rows
        .into_iter()
        .filter(|r| cluster.is_none_or(|c| r.cluster == c))
    {
        let time = chrono::NaiveDateTime::parse_from_str(&row.timestamp, "%Y-%m-%d %H:%M:%S")
            .map_err(|e| import_error(path, format!("timestamp `{}`: {e}", row.timestamp)))?;
        picked.push((time.and_utc().timestamp(), row));
    }
    if picked.is_empty() {
        let which = cluster.map_or("any cluster".into(), |c| format!("cluster `{c}`"));
        return Err(import_error(path, format!("no job of {which}")));
    }
    picked.sort_by_key(|(t, _)| *t);
    picked.truncate(jobs.unwrap_or(usize::MAX));
    let first = picked[0].0;
    let per_node = node_gpus.max(1);
    Ok(picked
        .into_iter()
        .enumerate()
        .map(|(i, (t, row))| {
            let gpus = row.num_gpus.max(1);
            let (role, count, each) = if gpus <= per_node {
                ("main", 1, gpus)
            } else {
                ("worker", gpus.div_ceil(per_node), per_node)
            };
            JobSpec {
                id: format!("philly-{i}"),
                submit_time: (t - first) as f64,
                priority: 0,
                utility: 1.0,
                roles: vec![RoleSpec {
                    name: role.into(),
                    count,
                    requests: resources(each as f64, 4.0 * each as f64, each),
                    max_cores: each as f64,
                    create_after: 0.0,
                }],
                scalable_role: role.into(),
                min_replicas: count,
                max_replicas: count,
                work: row.duration.max(1.0),
                speed: Speed::Table(vec![1.0; count as usize]),
                comm_penalty: 1.0,
                curve: None,
                noise: 0.0,
                eval_every: f64::INFINITY,
                metric_rises: false,
                checkpointable: true,
                labels: BTreeMap::from([
                    ("trace".into(), "philly".into()),
                    ("gpus".into(), gpus.to_string()),
                ]),
            }
        })
        .collect())
}

#[derive(Deserialize)]
struct ValidationRow {
    #[allow(dead_code)]
    progress: f64,
    iteration: f64,
    metric: f64,
}

/// A Pollux `validation-<batch>.csv` as a curve over the fraction of its iterations,
/// with the run's total iterations.
pub fn replay_curve(path: &Path) -> Result<(Curve, f64), WorkloadError> {
    let rows: Vec<ValidationRow> = read_rows(path)?;
    let total = rows
        .last()
        .map(|r| r.iteration)
        .filter(|t| *t > 0.0)
        .ok_or_else(|| import_error(path, "no rows"))?;
    let mut points = vec![(0.0, rows[0].metric)];
    points.extend(rows.iter().map(|r| (r.iteration / total, r.metric)));
    Ok((Curve::Replay { points }, total))
}

#[derive(Deserialize)]
struct PolluxJobRow {
    name: String,
    time: f64,
    application: String,
    num_replicas: u32,
    batch_size: u32,
}

#[derive(Deserialize)]
struct ScalabilityRow {
    num_nodes: u32,
    num_replicas: u32,
    local_bsz: f64,
    step_time: f64,
    #[allow(dead_code)]
    sync_time: f64,
}

/// One application's measurements.
struct Application {
    scalability: Vec<ScalabilityRow>,
    /// Batch sizes with a validation curve.
    batches: Vec<(u32, PathBuf)>,
}

/// Jobs of a Pollux `workload-N.csv`, with measurements from `data` (default: the
/// folder two levels above the CSV, where the artifact keeps `<model>/`).
///
/// Each job replays its model's validation curve at the nearest measured batch size and
/// does that run's samples (iterations x batch size) of work. Its throughput with `r`
/// GPU workers is `r x local batch / step time` from `scalability.csv` on the fewest
/// nodes measured, at the local batch nearest `batch / r`. Workers ask for 1 GPU, 4
/// cores and 16 GiB; they scale between 1 and the largest measured replica count.
pub fn pollux(path: &Path, data: Option<&Path>) -> Result<Vec<JobSpec>, WorkloadError> {
    let data = data.map(Path::to_path_buf).unwrap_or_else(|| {
        path.parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .to_path_buf()
    });
    let rows: Vec<PolluxJobRow> = read_rows(path)?;
    let mut apps: HashMap<String, Application> = HashMap::new();
    let mut jobs = Vec::new();
    for row in rows {
        if !apps.contains_key(&row.application) {
            let dir = data.join(&row.application);
            let scalability: Vec<ScalabilityRow> = read_rows(&dir.join("scalability.csv"))?;
            let mut batches = Vec::new();
            for entry in std::fs::read_dir(&dir).map_err(|e| import_error(&dir, e))? {
                let p = entry.map_err(|e| import_error(&dir, e))?.path();
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                if let Some(b) = name
                    .strip_prefix("validation-")
                    .and_then(|n| n.strip_suffix(".csv"))
                    .and_then(|b| b.parse().ok())
                {
                    batches.push((b, p.clone()));
                }
            }
            batches.sort();
            apps.insert(
                row.application.clone(),
                Application {
                    scalability,
                    batches,
                },
            );
        }
        let app = &apps[&row.application];
        let Some((batch, curve_path)) = app
            .batches
            .iter()
            .min_by_key(|(b, _)| b.abs_diff(row.batch_size))
            .cloned()
        else {
            return Err(import_error(
                path,
                format!("no validation curve for `{}`", row.application),
            ));
        };
        let (curve, iterations) = replay_curve(&curve_path)?;
        let max_r = app
            .scalability
            .iter()
            .map(|s| s.num_replicas)
            .max()
            .unwrap_or(1);
        let table: Vec<f64> = (1..=max_r)
            .map(|r| samples_per_second(&app.scalability, r, batch as f64))
            .collect();
        let replicas = row.num_replicas.clamp(1, max_r);
        let rises = matches!(row.application.as_str(), "cifar10" | "ncf");
        jobs.push(JobSpec {
            id: row.name.clone(),
            submit_time: row.time,
            priority: 0,
            utility: 1.0,
            roles: vec![RoleSpec {
                name: "worker".into(),
                count: replicas,
                requests: resources(4.0, 16.0, 1),
                max_cores: 4.0,
                create_after: 0.0,
            }],
            scalable_role: "worker".into(),
            min_replicas: 1,
            max_replicas: max_r,
            work: iterations * batch as f64,
            speed: Speed::Table(table),
            comm_penalty: 1.0,
            curve: Some(std::sync::Arc::new(curve)),
            noise: 0.0,
            eval_every: iterations * batch as f64 / 20.0,
            metric_rises: rises,
            checkpointable: true,
            labels: BTreeMap::from([
                ("model".into(), row.application.clone()),
                ("trace".into(), "pollux".into()),
            ]),
        });
    }
    Ok(jobs)
}

fn samples_per_second(rows: &[ScalabilityRow], replicas: u32, batch: f64) -> f64 {
    let with_r: Vec<&ScalabilityRow> = rows.iter().filter(|s| s.num_replicas == replicas).collect();
    let Some(fewest) = with_r.iter().map(|s| s.num_nodes).min() else {
        return 0.0;
    };
    let local = batch / replicas as f64;
    with_r
        .into_iter()
        .filter(|s| s.num_nodes == fewest)
        .min_by(|a, b| {
            (a.local_bsz - local)
                .abs()
                .total_cmp(&(b.local_bsz - local).abs())
        })
        .map_or(0.0, |s| replicas as f64 * s.local_bsz / s.step_time)
}
