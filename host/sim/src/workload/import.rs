//! Importers of real data (the Pollux artifact's workloads, and the Philly trace) into
//! [`JobSpec`]s, plus the DRAGON Fig. 2 throughput tables. A Pollux model directory is
//! read by [`super::application`].

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use super::application::{self, ORIGIN as POLLUX_ORIGIN};
use super::error::WorkloadError;
use super::limits::{InputLimits, positive_up_to};
use super::schema::resources;
use super::table::Table;
use crate::simulator::curve::Curve;
use crate::simulator::goodput::{Goodput, Measurements, Run};
use crate::simulator::{CheckpointSpec, JobSpec, RoleSpec, Speed};
use switchyard_core::PlacementRules;

/// Images per second with 1-4 workers, DRAGON Fig. 2.
pub(crate) fn dragon_throughput(model: &str) -> Option<&'static [f64]> {
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

/// The longest a Philly job may have run, seconds (about 32 years): the trace's longest
/// is a few months.
const PHILLY_MAX_DURATION: f64 = 1e9;

/// The first `jobs` jobs of virtual cluster `cluster` (of every cluster when none) in
/// `philly.csv`, by submission time, submitted relative to the first of them.
///
/// A Philly job ran for a measured `duration`; here it does `duration` units of work at
/// one unit per second whatever its placement (the trace has no scaling data). It asks
/// for its GPUs, one core and 4 GiB per GPU; a job with more GPUs than the largest node
/// (`node_gpus`) becomes a gang of workers of `node_gpus` GPUs each. Each row is held to
/// `limits` (its duration a finite number of seconds above 0, its gang within the tasks
/// a job may have) before any job is built.
pub(crate) fn philly(
    path: &Path,
    cluster: Option<&str>,
    jobs: Option<usize>,
    node_gpus: u32,
    limits: &InputLimits,
) -> Result<Vec<JobSpec>, WorkloadError> {
    let table = Table::read(path, PHILLY_ORIGIN, limits)?;
    let [timestamp, duration, num_gpus, cluster_col] =
        table.columns(["timestamp", "duration", "num_gpus", "cluster"])?;
    let per_node = node_gpus.max(1);
    let most_tasks = limits.tasks_per_job.min(limits.replicas);
    let mut picked: Vec<(i64, f64, u32)> = Vec::new();
    for row in table.rows() {
        if cluster.is_some_and(|c| row.text(cluster_col) != c) {
            continue;
        }
        let text = row.text(timestamp);
        let time = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .map_err(|e| row.fault(timestamp, format!("`{}`: {e}", text.escape_debug())))?;
        let seconds = row.number(duration)?;
        positive_up_to(seconds, PHILLY_MAX_DURATION, "seconds")
            .map_err(|m| row.fault(duration, m))?;
        let gpus = row.whole(num_gpus, 0, u32::MAX)?.max(1);
        let workers = u64::from(gpus.div_ceil(per_node));
        if gpus > per_node && workers > most_tasks {
            return Err(row.fault(
                num_gpus,
                format!(
                    "{gpus} GPUs make a gang of {workers} workers of {per_node} GPUs (the \
                     largest node's); give at most {} GPUs ({most_tasks} workers)",
                    u64::from(per_node) * most_tasks
                ),
            ));
        }
        picked.push((time.and_utc().timestamp(), seconds, gpus));
    }
    if picked.is_empty() {
        let which = cluster.map_or("any cluster".into(), |c| format!("cluster `{c}`"));
        return Err(import_error(path, format!("no job of {which}")));
    }
    picked.sort_by_key(|(t, _, _)| *t);
    picked.truncate(jobs.unwrap_or(usize::MAX));
    let first = picked[0].0;
    // The trace says nothing of where a job may run: one shared "anywhere".
    let anywhere: Arc<PlacementRules> = Arc::default();
    Ok(picked
        .into_iter()
        .enumerate()
        .map(|(i, (t, seconds, gpus))| {
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
                }]
                .into(),
                scalable_role: role.into(),
                min_replicas: count,
                max_replicas: count,
                work: seconds,
                speed: Speed::Table(vec![1.0; count as usize].into()),
                comm_penalty: 1.0,
                curve: None,
                noise: 0.0,
                eval_every: f64::INFINITY,
                metric_rises: false,
                checkpointable: true,
                checkpoint: CheckpointSpec::default(),
                placement: Arc::clone(&anywhere),
                labels: Arc::new(BTreeMap::from([
                    ("trace".into(), "philly".into()),
                    ("gpus".into(), gpus.to_string()),
                ])),
            }
        })
        .collect())
}

/// A Pollux `validation-<batch>.csv` as a curve over the fraction of its iterations,
/// with the run's total iterations, read within the default [`InputLimits`].
pub fn replay_curve(path: &Path) -> Result<(Curve, f64), WorkloadError> {
    replay_curve_within(path, &InputLimits::default())
}

/// [`replay_curve`], the file read within `limits`.
pub(crate) fn replay_curve_within(
    path: &Path,
    limits: &InputLimits,
) -> Result<(Curve, f64), WorkloadError> {
    let table = Table::read(path, POLLUX_ORIGIN, limits)?;
    let [iteration, metric] = table.columns(["iteration", "metric"])?;
    let mut rows = Vec::with_capacity(table.len());
    for row in table.rows() {
        rows.push((row.number(iteration)?, row.number(metric)?));
    }
    let total = rows
        .last()
        .map(|r| r.0)
        .filter(|t| *t > 0.0)
        .ok_or_else(|| table.fault("no rows, or no iteration above 0"))?;
    let mut points = vec![(0.0, rows[0].1)];
    points.extend(rows.iter().map(|&(it, m)| (it / total, m)));
    Ok((Curve::Replay { points }, total))
}

