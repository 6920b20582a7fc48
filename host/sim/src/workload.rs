//! Workload files: the YAML schema (documented in `docs/workloads.md`), reading it with
//! errors that name the file, line and field, and resolving it into a [`Scenario`] the
//! simulator runs. Generated arrivals draw from a seeded PCG generator so the same file
//! and seed always give the same scenario. Importers of real traces live in
//! [`import`]. This module decides nothing about scheduling.
//!
//! Every value is checked before it is used, and a workload's declared size (its node
//! groups' counts, each entry's count times its template's tasks, each trace's rows)
//! against [`InputLimits`] before anything is built: a refusal names the field, the
//! value and what is accepted.

mod application;
mod error;
mod import;
mod limits;
mod schema;
mod table;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use crate::simulator::curve::Curve;
use crate::simulator::{Faults, JobSpec, NodeSpec, RoleSpec, Scenario, SimConfig, Speed};
pub use application::load_application;
pub use error::WorkloadError;
pub use import::replay_curve;
pub use limits::InputLimits;
pub(crate) use limits::{non_negative, positive, positive_up_to};
pub(crate) use schema::{Arrival, resources};
pub use schema::{
    ClusterFile, CurveFile, CurveShape, FaultsFile, ImportFile, JobEntry, JobTemplate, NodeGroup,
    PhillyImport, PolluxImport, ReplayedCurveFile, RoleFile, ScaleFile, SimulatorFile,
    WorkloadFile,
};
use switchyard_core::PlacementRules;

/// The most CPU cores a node or a task may have.
const MAX_CORES: f64 = 1e6;
/// The most memory a node or a task may have, GiB.
const MAX_MEMORY_GIB: f64 = 1e9;

/// A parsed workload file and where it came from (imports are relative to it).
#[derive(Clone, Debug)]
pub struct Workload {
    /// The file.
    pub path: PathBuf,
    /// Its contents.
    pub file: WorkloadFile,
    /// What it may declare.
    limits: InputLimits,
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

impl Workload {
    /// Reads and checks the schema of the file at `path`, within the default
    /// [`InputLimits`].
    pub fn load(path: &Path) -> Result<Self, WorkloadError> {
        Self::load_with(path, InputLimits::default())
    }

    /// Reads and checks the schema of the file at `path`, within `limits`: a regular
    /// file of at most `limits.yaml_bytes`, nested at most `limits.yaml_depth` levels.
    pub fn load_with(path: &Path, limits: InputLimits) -> Result<Self, WorkloadError> {
        let text = crate::yaml::read_text(path, &limits).map_err(|source| WorkloadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_with(&text, path, limits)
    }

    /// Parses `text` as if read from `path`, within the default [`InputLimits`].
    pub fn parse(text: &str, path: &Path) -> Result<Self, WorkloadError> {
        Self::parse_with(text, path, InputLimits::default())
    }

    /// Parses `text` as if read from `path`, within `limits`: at most
    /// `limits.yaml_bytes` bytes, nested at most `limits.yaml_depth` levels.
    pub fn parse_with(text: &str, path: &Path, limits: InputLimits) -> Result<Self, WorkloadError> {
        if text.len() as u64 > limits.yaml_bytes {
            return Err(WorkloadError::Read {
                path: path.to_path_buf(),
                source: crate::yaml::too_large(limits.yaml_bytes),
            });
        }
        let file: WorkloadFile = crate::yaml::from_str(text, limits.yaml_depth)
            .map_err(|e| WorkloadError::parse(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            limits,
        })
    }

    /// What it may declare.
    pub fn limits(&self) -> &InputLimits {
        &self.limits
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
    /// arrivals from `seed`. The declared size is checked against the limits first.
    pub fn scenario(&self, seed: u64) -> Result<Scenario, WorkloadError> {
        let nodes = self.nodes()?;
        let config = self.config(seed)?;
        let f = &self.file;
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
            let count = u64::from(entry.count);
            declared
                .add(count, count.saturating_mul(tasks), &self.limits)
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
                    &self.limits,
                )?;
                self.declare_imported(&mut declared, &jobs, "import.philly")?;
                imported.extend(jobs);
            }
            if let Some(pollux) = &import.pollux {
                let data = pollux.data.as_ref().map(|d| base.join(d));
                let jobs = import::pollux(&base.join(&pollux.path), data.as_deref(), &self.limits)?;
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
                    None => spec.insert(self.job(&entry.template, template, String::new(), 0.0)?),
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
            path: self.path.clone(),
            field,
            message,
        }
    }

