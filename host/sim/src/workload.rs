//! Workload files: the YAML schema (documented in `docs/workloads.md`), reading it with
//! errors that name the file, line and field, and resolving it into a [`Scenario`] the
//! simulator runs. Generated arrivals draw from a seeded PCG generator so the same file
//! and seed always give the same scenario. Importers of real traces live in
//! [`import`]. This module decides nothing about scheduling.

mod application;
mod error;
mod import;
mod schema;
mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use crate::simulator::curve::Curve;
use crate::simulator::{Faults, JobSpec, NodeSpec, RoleSpec, Scenario, SimConfig, Speed};
pub use application::load_application;
pub use error::WorkloadError;
pub use import::replay_curve;
pub(crate) use schema::{Arrival, resources};
pub use schema::{
    ClusterFile, CurveFile, CurveShape, FaultsFile, ImportFile, JobEntry, JobTemplate, NodeGroup,
    PhillyImport, PolluxImport, ReplayedCurveFile, RoleFile, ScaleFile, SimulatorFile,
    WorkloadFile,
};
use switchyard_core::PlacementRules;

/// A parsed workload file and where it came from (imports are relative to it).
#[derive(Clone, Debug)]
pub struct Workload {
    /// The file.
    pub path: PathBuf,
    /// Its contents.
    pub file: WorkloadFile,
}