/// The validation metric of `run` over the fraction of a job's progress, up to the end
/// of its last epoch: what the job reports as it trains.
fn progress_curve(run: &Run, epochs: usize) -> Curve {
    let n = epochs.min(run.progress.len()).max(1);
    let total = run.progress[n - 1];
    let mut points = vec![(0.0, run.metric[0])];
    points.extend((0..n).map(|e| (run.progress[e] / total, run.metric[e])));
    Curve::Replay { points }
}

/// Jobs of a Pollux `workload-N.csv`, with the model directories under `data` (default:
/// the folder two levels above the CSV, where the artifact keeps `<model>/`).
///
/// Each job trains its model with the row's batch size on the row's number of GPU
/// workers under the measured job model ([`Goodput`]): progress per second from the step
/// times measured at its actual placement, with gradient accumulation and statistical
/// efficiency, until the end of the model's last epoch. It reports the validation
/// metric of the run nearest its batch size. Workers ask for 1 GPU, 4 cores and
/// 16 GiB; they scale between 1 and the largest measured replica count. Jobs of models
/// without a directory under `data` (the artifact's workloads name `bert` and
/// `imagenet`, whose measurements it does not publish) are left out with a warning.
pub(crate) fn pollux(
    path: &Path,
    data: Option<&Path>,
    limits: &InputLimits,
) -> Result<Vec<JobSpec>, WorkloadError> {
    let data = data.map(Path::to_path_buf).unwrap_or_else(|| {
        path.parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .to_path_buf()
    });
    let table = Table::read(path, POLLUX_ORIGIN, limits)?;
    if !data.is_dir() {
        return Err(missing(&data, POLLUX_ORIGIN));
    }
    let [name, time, application, replicas_col, batch_col] =
        table.columns(["name", "time", "application", "num_replicas", "batch_size"])?;
    let mut models: HashMap<String, Option<Arc<Measurements>>> = HashMap::new();
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut jobs = Vec::new();
    for row in table.rows() {
        let model_name = row.text(application);
        if !models.contains_key(model_name) {
            let dir = data.join(model_name);
            let model = if dir.is_dir() && !model_name.is_empty() {
                Some(Arc::new(application::load_within(&dir, limits)?))
            } else {
                None
            };
            models.insert(model_name.to_string(), model);
        }
        let Some(model) = &models[model_name] else {
            *skipped.entry(model_name.to_string()).or_default() += 1;
            continue;
        };
        let id = row.text(name).to_string();
        limits.check_name(&id).map_err(|m| row.fault(name, m))?;
        let submit_time = row.number_where(time, "a time >= 0 seconds", |t| t >= 0.0)?;
        let most = u32::try_from(limits.replicas.min(limits.tasks_per_job)).unwrap_or(u32::MAX);
        let replicas = row.whole(replicas_col, 1, most)?;
        let batch_size = row.whole(batch_col, 1, u32::MAX)?;
        let runs = model.runs();
        let smallest = runs[0].batch_size;
        if batch_size < smallest {
            return Err(row.fault(
                batch_col,
                format!(
                    "job `{id}`: {batch_size} is below the smallest batch size {} was measured \
                     at ({smallest}); its statistical efficiency would be a guess",
                    model.name()
                ),
            ));
        }
        let nearest = runs
            .iter()
            .min_by_key(|r| r.batch_size.abs_diff(batch_size))
            .expect("a model has at least one run");
        let limits = model.limits();
        let work = model.total_progress();
        jobs.push(JobSpec {
            id,
            submit_time,
            priority: 0,
            utility: 1.0,
            roles: vec![RoleSpec {
                name: "worker".into(),
                count: replicas,
                requests: resources(4.0, 16.0, 1),
                max_cores: 4.0,
                create_after: 0.0,
            }]
            .into(),
            scalable_role: "worker".into(),
            min_replicas: 1,
            max_replicas: model.max_measured_replicas().max(replicas),
            work,
            speed: Speed::Goodput(Goodput {
                model: Arc::clone(model),
                batch_size,
            }),
            // The measured step times already cost what crossing nodes costs.
            comm_penalty: 1.0,
            curve: Some(Arc::new(progress_curve(nearest, limits.max_epochs))),
            noise: 0.0,
            eval_every: work / 20.0,
            metric_rises: metric_rises(runs),
            checkpointable: true,
            checkpoint: CheckpointSpec::default(),
            labels: Arc::new(BTreeMap::from([
                ("model".into(), model_name.to_string()),
                ("trace".into(), "pollux".into()),
            ])),
            placement: Arc::default(),
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
        return Err(table.fault(format!("no job of a model measured in {}", data.display())));
    }
    Ok(jobs)
}

/// The metric improves by rising when the smallest batch's run ends above where it
/// started (accuracy, hit rate), as the artifact decides it.
fn metric_rises(runs: &[Run]) -> bool {
    runs.first()
        .and_then(|r| Some((r.metric.first()?, r.metric.last()?)))
        .is_some_and(|(first, last)| first < last)
}
