//! Importers of real data (the Pollux artifact's measurements and workloads, and the
//! Philly trace) into [`JobSpec`]s, plus the DRAGON Fig. 2 throughput tables.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{WorkloadError, resources};
use crate::simulator::curve::Curve;
use crate::simulator::{JobSpec, RoleSpec, Speed};

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

/// Where the Pollux artifact's files come from, for the error about a missing one.
const POLLUX_ORIGIN: &str = "the Pollux measurements and workloads (petuum/adaptdl, branch \
    `osdi21-artifact`, folder `simulator/`, Apache-2.0) are kept in the repository under \
    `data/pollux/` (see its README.md); paths in a workload file are relative to that file";

/// Where `philly.csv` comes from, for the error about a missing one.
const PHILLY_ORIGIN: &str = "`philly.csv` (the Pollux artifact's cut of Microsoft's Philly \
    traces, msr-fiddle/philly-traces, CC BY 4.0) is kept in the repository under \
    `data/pollux/` (see its README.md); paths in a workload file are relative to that file";

/// The error for a data file or folder that is not there.
fn missing(path: &Path, origin: &'static str) -> WorkloadError {
    WorkloadError::MissingData {
        path: path.to_path_buf(),
        origin,
    }
}

fn read_rows<T: for<'de> Deserialize<'de>>(
    path: &Path,
    origin: &'static str,
) -> Result<Vec<T>, WorkloadError> {
    if !path.exists() {
        return Err(missing(path, origin));
    }
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
    let rows: Vec<PhillyRow> = read_rows(path, PHILLY_ORIGIN)?;
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
    let rows: Vec<ValidationRow> = read_rows(path, POLLUX_ORIGIN)?;
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

/// One measured step time: `replicas` GPUs spread over `nodes` nodes at a local batch.
#[derive(Clone, Copy, Debug, PartialEq)]
struct StepTime {
    nodes: u32,
    replicas: u32,
    local_bsz: f64,
    step_time: f64,
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

#[derive(Deserialize)]
struct PlacementRow {
    /// GPUs per node, one digit a node: `22` is two nodes with two GPUs each.
    placement: String,
    local_bsz: f64,
    step_time: f64,
    #[allow(dead_code)]
    sync_time: f64,
}

/// One application's measurements.
struct Application {
    /// `scalability.csv` (6 to 64 replicas) and `placements.csv` (1 to 16) together.
    steps: Vec<StepTime>,
    /// Batch sizes with a validation curve.
    batches: Vec<(u32, PathBuf)>,
}

impl Application {
    fn load(dir: &Path) -> Result<Self, WorkloadError> {
        let scalability: Vec<ScalabilityRow> =
            read_rows(&dir.join("scalability.csv"), POLLUX_ORIGIN)?;
        let mut steps: Vec<StepTime> = scalability
            .into_iter()
            .map(|r| StepTime {
                nodes: r.num_nodes,
                replicas: r.num_replicas,
                local_bsz: r.local_bsz,
                step_time: r.step_time,
            })
            .collect();
        let placements_path = dir.join("placements.csv");
        let placements: Vec<PlacementRow> = read_rows(&placements_path, POLLUX_ORIGIN)?;
        for row in placements {
            let per_node: Option<Vec<u32>> =
                row.placement.chars().map(|c| c.to_digit(10)).collect();
            let Some(per_node) = per_node.filter(|p| !p.is_empty()) else {
                return Err(import_error(
                    &placements_path,
                    format!("placement `{}` is not digits", row.placement),
                ));
            };
            steps.push(StepTime {
                nodes: per_node.len() as u32,
                replicas: per_node.iter().sum(),
                local_bsz: row.local_bsz,
                step_time: row.step_time,
            });
        }
        let mut batches = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| import_error(dir, e))? {
            let p = entry.map_err(|e| import_error(dir, e))?.path();
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
        Ok(Self { steps, batches })
    }

    fn max_replicas(&self) -> u32 {
        self.steps.iter().map(|s| s.replicas).max().unwrap_or(1)
    }

    /// Samples per second of a `batch` split over `replicas` GPUs on as few nodes as
    /// were measured, at the measured local batch nearest `batch / replicas`; `None`
    /// when no step time was measured for that replica count.
    fn measured_rate(&self, replicas: u32, batch: f64) -> Option<f64> {
        let with_r: Vec<&StepTime> = self
            .steps
            .iter()
            .filter(|s| s.replicas == replicas)
            .collect();
        let fewest = with_r.iter().map(|s| s.nodes).min()?;
        let local = batch / replicas as f64;
        with_r
            .into_iter()
            .filter(|s| s.nodes == fewest)
            .min_by(|a, b| {
                (a.local_bsz - local)
                    .abs()
                    .total_cmp(&(b.local_bsz - local).abs())
            })
            .map(|s| replicas as f64 * s.local_bsz / s.step_time)
    }

    /// Samples per second for 1 to [`Application::max_replicas`] replicas: measured
    /// where a step time exists, linearly interpolated between the nearest measured
    /// replica counts where none does (e.g. 17 to 19 replicas).
    fn throughput_table(&self, batch: f64) -> Vec<f64> {
        let max_r = self.max_replicas();
        let measured: Vec<(u32, f64)> = (1..=max_r)
            .filter_map(|r| self.measured_rate(r, batch).map(|rate| (r, rate)))
            .collect();
        (1..=max_r)
            .map(|r| {
                let below = measured.iter().rev().find(|(m, _)| *m <= r);
                let above = measured.iter().find(|(m, _)| *m >= r);
                match (below, above) {
                    (Some(&(r0, v0)), Some(&(r1, v1))) if r1 > r0 => {
                        v0 + (v1 - v0) * f64::from(r - r0) / f64::from(r1 - r0)
                    }
                    (Some(&(_, v)), _) | (None, Some(&(_, v))) => v,
                    (None, None) => 0.0,
                }
            })
            .collect()
    }

    /// Throughput across nodes against on one node for the same GPU count and local
    /// batch, from the placements measured both ways (e.g. `22` against `4`), averaged:
    /// the simulator's penalty for a job whose workers span nodes.
    fn comm_penalty(&self) -> f64 {
        let mut ratios = Vec::new();
        for one in self.steps.iter().filter(|s| s.nodes == 1 && s.replicas > 1) {
            let spread = self.steps.iter().filter(|s| {
                s.nodes > 1 && s.replicas == one.replicas && s.local_bsz == one.local_bsz
            });
            for s in spread {
                ratios.push(one.step_time / s.step_time);
            }
        }
        if ratios.is_empty() {
            return 1.0;
        }
        (ratios.iter().sum::<f64>() / ratios.len() as f64).clamp(0.05, 1.0)
    }
}

/// Jobs of a Pollux `workload-N.csv`, with measurements from `data` (default: the
/// folder two levels above the CSV, where the artifact keeps `<model>/`).
///
/// Each job replays its model's validation curve at the nearest measured batch size and
/// does that run's samples (iterations x batch size) of work. Its throughput with `r`
/// GPU workers is `r x local batch / step time` measured on the fewest nodes, at the
/// local batch nearest `batch / r` (`placements.csv` for 1 to 16 GPUs, `scalability.csv`
/// for 6 to 64), interpolated between measured replica counts; spanning nodes costs the
/// ratio `placements.csv` measures between spread and packed placements. Workers ask
/// for 1 GPU, 4 cores and 16 GiB; they scale between 1 and the largest measured replica
/// count. Jobs of models the artifact has no measurements for (its workloads name `bert`
/// and `imagenet`, which it does not ship) are left out with a warning.
pub fn pollux(path: &Path, data: Option<&Path>) -> Result<Vec<JobSpec>, WorkloadError> {
    let data = data.map(Path::to_path_buf).unwrap_or_else(|| {
        path.parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .to_path_buf()
    });
    let rows: Vec<PolluxJobRow> = read_rows(path, POLLUX_ORIGIN)?;
    if !data.is_dir() {
        return Err(missing(&data, POLLUX_ORIGIN));
    }
    let mut apps: HashMap<String, Option<Application>> = HashMap::new();
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut jobs = Vec::new();
    for row in rows {
        if !apps.contains_key(&row.application) {
            let dir = data.join(&row.application);
            let app = if dir.is_dir() {
                Some(Application::load(&dir)?)
            } else {
                None
            };
            apps.insert(row.application.clone(), app);
        }
        let Some(app) = &apps[&row.application] else {
            *skipped.entry(row.application.clone()).or_default() += 1;
            continue;
        };
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
        let max_r = app.max_replicas();
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
            speed: Speed::Table(app.throughput_table(batch as f64)),
            comm_penalty: app.comm_penalty(),
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
    if !skipped.is_empty() {
        let list: Vec<String> = skipped.iter().map(|(m, n)| format!("{n} {m}")).collect();
        tracing::warn!(
            workload = %path.display(),
            "left out jobs of models without measurements in {}: {}",
            data.display(),
            list.join(", ")
        );
    }
    if jobs.is_empty() {
        return Err(import_error(
            path,
            format!("no job of a model measured in {}", data.display()),
        ));
    }
    Ok(jobs)
}
