//! A workload file resolved into the [`Scenario`] the simulator runs: the cluster's
//! nodes, the simulator's knobs, every entry's arrivals and ids, and the imported
//! traces, each value checked and the workload's declared size held to its
//! [`InputLimits`] before anything is built. Generated arrivals draw from a seeded PCG
//! generator, so the same file and seed always give the same scenario. It must not read
//! the file (the workload has) or decide anything about scheduling.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use super::error::WorkloadError;
use super::import;
use super::limits::{
    InputLimits, MAX_CORES, MAX_MEMORY_GIB, non_negative, positive, positive_up_to,
};
use super::schema::{Acknowledge, Arrival, JobEntry, JobTemplate, WorkloadFile, resources};
use super::template::job_spec;
use crate::simulator::{Faults, JobSpec, NodeSpec, Scenario, SimConfig};

/// A workload file, where it was read from (imports are relative to it) and what it may
/// declare, borrowed from the [`Workload`](super::Workload) being resolved.
pub(super) struct Resolver<'a> {
    /// Where the file was read from.
    pub(super) path: &'a Path,
    /// Its contents.
    pub(super) file: &'a WorkloadFile,
    /// What it may declare.
    pub(super) limits: &'a InputLimits,
}

/// The jobs and tasks a workload declares, counted before any is built.
#[derive(Default)]
struct Declared {
    jobs: u64,
    tasks: u64,
}

impl Declared {
    /// Adds `jobs` jobs of `tasks` tasks in all, refusing a total past `limits`.
    fn add(&mut self, jobs: u64, tasks: u64, limits: &InputLimits) -> Result<(), String> {
        let all_jobs = self.jobs.saturating_add(jobs);
        if all_jobs > limits.jobs {
            return Err(format!(
                "{jobs} jobs make {all_jobs} in the workload; give at most {} jobs in all",
                limits.jobs
            ));
        }
        let all_tasks = self.tasks.saturating_add(tasks);
        if all_tasks > limits.tasks {
            return Err(format!(
                "{jobs} jobs with {tasks} tasks make {all_tasks} tasks in the workload; give at \
                 most {} tasks in all",
                limits.tasks
            ));
        }
        self.jobs = all_jobs;
        self.tasks = all_tasks;
        Ok(())
    }
}

