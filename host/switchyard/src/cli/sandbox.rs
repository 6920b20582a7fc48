//! The sandbox flags every command that runs policies shares ([`SandboxArgs`]), and the
//! runtimes they make: the controller's, a checking one, an offline one. A leaf of the
//! command-line interface: every command names it, and it names no command.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use switchyard_core::DisruptionBudget;
use switchyard_runtime::{LogRate, ResultBudget, Runtime, RuntimeOptions, SandboxLimits};

/// Sandbox settings shared by every command that runs policies, and the limits on what
/// their decisions may do to running jobs.
#[derive(Debug, clap::Args)]
pub(crate) struct SandboxArgs {
    /// Deadline of one policy call, in milliseconds [default: 100 for the controller
    /// (`run`), 2000 for offline runs (`simulate`, `policy test`)].
    #[arg(long, global = true, value_name = "MS")]
    pub policy_deadline_ms: Option<u64>,

    /// Deadline of the first call of a kept policy instance, in milliseconds: the call
    /// that hands it the whole cluster after a start, a swap or a failure. Its cost grows
    /// with the cluster, not the round; never less than `--policy-deadline-ms`.
    #[arg(long, global = true, default_value_t = SandboxLimits::default().priming_deadline.as_millis() as u64, value_name = "MS")]
    pub policy_priming_deadline_ms: u64,

    /// Memory cap of one policy instance, in MiB.
    #[arg(long, global = true, default_value_t = 64, value_name = "MIB")]
    pub policy_memory_mib: usize,

    /// Most actions one decision may hold, counting the entries of their lists
    /// (assignments, target nodes); a bigger answer is refused and the fallback decides.
    #[arg(long, global = true, default_value_t = ResultBudget::default().actions, value_name = "N")]
    pub policy_max_actions: usize,

    /// Most labels one decision may set.
    #[arg(long, global = true, default_value_t = ResultBudget::default().labels, value_name = "N")]
    pub policy_max_labels: usize,

    /// Most bytes of strings (ids, reasons, labels) one answer may hold, in MiB.
    #[arg(long, global = true, default_value_t = ResultBudget::default().string_bytes >> 20, value_name = "MIB")]
    pub policy_max_string_mib: usize,

    /// Most log lines one policy call may write; the rest is counted in one line.
    #[arg(long, global = true, default_value_t = ResultBudget::default().log_lines, value_name = "N")]
    pub policy_log_lines: usize,

    /// Most bytes of log one policy call may write, in KiB.
    #[arg(long, global = true, default_value_t = ResultBudget::default().log_bytes >> 10, value_name = "KIB")]
    pub policy_log_kib: usize,

    /// Log lines a policy may write per minute of cluster time, over all its calls (a
    /// minute's worth may come at once); the rest is counted in one line per minute.
    #[arg(long, global = true, default_value_t = LogRate::default().lines_per_minute, value_name = "N")]
    pub policy_log_lines_per_minute: usize,

    /// KiB of log a policy may write per minute of cluster time, over all its calls.
    #[arg(long, global = true, default_value_t = LogRate::default().bytes_per_minute >> 10, value_name = "KIB")]
    pub policy_log_kib_per_minute: usize,

    /// The soonest a policy may ask to be called again, in seconds of cluster time; a
    /// shorter `next-call-after` is raised to it.
    #[arg(long, global = true, default_value_t = SandboxLimits::default().min_call_interval, value_name = "SECONDS")]
    pub min_call_interval: f64,

    /// Directory for the on-disk cache of compiled policies, so a machine compiles a
    /// component once, and of policies pulled from registries (under `oci/`) [default:
    /// the user's cache directory, e.g. ~/.cache/switchyard].
    #[arg(long, global = true, env = "SWITCHYARD_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Compile policies in memory only, every run: no on-disk cache.
    #[arg(long, global = true, env = "SWITCHYARD_NO_CACHE", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_cache: bool,

    #[command(flatten)]
    pub disruption: DisruptionArgs,
}

/// The disruption budget (docs/security.md): how often a policy may migrate, rescale or
/// preempt running jobs, in every mode.
#[derive(Debug, clap::Args)]
pub(crate) struct DisruptionArgs {
    /// The most times one job may be disrupted (migrated to another node, rescaled or
    /// preempted) within any `--disruption-interval`, so that every job keeps running
    /// between its disruptions; 0 sets no bound.
    #[arg(long, global = true, default_value_t = DisruptionBudget::default().max_per_job, value_name = "COUNT")]
    pub max_disruptions_per_job: u32,

    /// The interval disruptions are counted over, per job (`--max-disruptions-per-job`)
    /// and across the cluster (`--max-disrupted-share`), seconds of cluster time; 0
    /// counts none.
    #[arg(long, global = true, default_value_t = DisruptionBudget::default().interval, value_name = "SECONDS")]
    pub disruption_interval: f64,

    /// Seconds of cluster time a job runs after it was started, restarted, migrated,
    /// rescaled or preempted before a policy may disrupt it again; 0 (the default) sets
    /// no minimum.
    #[arg(long, global = true, default_value_t = DisruptionBudget::default().min_run_time, value_name = "SECONDS")]
    pub min_run_time: f64,

