//! The flags of the bounds on what a workload or a trace may ask for (`InputLimits`),
//! one set flattened into every command that reads workloads. It turns flags into the
//! library's limits; what each bound refuses is the simulator crate's business.

use switchyard_sim::InputLimits;

use super::size::parse_size;

/// Bounds on a workload and the traces it imports (docs/security.md lists each with
/// its default and its test); raise one to read a larger input on purpose.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Input limits")]
pub(crate) struct InputLimitArgs {
    /// Jobs in one scenario (every entry's count and every imported trace row).
    #[arg(long, default_value_t = InputLimits::default().jobs, value_name = "N")]
    pub max_jobs: u64,
    /// Nodes in one cluster.
    #[arg(long, default_value_t = InputLimits::default().nodes, value_name = "N")]
    pub max_nodes: u64,
    /// Tasks of all jobs together.
    #[arg(long, default_value_t = InputLimits::default().tasks, value_name = "N")]
    pub max_tasks: u64,
    /// Tasks of one job.
    #[arg(long, default_value_t = InputLimits::default().tasks_per_job, value_name = "N")]
    pub max_tasks_per_job: u64,
    /// Replicas of a job's scalable role.
    #[arg(long, default_value_t = InputLimits::default().replicas, value_name = "N")]
    pub max_replicas: u64,
    /// Bytes of a name (node, job, template, role, label).
    #[arg(long, default_value_t = InputLimits::default().name_bytes, value_name = "BYTES")]
    pub max_name_bytes: usize,
    /// Labels of one node group or template.
    #[arg(long, default_value_t = InputLimits::default().labels, value_name = "N")]
    pub max_labels: usize,
    /// Nesting of a YAML file's mappings and sequences.
    #[arg(long, default_value_t = InputLimits::default().yaml_depth, value_name = "LEVELS")]
    pub max_yaml_depth: usize,
    /// Size of a YAML file: bytes, or with a unit (64MiB).
    #[arg(long, default_value_t = InputLimits::default().yaml_bytes, value_name = "SIZE", value_parser = parse_size)]
    pub max_yaml_bytes: u64,
    /// Rows of one imported trace or measurement file.
    #[arg(long, default_value_t = InputLimits::default().trace_rows, value_name = "N")]
    pub max_trace_rows: u64,
    /// Size of one imported trace or measurement file: bytes, or with a unit (256MiB).
    #[arg(long, default_value_t = InputLimits::default().trace_bytes, value_name = "SIZE", value_parser = parse_size)]
    pub max_trace_bytes: u64,
}

impl InputLimitArgs {
    /// The limits these flags give.
    pub(crate) fn limits(&self) -> InputLimits {
        InputLimits {
            jobs: self.max_jobs,
            nodes: self.max_nodes,
            tasks: self.max_tasks,
            tasks_per_job: self.max_tasks_per_job,
            replicas: self.max_replicas,
            name_bytes: self.max_name_bytes,
            labels: self.max_labels,
            yaml_depth: self.max_yaml_depth,
            yaml_bytes: self.max_yaml_bytes,
            trace_rows: self.max_trace_rows,
            trace_bytes: self.max_trace_bytes,
        }
    }
}

/// The flags that give `limits` to another run of the command (a sweep's pods), those
/// at their default left out.
pub(crate) fn limit_flags(limits: &InputLimits) -> Vec<String> {
    let default = InputLimits::default();
    let flags: [(&str, u64, u64); 11] = [
        ("--max-jobs", limits.jobs, default.jobs),
        ("--max-nodes", limits.nodes, default.nodes),
        ("--max-tasks", limits.tasks, default.tasks),
        (
            "--max-tasks-per-job",
            limits.tasks_per_job,
            default.tasks_per_job,
        ),
        ("--max-replicas", limits.replicas, default.replicas),
        (
            "--max-name-bytes",
            limits.name_bytes as u64,
            default.name_bytes as u64,
        ),
        ("--max-labels", limits.labels as u64, default.labels as u64),
        (
            "--max-yaml-depth",
            limits.yaml_depth as u64,
            default.yaml_depth as u64,
        ),
        ("--max-yaml-bytes", limits.yaml_bytes, default.yaml_bytes),
        ("--max-trace-rows", limits.trace_rows, default.trace_rows),
        ("--max-trace-bytes", limits.trace_bytes, default.trace_bytes),
    ];
    flags
        .into_iter()
        .filter(|(_, value, default)| value != default)
        .flat_map(|(flag, value, _)| [flag.to_string(), value.to_string()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        limits: InputLimitArgs,
    }

    #[test]
    fn the_flags_of_limits_give_the_same_limits_back() {
        let limits = InputLimits {
            jobs: 1,
            nodes: 2,
            tasks: 3,
            tasks_per_job: 4,
            replicas: 5,
            name_bytes: 6,
            labels: 7,
            yaml_depth: 8,
            yaml_bytes: 9,
            trace_rows: 10,
            trace_bytes: 11,
        };
        let flags = limit_flags(&limits);
        assert_eq!(flags.len(), 22, "{flags:?}");
        let parsed = Flags::try_parse_from(std::iter::once("x".to_string()).chain(flags)).unwrap();
        assert_eq!(parsed.limits.limits(), limits);
        assert!(limit_flags(&InputLimits::default()).is_empty());
    }
}