    /// The nodes of the cluster's groups, their count, names and sizes checked before
    /// any is built; names unique across groups.
    fn nodes(&self) -> Result<Vec<NodeSpec>, WorkloadError> {
        let limits = &self.limits;
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
            .add(jobs.len() as u64, tasks, &self.limits)
            .map_err(|m| self.invalid(field.into(), m))
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
        // A name at fault is not repeated in the field: it is in the message, quoted.
        self.check_template(name, t).map_err(|(f, m)| {
            let at = if f.is_empty() {
                "templates".into()
            } else {
                field(&f)
            };
            invalid(at, m)
        })?;
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
        if u64::from(max) > self.limits.replicas {
            return Err(invalid(
                field("scale.max"),
                format!("got {max}; give at most {} replicas", self.limits.replicas),
            ));
        }
        let speed = match (&t.throughput, &t.model, t.speed) {
            (Some(table), None, None) => Speed::Table(table.as_slice().into()),
            (None, Some(model), None) => Speed::Table(
                import::dragon_throughput(model)
                    .ok_or_else(|| {
                        invalid(
                            field("model"),
                            format!(
                                "unknown model `{}` (known: inceptionv3, resnet50, alexnet)",
                                model.escape_debug()
                            ),
                        )
                    })?
                    .into(),
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
                let (curve, _) =
                    import::replay_curve_within(&base.join(&replay.path), &self.limits)?;
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
            labels: Arc::new(gang_labels(&t.roles, &t.labels)),
            placement: Arc::new(PlacementRules {
                node_selector: t.node_selector.clone(),
                tolerations: t.tolerations.clone(),
                required_node_affinity: t.required_node_affinity.clone(),
            }),
        })
    }
}

impl Workload {
    /// Checks a template's numbers, names and sizes: the field at fault (below the
    /// template) and what is wrong.
    fn check_template(&self, name: &str, t: &JobTemplate) -> Result<(), (String, String)> {
        let limits = &self.limits;
        let at = |f: &str| f.to_string();
        limits.check_name(name).map_err(|m| (String::new(), m))?;
        positive(t.work, "units of work").map_err(|m| (at("work"), m))?;
        if let Some(speed) = t.speed {
            positive(speed, "units of work per second on one core")
                .map_err(|m| (at("speed"), m))?;
        }
        if !(0.0..=1.0).contains(&t.serial_fraction) {
            return Err((
                at("serial_fraction"),
                format!("got {}; give a share from 0 to 1", t.serial_fraction),
            ));
        }
        if let Some(table) = &t.throughput {
            if table.is_empty() || table.len() as u64 > limits.replicas {
                return Err((
                    at("throughput"),
                    format!(
                        "{} entries; give one per replica count, 1 to {}",
                        table.len(),
                        limits.replicas
                    ),
                ));
            }
            for (i, &rate) in table.iter().enumerate() {
                positive(rate, "units of work per second")
                    .map_err(|m| (format!("throughput[{i}]"), m))?;
            }
        }
        if t.roles.is_empty() {
            positive_up_to(t.cpus, MAX_CORES, "cores").map_err(|m| (at("cpus"), m))?;
            positive_up_to(t.memory_gib, MAX_MEMORY_GIB, "GiB")
                .map_err(|m| (at("memory_gib"), m))?;
        }
        if let Some(cores) = t.max_cores {
            positive_up_to(cores, MAX_CORES, "cores").map_err(|m| (at("max_cores"), m))?;
        }
        let mut role_names = HashSet::new();
        for (i, r) in t.roles.iter().enumerate() {
            let role = |f: &str| format!("roles[{i}].{f}");
            limits.check_name(&r.name).map_err(|m| (role("name"), m))?;
            if !role_names.insert(r.name.as_str()) {
                return Err((
                    role("name"),
                    format!(
                        "a second role `{}`; role names must be unique",
                        r.name.escape_debug()
                    ),
                ));
            }
            positive_up_to(r.cpus, MAX_CORES, "cores").map_err(|m| (role("cpus"), m))?;
            positive_up_to(r.memory_gib, MAX_MEMORY_GIB, "GiB")
                .map_err(|m| (role("memory_gib"), m))?;
            if let Some(cores) = r.max_cores {
                positive_up_to(cores, MAX_CORES, "cores").map_err(|m| (role("max_cores"), m))?;
            }
            non_negative(r.create_after, "seconds").map_err(|m| (role("create_after"), m))?;
        }
        non_negative(t.noise, "(a share of the value)").map_err(|m| (at("noise"), m))?;
        if let Some(every) = t.eval_every {
            positive(every, "units of work").map_err(|m| (at("eval_every"), m))?;
        }
        positive(t.comm_penalty, "(a throughput multiplier)")
            .map_err(|m| (at("comm_penalty"), m))?;
        if !t.utility.is_finite() {
            return Err((
                at("utility"),
                format!("got {}; give a finite number", t.utility),
            ));
        }
        limits.check_labels("labels", t.labels.iter())?;
        limits.check_labels("node_selector", t.node_selector.iter())
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