    /// The largest share of the jobs holding nodes that may be disrupted per
    /// `--disruption-interval`, across the cluster, in (0, 1], at least one job; 1 (the
    /// default) sets no cap.
    #[arg(long, global = true, default_value_t = DisruptionBudget::default().max_share, value_name = "SHARE")]
    pub max_disrupted_share: f64,

    /// No disruption budget at all: every disruption the validator accepts goes through,
    /// and nothing bounds how often a policy disrupts one job.
    #[arg(
        long,
        global = true,
        conflicts_with_all = [
            "max_disruptions_per_job",
            "disruption_interval",
            "min_run_time",
            "max_disrupted_share",
        ]
    )]
    pub no_disruption_budget: bool,
}

impl DisruptionArgs {
    /// The budget the flags set, each checked against its range.
    pub(crate) fn budget(&self) -> anyhow::Result<DisruptionBudget> {
        if self.no_disruption_budget {
            return Ok(DisruptionBudget::OFF);
        }
        DisruptionBudget::new(
            self.min_run_time,
            self.max_disruptions_per_job,
            self.max_disrupted_share,
            self.disruption_interval,
        )
        .context(
            "--min-run-time, --max-disruptions-per-job, --max-disrupted-share, --disruption-interval",
        )
    }
}

/// The controller's deadline: a round must not hold up a real cluster.
const LIVE_DEADLINE_MS: u64 = 100;

/// The deadline of offline runs. The deadline is wall-clock time, so a round close to it
/// could pass on an idle machine and fail on a busy one; offline, where nothing waits,
/// a generous deadline keeps a replay bit for bit the same whatever the load, and still
/// stops a policy that loops.
const OFFLINE_DEADLINE_MS: u64 = 2_000;

impl SandboxArgs {
    /// The sandbox of the controller: an upload answers from Winch's code until
    /// Cranelift's is ready, so a hot swap waits for the quick compile only.
    pub(crate) fn runtime(&self) -> anyhow::Result<Runtime> {
        self.runtime_with_deadline(LIVE_DEADLINE_MS, true)
    }

    /// The controller's sandbox with Cranelift only, for checking a component
    /// (`policy inspect`, `policy validate`) with the compiler its calls will run on.
    pub(crate) fn checking_runtime(&self) -> anyhow::Result<Runtime> {
        self.runtime_with_deadline(LIVE_DEADLINE_MS, false)
    }

    /// The sandbox of an offline run (`simulate`, `policy test`): thousands of calls per
    /// load, so every call runs Cranelift's code.
    pub(crate) fn offline_runtime(&self) -> anyhow::Result<Runtime> {
        self.runtime_with_deadline(OFFLINE_DEADLINE_MS, false)
    }

    fn runtime_with_deadline(&self, default_ms: u64, quick_first: bool) -> anyhow::Result<Runtime> {
        anyhow::ensure!(
            self.min_call_interval.is_finite() && self.min_call_interval >= 0.0,
            "--min-call-interval must be a non-negative number of seconds, got {}",
            self.min_call_interval
        );
        let options = RuntimeOptions {
            limits: SandboxLimits {
                deadline: Duration::from_millis(self.policy_deadline_ms.unwrap_or(default_ms)),
                priming_deadline: Duration::from_millis(self.policy_priming_deadline_ms),
                memory_bytes: self.policy_memory_mib << 20,
                budget: ResultBudget {
                    actions: self.policy_max_actions,
                    labels: self.policy_max_labels,
                    string_bytes: self.policy_max_string_mib << 20,
                    log_lines: self.policy_log_lines,
                    log_bytes: self.policy_log_kib << 10,
                },
                min_call_interval: self.min_call_interval,
                log_rate: LogRate {
                    lines_per_minute: self.policy_log_lines_per_minute,
                    bytes_per_minute: self.policy_log_kib_per_minute << 10,
                },
                ..SandboxLimits::default()
            },
            cache_dir: self.compile_cache()?,
            quick_first,
            ..Default::default()
        };
        Ok(Runtime::new(options)?)
    }

    /// Where compiled code is cached: `--cache-dir`, else the user's cache directory,
    /// or nowhere with `--no-cache`. A default directory that cannot be made costs only
    /// the cache (a warning); a named one that cannot is an error.
    pub(crate) fn compile_cache(&self) -> anyhow::Result<Option<PathBuf>> {
        if self.no_cache {
            return Ok(None);
        }
        if let Some(dir) = &self.cache_dir {
            // wasmtime's cache wants an absolute path.
            return std::path::absolute(dir)
                .map(Some)
                .with_context(|| format!("--cache-dir {}", dir.display()));
        }
        let Some(dirs) = directories_next::ProjectDirs::from("", "", "switchyard") else {
            tracing::warn!(
                "no home directory to keep compiled policies in; compiling in memory only (--cache-dir DIR names one)"
            );
            return Ok(None);
        };
        let dir = dirs.cache_dir().to_path_buf();
        match std::fs::create_dir_all(&dir) {
            Ok(()) => Ok(Some(dir)),
            Err(error) => {
                tracing::warn!(%error, dir = %dir.display(), "cannot create the compile cache; compiling in memory only (--cache-dir DIR names another, --no-cache turns it off)");
                Ok(None)
            }
        }
    }
}