impl Resolver<'_> {
    /// Resolves templates, arrivals and imports into a scenario, drawing generated
    /// arrivals from `seed`. The declared size is checked against the limits first.
    pub(super) fn scenario(&self, seed: u64) -> Result<Scenario, WorkloadError> {
        let nodes = self.nodes()?;
        let config = self.config(seed)?;
        let f = self.file;
        let mut declared = Declared::default();
        let mut templates = Vec::with_capacity(f.jobs.len());
        for (i, entry) in f.jobs.iter().enumerate() {
            let at = format!("jobs[{i}]");
            let template = f.templates.get(&entry.template).ok_or_else(|| {
                let known: Vec<&str> = f.templates.keys().map(String::as_str).collect();
                self.invalid(
                    format!("{at}.template"),
                    format!(
                        "no template `{}` (templates: {})",
                        entry.template.escape_debug(),
                        known.join(", ")
                    ),
                )
            })?;
            let tasks = self.tasks_per_job(&entry.template, template)?;
            if template.acknowledge == Acknowledge::Api
                && template
                    .checkpoint_grace
                    .or(config.checkpoint_grace)
                    .is_none()
            {
                return Err(self.invalid(
                    format!("templates.{}.acknowledge", entry.template),
                    "`api` needs a grace period to time out at: give the template's \
                     `checkpoint_grace` or `simulator.checkpoint_grace`"
                        .into(),
                ));
            }
            let count = u64::from(entry.count);
            declared
                .add(count, count.saturating_mul(tasks), self.limits)
                .map_err(|m| self.invalid(format!("{at}.count"), m))?;
            if let Some(id) = &entry.id {
                self.limits
                    .check_name(id)
                    .map_err(|m| self.invalid(format!("{at}.id"), m))?;
            }
            let arrival = arrival(entry, &at).map_err(|(field, m)| self.invalid(field, m))?;
            templates.push((template, arrival));
        }
        let mut imported = Vec::new();
        if let Some(import) = &f.import {
            let base = self.path.parent().unwrap_or(Path::new("."));
            let node_gpus = nodes.iter().map(|n| n.allocatable.gpus).max().unwrap_or(0);
            if let Some(philly) = &import.philly {
                let jobs = import::philly(
                    &base.join(&philly.path),
                    philly.cluster.as_deref(),
                    philly.jobs,
                    node_gpus,
                    self.limits,
                )?;
                self.declare_imported(&mut declared, &jobs, "import.philly")?;
                imported.extend(jobs);
            }
            if let Some(pollux) = &import.pollux {
                let data = pollux.data.as_ref().map(|d| base.join(d));
                let jobs = import::pollux(&base.join(&pollux.path), data.as_deref(), self.limits)?;
                self.declare_imported(&mut declared, &jobs, "import.pollux")?;
                imported.extend(jobs);
            }
        }
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut jobs = Vec::with_capacity(declared.jobs as usize);
        for (i, (entry, (template, arrival))) in f.jobs.iter().zip(templates).enumerate() {
            let at = format!("jobs[{i}]");
            let times = arrival_times(&arrival, entry.count, &mut rng)
                .map_err(|m| self.invalid(at.clone(), m))?;
            let prefix = entry.id.clone().unwrap_or_else(|| entry.template.clone());
            // One spec per entry, its jobs copies of it: they share its roles, curve,
            // labels and placement rules instead of holding one of each (a scenario of
            // 50,000 jobs keeps them all for its whole run).
            let mut spec = None;
            for time in times {
                let id = if entry.count == 1 && entry.id.is_some() {
                    prefix.clone()
                } else {
                    format!("{prefix}-{}", jobs.len())
                };
                if id.len() > self.limits.name_bytes {
                    return Err(self.invalid(
                        format!("{at}.id"),
                        format!(
                            "the job id `{}...` it gives is {} bytes; give an id or template \
                             name that leaves ids of at most {} bytes",
                            id.chars().take(20).collect::<String>().escape_debug(),
                            id.len(),
                            self.limits.name_bytes
                        ),
                    ));
                }
                let spec = match &spec {
                    Some(spec) => spec,
                    None => spec.insert(job_spec(
                        self.path,
                        self.limits,
                        &entry.template,
                        template,
                        String::new(),
                        0.0,
                    )?),
                };
                jobs.push(JobSpec {
                    id,
                    submit_time: time,
                    ..spec.clone()
                });
            }
        }
        jobs.extend(imported);
        let mut seen = HashSet::new();
        if let Some(dup) = jobs.iter().find(|j| !seen.insert(j.id.as_str())) {
            return Err(self.invalid(
                "jobs".into(),
                format!("two jobs are called `{}`", dup.id.escape_debug()),
            ));
        }
        Ok(Scenario {
            nodes,
            jobs,
            config,
        })
    }

    fn invalid(&self, field: String, message: String) -> WorkloadError {
        WorkloadError::Invalid {
            path: self.path.to_path_buf(),
            field,
            message,
        }
    }

    /// The nodes of the cluster's groups, their count, names and sizes checked before
    /// any is built; names unique across groups.
    fn nodes(&self) -> Result<Vec<NodeSpec>, WorkloadError> {
        let limits = self.limits;
        let groups = &self.file.cluster.nodes;
        let mut total = 0u64;
        for (i, group) in groups.iter().enumerate() {
            let at = |field: &str| format!("cluster.nodes[{i}].{field}");
            if group.count == 0 {
                return Err(self.invalid(at("count"), "got 0; give at least 1".into()));
            }
            total += u64::from(group.count);
            if total > limits.nodes {
                return Err(self.invalid(
                    at("count"),
                    format!(
                        "{} nodes make {total} in the cluster; give at most {} nodes in all",
                        group.count, limits.nodes
                    ),
                ));
            }
            limits
                .check_name(&group.name)
                .map_err(|m| self.invalid(at("name"), m))?;
            positive_up_to(group.cpus, MAX_CORES, "cores")
                .map_err(|m| self.invalid(at("cpus"), m))?;
            positive_up_to(group.memory_gib, MAX_MEMORY_GIB, "GiB")
                .map_err(|m| self.invalid(at("memory_gib"), m))?;
            limits
                .check_labels(&at("labels"), group.labels.iter())
                .map_err(|(field, m)| self.invalid(field, m))?;
        }
        if total == 0 {
            return Err(self.invalid(
                "cluster.nodes".into(),
                "the cluster needs at least one node".into(),
            ));
        }
        let mut nodes = Vec::with_capacity(total as usize);
        // Which group each name came from, to name both when two groups give one name.
        let mut named: HashMap<String, usize> = HashMap::with_capacity(total as usize);
        for (i, group) in groups.iter().enumerate() {
            // The labels and taints are the group's, shared by its nodes' specs.
            for k in 0..group.count {
                let name = if group.count == 1 {
                    group.name.clone()
                } else {
                    format!("{}-{k}", group.name)
                };
                if let Some(first) = named.insert(name.clone(), i) {
                    let message = if first == i {
                        format!("gives the node `{}` twice", name.escape_debug())
                    } else {
                        format!(
                            "gives the node `{}`, which cluster.nodes[{first}] gives too; \
                             node names must be unique",
                            name.escape_debug()
                        )
                    };
                    return Err(self.invalid(format!("cluster.nodes[{i}].name"), message));
                }
                if name.len() > limits.name_bytes {
                    return Err(self.invalid(
                        format!("cluster.nodes[{i}].name"),
                        format!(
                            "gives node names of {} bytes; give at most {}",
                            name.len(),
                            limits.name_bytes
                        ),
                    ));
                }
                nodes.push(NodeSpec {
                    name,
                    allocatable: resources(group.cpus, group.memory_gib, group.gpus),
                    labels: group.labels.clone(),
                    taints: group.taints.clone(),
                });
            }
        }
        Ok(nodes)
    }

    /// The simulator's knobs, each checked.
    fn config(&self, seed: u64) -> Result<SimConfig, WorkloadError> {
        let sim = &self.file.simulator;
        non_negative(sim.interference, "(0 = ideal processor sharing)")
            .map_err(|m| self.invalid("simulator.interference".into(), m))?;
        for (field, value) in [
            ("migration_cost", sim.migration_cost),
            ("rescale_cost", sim.rescale_cost),
            ("checkpoint_cost", sim.checkpoint_cost),
            ("restore_cost", sim.restore_cost),
            ("max_time", sim.max_time),
            ("start_delay", sim.start_delay),
        ] {
            non_negative(value, "seconds")
                .map_err(|m| self.invalid(format!("simulator.{field}"), m))?;
        }
        if let Some(grace) = sim.checkpoint_grace {
            non_negative(grace, "seconds (absent: no limit)")
                .map_err(|m| self.invalid("simulator.checkpoint_grace".into(), m))?;
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
                return Err(self.invalid(
                    format!("simulator.faults.{name}"),
                    format!(
                        "must be a share of the {name} actions that fail, between 0 and 1 (0.2 = one in five), got {rate}"
                    ),
                ));
            }
        }
        Ok(SimConfig {
            faults,
            migration_cost: sim.migration_cost,
            rescale_cost: sim.rescale_cost,
            checkpoint_cost: sim.checkpoint_cost,
            checkpoint_grace: sim.checkpoint_grace,
            restore_cost: sim.restore_cost,
            max_time: sim.max_time,
            seed,
            interference: sim.interference,
            start_delay: sim.start_delay,
        })
    }

    /// The tasks a job of template `name` has at submission, within the per-job limit.
    fn tasks_per_job(&self, name: &str, t: &JobTemplate) -> Result<u64, WorkloadError> {
        if t.roles.is_empty() {
            return Ok(1);
        }
        let tasks: u64 = t.roles.iter().map(|r| u64::from(r.count)).sum();
        if tasks > self.limits.tasks_per_job {
            return Err(self.invalid(
                format!("templates.{name}.roles"),
                format!(
                    "its roles' counts make {tasks} tasks per job; give at most {}",
                    self.limits.tasks_per_job
                ),
            ));
        }
        Ok(tasks)
    }

    /// Counts imported jobs against the workload's limits (each trace's rows and each
    /// job's tasks were held to theirs while it was read).
    fn declare_imported(
        &self,
        declared: &mut Declared,
        jobs: &[JobSpec],
        field: &str,
    ) -> Result<(), WorkloadError> {
        let tasks: u64 = jobs
            .iter()
            .flat_map(|j| j.roles.iter())
            .map(|r| u64::from(r.count))
            .sum();
        declared
            .add(jobs.len() as u64, tasks, self.limits)
            .map_err(|m| self.invalid(field.into(), m))
    }
}

