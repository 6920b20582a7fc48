//! A workload's job templates resolved into job specs: the template's numbers, names and
//! sizes checked, its roles, speed, loss curve and placement rules built, and its
//! submission labels. It owns one template at a time; arrivals, ids and the workload's
//! totals are the scenario's (`resolve`), and it must not read the workload's other
//! sections.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::error::WorkloadError;
use super::import;
use super::limits::{
    InputLimits, MAX_CORES, MAX_MEMORY_GIB, non_negative, positive, positive_up_to,
};
use super::schema::{Acknowledge, CurveFile, CurveShape, JobTemplate, RoleFile, resources};
use crate::simulator::curve::Curve;
use crate::simulator::{CheckpointSpec, JobSpec, RoleSpec, Speed};
use switchyard_core::PlacementRules;

/// The job spec of template `name`, its numbers, names and sizes checked against
/// `limits`, with `id` and `submit_time`; files it replays are read relative to the
/// workload at `path`, and a refusal names the field below `templates.<name>`.
pub(super) fn job_spec(
    path: &Path,
    limits: &InputLimits,
    name: &str,
    t: &JobTemplate,
    id: String,
    submit_time: f64,
) -> Result<JobSpec, WorkloadError> {
    let field = |f: &str| format!("templates.{name}.{f}");
    let invalid = |field: String, message: String| WorkloadError::Invalid {
        path: path.to_path_buf(),
        field,
        message,
    };
    // A name at fault is not repeated in the field: it is in the message, quoted.
    check_template(limits, name, t).map_err(|(f, m)| {
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
    if u64::from(max) > limits.replicas {
        return Err(invalid(
            field("scale.max"),
            format!("got {max}; give at most {} replicas", limits.replicas),
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
            let base = path.parent().unwrap_or(Path::new("."));
            let (curve, _) = import::replay_curve_within(&base.join(&replay.path), limits)?;
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
        checkpoint: CheckpointSpec {
            cost: t.checkpoint_cost,
            grace: t.checkpoint_grace,
            acknowledged_by_api: t.acknowledge == Acknowledge::Api,
        },
        labels: Arc::new(gang_labels(&t.roles, &t.labels)),
        placement: Arc::new(PlacementRules {
            node_selector: t.node_selector.clone(),
            tolerations: t.tolerations.clone(),
            required_node_affinity: t.required_node_affinity.clone(),
        }),
    })
}

/// Checks a template's numbers, names and sizes: the field at fault (below the
/// template) and what is wrong.
fn check_template(
    limits: &InputLimits,
    name: &str,
    t: &JobTemplate,
) -> Result<(), (String, String)> {
    let at = |f: &str| f.to_string();
    limits.check_name(name).map_err(|m| (String::new(), m))?;
    positive(t.work, "units of work").map_err(|m| (at("work"), m))?;
    if let Some(speed) = t.speed {
        positive(speed, "units of work per second on one core").map_err(|m| (at("speed"), m))?;
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
        positive_up_to(t.memory_gib, MAX_MEMORY_GIB, "GiB").map_err(|m| (at("memory_gib"), m))?;
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
        positive_up_to(r.memory_gib, MAX_MEMORY_GIB, "GiB").map_err(|m| (role("memory_gib"), m))?;
        if let Some(cores) = r.max_cores {
            positive_up_to(cores, MAX_CORES, "cores").map_err(|m| (role("max_cores"), m))?;
        }
        non_negative(r.create_after, "seconds").map_err(|m| (role("create_after"), m))?;
    }
    non_negative(t.noise, "(a share of the value)").map_err(|m| (at("noise"), m))?;
    if let Some(every) = t.eval_every {
        positive(every, "units of work").map_err(|m| (at("eval_every"), m))?;
    }
    positive(t.comm_penalty, "(a throughput multiplier)").map_err(|m| (at("comm_penalty"), m))?;
    for (field, value) in [
        ("checkpoint_cost", t.checkpoint_cost),
        ("checkpoint_grace", t.checkpoint_grace),
    ] {
        if let Some(value) = value {
            non_negative(value, "seconds").map_err(|m| (at(field), m))?;
        }
    }
    if !t.utility.is_finite() {
        return Err((
            at("utility"),
            format!("got {}; give a finite number", t.utility),
        ));
    }
    limits.check_labels("labels", t.labels.iter())?;
    limits.check_labels("node_selector", t.node_selector.iter())
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