impl Workload {
    /// Reads and checks the schema of the file at `path`.
    pub fn load(path: &Path) -> Result<Self, WorkloadError> {
        let text = std::fs::read_to_string(path).map_err(|source| WorkloadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses `text` as if read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, WorkloadError> {
        let file: WorkloadFile = crate::yaml::from_str(text).map_err(|e| WorkloadError::Parse {
            path: path.to_path_buf(),
            line: e.line,
            column: e.column,
            field: e.field,
            message: e.message,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The seed the file asks for.
    pub fn seed(&self) -> u64 {
        self.file.seed
    }

    /// The policies `simulate` compares when none is named, and why those.
    ///
    /// An imported trace (Philly, Pollux) is GPU training jobs with no loss curve a CPU
    /// policy could read: SpeCon, FlowCon and the even spread have nothing to act on
    /// there, so it gets the GPU schedulers beside kube-scheduler's default. A file of
    /// its own gets the baselines every workload can be compared on.
    pub fn default_policies(&self) -> (&'static [&'static str], &'static str) {
        match &self.file.import {
            Some(_) => (
                &["default", "gang", "tiresias"],
                "an imported trace of GPU jobs: kube-scheduler's default, all-or-nothing \
                 gangs and Tiresias (SpeCon and FlowCon act on CPU jobs' loss curves, which \
                 a trace lacks)",
            ),
            None => (
                &["default", "even", "gang"],
                "the baselines: kube-scheduler's default, the even spread and gangs",
            ),
        }
    }

    /// Resolves templates, arrivals and imports into a scenario, drawing generated
    /// arrivals from `seed`.
    pub fn scenario(&self, seed: u64) -> Result<Scenario, WorkloadError> {
        let invalid = |field: String, message: String| WorkloadError::Invalid {
            path: self.path.clone(),
            field,
            message,
        };
        let f = &self.file;
        let mut nodes = Vec::new();
        for (i, group) in f.cluster.nodes.iter().enumerate() {
            if group.count == 0 {
                return Err(invalid(
                    format!("cluster.nodes[{i}].count"),
                    "must be at least 1".into(),
                ));
            }
            for k in 0..group.count {
                let name = if group.count == 1 {
                    group.name.clone()
                } else {
                    format!("{}-{k}", group.name)
                };
                nodes.push(NodeSpec {
                    name,
                    allocatable: resources(group.cpus, group.memory_gib, group.gpus),
                    labels: group.labels.clone(),
                    taints: group.taints.clone(),
                });
            }
        }
        if nodes.is_empty() {
            return Err(invalid(
                "cluster.nodes".into(),
                "the cluster needs at least one node".into(),
            ));
        }
        let sim = &f.simulator;
        if !(sim.interference.is_finite() && sim.interference >= 0.0) {
            return Err(invalid(
                "simulator.interference".into(),
                "must be a finite number >= 0 (0 = ideal processor sharing)".into(),
            ));
        }
        for (field, value) in [
            ("migration_cost", sim.migration_cost),
            ("rescale_cost", sim.rescale_cost),
            ("checkpoint_cost", sim.checkpoint_cost),
            ("restore_cost", sim.restore_cost),
            ("max_time", sim.max_time),
            ("start_delay", sim.start_delay),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(invalid(
                    format!("simulator.{field}"),
                    format!("must be a finite number of seconds >= 0, got {value}"),
                ));
            }
        }
        let faults = Faults {
            place: sim.faults.place,
            migrate: sim.faults.migrate,
            set_cpu_weight: sim.faults.set_cpu_weight,
            scale: sim.faults.scale,
            preempt: sim.faults.preempt,
        };
        for (name, rate) in faults.named() {
            if !(0.0..=1.0).contains(&rate) {
                return Err(invalid(
                    format!("simulator.faults.{name}"),
                    format!(
                        "must be a share of the {name} actions that fail, between 0 and 1 (0.2 = one in five), got {rate}"
                    ),
                ));
            }
        }
        let config = SimConfig {
            faults,
            migration_cost: sim.migration_cost,
            rescale_cost: sim.rescale_cost,
            checkpoint_cost: sim.checkpoint_cost,
            restore_cost: sim.restore_cost,
            max_time: sim.max_time,
            seed,
            interference: sim.interference,
            start_delay: sim.start_delay,
        };
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut jobs = Vec::new();
        for (i, entry) in f.jobs.iter().enumerate() {
            let at = format!("jobs[{i}]");
            let template = f.templates.get(&entry.template).ok_or_else(|| {
                let known: Vec<&str> = f.templates.keys().map(String::as_str).collect();
                invalid(
                    format!("{at}.template"),
                    format!(
                        "no template `{}` (templates: {})",
                        entry.template,
                        known.join(", ")
                    ),
                )
            })?;
            let times = arrival_times(&entry.arrival(), entry.count, &mut rng)
                .map_err(|m| invalid(at.clone(), m))?;
            let prefix = entry.id.clone().unwrap_or_else(|| entry.template.clone());
            // One spec per entry, its jobs copies of it: they share its roles, curve and
            // placement rules instead of holding one of each (a scenario of 50,000
            // jobs keeps them all for its whole run).
            let mut spec = None;
            for time in times {
                let id = if entry.count == 1 && entry.id.is_some() {
                    prefix.clone()
                } else {
                    format!("{prefix}-{}", jobs.len())
                };
                let spec = match &spec {
                    Some(spec) => spec,
                    None => spec.insert(self.job(&entry.template, template, String::new(), 0.0)?),
                };
                jobs.push(JobSpec {
                    id,
                    submit_time: time,
                    ..spec.clone()
                });
            }
        }
        if let Some(import) = &f.import {
            let base = self.path.parent().unwrap_or(Path::new("."));
            let node_gpus = nodes.iter().map(|n| n.allocatable.gpus).max().unwrap_or(0);
            if let Some(philly) = &import.philly {
                jobs.extend(import::philly(
                    &base.join(&philly.path),
                    philly.cluster.as_deref(),
                    philly.jobs,
                    node_gpus,
                )?);
            }
            if let Some(pollux) = &import.pollux {
                let data = pollux.data.as_ref().map(|d| base.join(d));
                jobs.extend(import::pollux(&base.join(&pollux.path), data.as_deref())?);
            }
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = jobs.iter().find(|j| !seen.insert(j.id.clone())) {
            return Err(invalid(
                "jobs".into(),
                format!("two jobs are called `{}`", dup.id),
            ));
        }
        Ok(Scenario {
            nodes,
            jobs,
            config,
        })
    }

    fn job(
        &self,
        name: &str,
        t: &JobTemplate,
        id: String,
        submit_time: f64,
    ) -> Result<JobSpec, WorkloadError> {
        let field = |f: &str| format!("templates.{name}.{f}");
        let invalid = |field: String, message: String| WorkloadError::Invalid {
            path: self.path.clone(),
            field,
            message,
        };
        if !(t.work.is_finite() && t.work > 0.0) {
            return Err(invalid(
                field("work"),
                "must be a positive amount of work".into(),
            ));
        }
        let roles: Arc<[RoleSpec]> = if t.roles.is_empty() {
            vec![RoleSpec {
                name: "main".into(),
                count: 1,
                requests: resources(t.cpus, t.memory_gib, t.gpus),
                max_cores: t.max_cores.unwrap_or(t.cpus),
                create_after: 0.0,
            }]
            .into()
        } else {
            t.roles
                .iter()
                .map(|r| RoleSpec {
                    name: r.name.clone(),
                    count: r.count,
                    requests: resources(r.cpus, r.memory_gib, r.gpus),
                    max_cores: r.max_cores.or(t.max_cores).unwrap_or(r.cpus),
                    create_after: r.create_after,
                })
                .collect()
        };
        if let Some((i, r)) = t
            .roles
            .iter()
            .enumerate()
            .find(|(_, r)| !(r.create_after.is_finite() && r.create_after >= 0.0))
        {
            return Err(invalid(
                field(&format!("roles[{i}].create_after")),
                format!(
                    "must be a finite number of seconds >= 0, got {}",
                    r.create_after
                ),
            ));
        }
        let scalable = t.scale.as_ref().map(|s| s.role.clone()).unwrap_or_else(|| {
            roles
                .iter()
                .find(|r| r.name == "worker")
                .unwrap_or(&roles[0])
                .name
                .clone()
        });
        let Some(scalable_role) = roles.iter().find(|r| r.name == scalable) else {
            return Err(invalid(
                field("scale.role"),
                format!("no role `{scalable}` in the template"),
            ));
        };
        let count = scalable_role.count;
        let (min, max) = t.scale.as_ref().map_or((count, count), |s| {
            (s.min.unwrap_or(count), s.max.unwrap_or(count))
        });
        if !(min <= count && count <= max) {
            return Err(invalid(
                field("scale"),
                format!("need min <= {count} (the role's count) <= max, got {min}..{max}"),
            ));
        }
        let speed = match (&t.throughput, &t.model, t.speed) {
            (Some(table), None, None) => Speed::Table(table.clone()),
            (None, Some(model), None) => Speed::Table(
                import::dragon_throughput(model)
                    .ok_or_else(|| {
                        invalid(
                            field("model"),
                            format!(
                                "unknown model `{model}` (known: inceptionv3, resnet50, alexnet)"
                            ),
                        )
                    })?
                    .to_vec(),
            ),
            (None, None, speed) => Speed::Cpu {
                per_core: speed.unwrap_or(1.0),
                serial_fraction: t.serial_fraction,
            },
            _ => {
                return Err(invalid(
                    field("speed"),
                    "give one of speed, throughput or model".into(),
                ));
            }
        };
        let (curve, metric_rises) = match (&t.curve, &t.replay) {
            (Some(CurveFile::Preset(c)), None) if c == "none" => (None, false),
            (Some(CurveFile::Preset(c)), None) => (
                Some(Arc::new(Curve::preset(c).ok_or_else(|| {
                    invalid(
                        field("curve"),
                        format!(
                            "unknown curve `{c}` (known: vae, birnn, gru, none, or \
                             {{first, last, share_at_20}})"
                        ),
                    )
                })?)),
                false,
            ),
            (Some(CurveFile::Shape(shape)), None) => {
                let CurveShape {
                    first,
                    last,
                    share_at_20,
                } = *shape;
                if !(first.is_finite() && last.is_finite()) {
                    return Err(invalid(
                        field("curve"),
                        format!("first and last must be finite numbers, got {first} and {last}"),
                    ));
                }
                if !(0.2..1.0).contains(&share_at_20) {
                    return Err(invalid(
                        field("curve.share_at_20"),
                        format!(
                            "must be in [0.2, 1) (the share of the change done by 20% of \
                             the work; 0.2 is a straight line), got {share_at_20}"
                        ),
                    ));
                }
                (
                    Some(Arc::new(Curve::parametric(first, last, share_at_20))),
                    last > first,
                )
            }
            (None, Some(replay)) => {
                let base = self.path.parent().unwrap_or(Path::new("."));
                let (curve, _) = import::replay_curve(&base.join(&replay.path))?;
                (Some(Arc::new(curve)), replay.metric_rises)
            }
            (None, None) => (None, false),
            _ => {
                return Err(invalid(
                    field("curve"),
                    "give either curve or replay, not both".into(),
                ));
            }
        };
        Ok(JobSpec {
            id,
            submit_time,
            priority: t.priority,
            utility: t.utility,
            scalable_role: scalable.clone(),
            min_replicas: min,
            max_replicas: max,
            roles,
            work: t.work,
            speed,
            comm_penalty: t.comm_penalty,
            curve,
            noise: t.noise,
            eval_every: t.eval_every.unwrap_or(t.work / 20.0),
            metric_rises,
            checkpointable: t.checkpointable,
            labels: gang_labels(&t.roles, &t.labels),
            placement: Arc::new(PlacementRules {
                node_selector: t.node_selector.clone(),
                tolerations: t.tolerations.clone(),
                required_node_affinity: t.required_node_affinity.clone(),
            }),
        })
    }
}

/// A distributed job's submission labels: the template's, plus `roles` (its role names,
/// comma-separated, in order) and `tasks` (how many tasks it has in all) unless the
/// template sets them. A gang scheduler reads them to know the whole gang before every
/// pod exists, as Volcano's `minMember` or a TFJob's replica specs tell it.
fn gang_labels(roles: &[RoleFile], labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = labels.clone();
    if !roles.is_empty() {
        let names: Vec<&str> = roles.iter().map(|r| r.name.as_str()).collect();
        out.entry("roles".into()).or_insert_with(|| names.join(","));
        let tasks: u32 = roles.iter().map(|r| r.count).sum();
        out.entry("tasks".into())
            .or_insert_with(|| tasks.to_string());
    }
    out
}

fn arrival_times(
    arrival: &Result<Arrival, String>,
    count: u32,
    rng: &mut Pcg64,
) -> Result<Vec<f64>, String> {
    let n = count as usize;
    let arrival = arrival.clone()?;
    let (Arrival::At(start)
    | Arrival::Every { start, .. }
    | Arrival::Uniform { start, .. }
    | Arrival::Poisson { start, .. }) = arrival;
    if !(start.is_finite() && start >= 0.0) {
        return Err(format!(
            "arrivals start at a time >= 0 seconds, got {start}"
        ));
    }
    let span = match arrival {
        Arrival::Every { interval, .. } => Some(("every", interval)),
        Arrival::Uniform { within, .. } => Some(("uniform", within)),
        _ => None,
    };
    if let Some((key, value)) = span
        && !(value.is_finite() && value >= 0.0)
    {
        return Err(format!(
            "`{key}` must be a finite number of seconds >= 0, got {value}"
        ));
    }
    Ok(match arrival {
        Arrival::At(t) => vec![t; n],
        Arrival::Every { start, interval } => (0..n).map(|k| start + interval * k as f64).collect(),
        Arrival::Uniform { start, within } => {
            let mut times: Vec<f64> = (0..n)
                .map(|_| start + within * rng.random::<f64>())
                .collect();
            times.sort_by(f64::total_cmp);
            times
        }
        Arrival::Poisson { start, rate } => {
            if !(rate.is_finite() && rate > 0.0) {
                return Err("poisson rate must be positive (jobs per second)".into());
            }
            let mut t = start;
            (0..n)
                .map(|_| {
                    // Exponential gaps by inversion; 1 - u is in (0, 1], so ln is finite.
                    t += -(1.0 - rng.random::<f64>()).ln() / rate;
                    t
                })
                .collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(text: &str) -> Workload {
        Workload::parse(text, Path::new("w.yaml")).unwrap()
    }

    #[test]
    fn an_imported_trace_defaults_to_the_gpu_schedulers_and_a_file_of_its_own_to_the_baselines() {
        let imported = workload(
            "cluster: {nodes: [{name: gpu, cpus: 8, memory_gib: 32, gpus: 8}]}\n\
             import: {philly: {path: philly.csv, cluster: 6214e9}}\n",
        );
        let (policies, why) = imported.default_policies();
        assert_eq!(policies, ["default", "gang", "tiresias"]);
        assert!(why.contains("imported trace"), "{why}");
        let own = workload(
            "cluster: {nodes: [{name: cpu, cpus: 8, memory_gib: 32}]}\n\
             templates: {t: {work: 10, cpus: 1, memory_gib: 1}}\n\
             jobs: [{template: t, at: 0}]\n",
        );
        assert_eq!(own.default_policies().0, ["default", "even", "gang"]);
    }
}