/// The entry's one arrival pattern, its numbers checked: the field at fault (below the
/// entry `at`) and what is wrong.
fn arrival(entry: &JobEntry, at: &str) -> Result<Arrival, (String, String)> {
    let arrival = entry.arrival().map_err(|m| (at.to_string(), m))?;
    let field = |name: &str| format!("{at}.{name}");
    let (start, start_field) = match arrival {
        Arrival::At(t) if entry.at.is_some() => (t, "at"),
        Arrival::At(start)
        | Arrival::Every { start, .. }
        | Arrival::Uniform { start, .. }
        | Arrival::Poisson { start, .. } => (start, "start"),
    };
    non_negative(start, "seconds").map_err(|m| (field(start_field), m))?;
    match arrival {
        Arrival::Every { interval, .. } => {
            non_negative(interval, "seconds").map_err(|m| (field("every"), m))?;
        }
        Arrival::Uniform { within, .. } => {
            non_negative(within, "seconds").map_err(|m| (field("uniform"), m))?;
        }
        Arrival::Poisson { rate, .. } => {
            positive(rate, "jobs per second").map_err(|m| (field("poisson"), m))?;
        }
        Arrival::At(_) => {}
    }
    Ok(arrival)
}

/// `count` arrival times of `arrival`, in order; refused when the last is past every
/// finite time (a tiny rate or a huge interval).
fn arrival_times(arrival: &Arrival, count: u32, rng: &mut Pcg64) -> Result<Vec<f64>, String> {
    let n = count as usize;
    let times: Vec<f64> = match *arrival {
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
            let mut t = start;
            (0..n)
                .map(|_| {
                    // Exponential gaps by inversion; 1 - u is in (0, 1], so ln is finite.
                    t += -(1.0 - rng.random::<f64>()).ln() / rate;
                    t
                })
                .collect()
        }
    };
    match times.last() {
        Some(last) if !last.is_finite() => Err(format!(
            "the {count} jobs would arrive past every finite time (the last at {last}); give \
             a shorter interval or a higher rate"
        )),
        _ => Ok(times),
    }
}
