//! `switchyard simulate`: run one workload under several policies in the simulator and
//! compare them (table, per-job change, results.json, decision traces, plots).

mod runs;
mod table;
mod trace;

pub(super) use runs::{plan, policy_of, target_of};
pub(super) use table::{TimeUnit, layout};
pub(super) use trace::DEFAULT_TRACE_LIMIT_KIB;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use switchyard::write_plots;
use switchyard_control::{DecidingPolicy, PolicySlot};
use switchyard_runtime::{PolicyRef, Runtime, builtin};
use switchyard_sim::{OfflineOptions, Records, Results, RunResult, Workload, run_offline};

use super::SandboxArgs;
use super::experiment::{ExperimentArgs, SplitArms};
use super::input_limits::InputLimitArgs;
use super::registry::{PulledFile, RegistryArgs, pinned_reference};
use trace::TraceWriter;

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {
    /// The workload file (YAML, see docs/workloads.md).
    pub workload: PathBuf,
    /// A policy to run: a built-in name, a `.wasm` file or a registry reference
    /// (`oci://REGISTRY/REPOSITORY:TAG`, `...@sha256:DIGEST`), named in the results by its
    /// own name, or by NAME with `NAME=POLICY` (to compare two settings of one policy:
    /// `--policy dragon --policy local=dragon --set local.scaling=false`); repeat to
    /// compare. Two runs may not share a name. Default: `default`, `even` and `gang`;
    /// for an imported trace (Philly, Pollux) `default`, `gang` and `tiresias`.
    #[arg(long = "policy", value_name = "[NAME=]POLICY")]
    pub policies: Vec<String>,
    /// A policy parameter of one run, `NAME.key=value` (NAME: the run's name, or the
    /// policy as given to --policy when only one run loads it).
    #[arg(long = "set", value_name = "NAME.KEY=VALUE")]
    pub sets: Vec<String>,
    /// Seed (overrides the workload's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Directory for results.json, decision traces and plots.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Policy that decides a round when the tested one fails.
    #[arg(long, default_value = "default", value_name = "NAME|FILE.wasm")]
    pub fallback: String,
    /// Run an A/B shadow experiment instead of a comparison: the first --policy (or
    /// `default`) decides, this policy shadows it.
    #[arg(long, value_name = "NAME|FILE.wasm", conflicts_with = "split")]
    pub shadow: Option<String>,
    /// Run an A/B split experiment instead of a comparison: `A:B:RATIO` sends RATIO of
    /// the jobs (by a hash of their id) to B, the rest to A. A and B are names, `.wasm`
    /// files or registry references (`default:oci://REGISTRY/REPOSITORY:TAG:0.5`).
    #[arg(long, value_name = "A:B:RATIO")]
    pub split: Option<String>,
    /// How --split assigns jobs: `hash` (each job by a hash of its id; the arms' sizes
    /// vary by chance) or `balanced` (the hash held to RATIO as jobs arrive: 20 jobs at
    /// 0.5 are 10 and 10).
    #[arg(
        long,
        default_value = "hash",
        value_name = "hash|balanced",
        requires = "split"
    )]
    pub split_assign: String,
    /// Print the results as JSON (what results.json or experiment.json holds) instead of
    /// tables.
    #[arg(long)]
    pub json: bool,
    /// KiB of decision records each run's trace (`decisions-NAME.jsonl` under --out)
    /// holds; the rounds past it are summarised in the trace's last line,
    /// `{"omitted": {...}}`.
    #[arg(long, default_value_t = trace::DEFAULT_TRACE_LIMIT_KIB, value_name = "KIB")]
    pub trace_limit_kib: u64,
    #[command(flatten)]
    pub input_limits: InputLimitArgs,
    /// How policies named by reference (`--policy oci://REGISTRY/REPOSITORY:TAG`) are
    /// pulled.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub(super) fn run(mut args: SimulateArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let mut split = args.split.as_deref().map(SplitArms::parse).transpose()?;
    let pulled = args.registry.pull_references(
        args.policies
            .iter_mut()
            .chain([&mut args.fallback])
            .chain(args.shadow.as_mut())
            .chain(split.iter_mut().flat_map(|s| [&mut s.a, &mut s.b])),
        sandbox,
    )?;
    if args.shadow.is_some() || split.is_some() {
        // Arm A of a shadow experiment is the first --policy; a split names both arms.
        let first_policy = match (&args.shadow, args.policies.first()) {
            (Some(_), Some(first)) => Some(policy_of(first)?),
            _ => None,
        };
        let experiment = ExperimentArgs {
            workload: &args.workload,
            input_limits: args.input_limits.limits(),
            seed: args.seed,
            fallback: &args.fallback,
            out: args.out.as_deref(),
            first_policy,
            shadow: args.shadow.as_deref(),
            split: split.as_ref(),
            split_assign: &args.split_assign,
            json: args.json,
        };
        return super::experiment::run(&experiment, sandbox);
    }
    let workload = Workload::load_with(&args.workload, args.input_limits.limits())?;
    let seed = args.seed.unwrap_or(workload.seed());
    let policies = policies_or_defaults(&args.policies, &workload)?;
    compare(
        Comparison {
            workload: &workload,
            label: &args.workload,
            policies,
            sets: &args.sets,
            seed,
            out: args.out.as_deref(),
            fallback: &args.fallback,
            pulled: &pulled,
            baseline: None,
            json: args.json,
            trace_limit_kib: args.trace_limit_kib,
        },
        sandbox,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The `--policy` arguments, or when there are none the workload's default policies
/// that are built in (saying so on standard error).
pub(super) fn policies_or_defaults(
    policies: &[String],
    workload: &Workload,
) -> anyhow::Result<Vec<String>> {
    if !policies.is_empty() {
        return Ok(policies.to_vec());
    }
    let (defaults, why) = workload.default_policies();
    let policies: Vec<String> = defaults
        .iter()
        .filter(|p| builtin(p).is_some())
        .map(|p| p.to_string())
        .collect();
    if policies.is_empty() {
        bail!(
            "no --policy given and none of {} is built in; name one with --policy NAME|FILE.wasm",
            defaults.join(", ")
        );
    }
    eprintln!(
        "no --policy given: running {} for {why}; name others with --policy",
        policies.join(", ")
    );
    Ok(policies)
}

/// A workload to run under several policies and report as `simulate` does.
pub(super) struct Comparison<'a> {
    /// The workload.
    pub workload: &'a Workload,
    /// What names it in `results.json` (its file).
    pub label: &'a Path,
    /// `--policy` arguments, `[NAME=]POLICY`.
    pub policies: Vec<String>,
    /// `--set` arguments.
    pub sets: &'a [String],
    /// The seed of the scenario and the runs.
    pub seed: u64,
    /// Where results, traces and plots go.
    pub out: Option<&'a Path>,
    /// The policy standing in when a run's policy fails.
    pub fallback: &'a str,
    /// The policies among them pulled from a registry, for the pinned reference each
    /// decision trace names.
    pub pulled: &'a [PulledFile],
    /// A run already made (a recorded one), reported first: the others are compared
    /// with it.
    pub baseline: Option<RunResult>,
    /// Print `results.json`'s content instead of the tables.
    pub json: bool,
    /// KiB of records each run's decision trace holds before it summarises the rest.
    pub trace_limit_kib: u64,
}

/// Runs the workload under each policy and prints the table, the per-job changes and
/// the legend; writes results, traces and plots to `out` first, so a reader that stops
/// early (`| head`) does not cost the files.
pub(super) fn compare(c: Comparison<'_>, sandbox: &SandboxArgs) -> anyhow::Result<()> {
    let scenario = c.workload.scenario(c.seed)?;
    let runtime = sandbox.offline_runtime()?;
    let disruption = sandbox.disruption.budget()?;
    // A run without an alias is named by its policy's own name (compiling here is no
    // extra cost: the runtime keeps the module for the run).
    let specs = runs::plan(&c.policies, c.sets, |policy| {
        Ok(PolicyRef::parse(policy)?.load(&runtime)?.name().to_string())
    })?;
    if let Some(base) = &c.baseline
        && let Some(clash) = specs.iter().find(|s| s.name == base.policy)
    {
        bail!(
            "--policy {}: `{}` names the recorded run in the table; give this run another \
             name, e.g. --policy {}-2={}",
            clash.policy,
            clash.name,
            clash.name,
            clash.policy
        );
    }
    let fallback = PolicySlot::configure(
        PolicyRef::parse(c.fallback)?.load(&runtime)?,
        &Default::default(),
    )?;
    if let Some(dir) = c.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut results: Vec<RunResult> = c.baseline.into_iter().collect();
    let mut traces = Vec::new();
    for spec in specs {
        // Run names are letters, digits, `-` and `_`: safe as file names.
        let trace = c
            .out
            .map(|dir| dir.join(format!("decisions-{}.jsonl", spec.name)));
        let options = OfflineOptions {
            records: Records::Stream,
            disruption,
        };
        let deciders = [
            DecidingPolicy::of(
                &*PolicyRef::parse(&spec.policy)?.load(&runtime)?,
                pinned_reference(c.pulled, &spec.policy),
            ),
            DecidingPolicy::of(&fallback.module, pinned_reference(c.pulled, c.fallback)),
        ];
        let mut run = run_one(
            &runtime,
            &spec,
            &fallback,
            scenario.clone(),
            c.seed,
            options,
            trace
                .as_deref()
                .map(|file| (file, c.trace_limit_kib, &deciders[..])),
        )?;
        if let Some(file) = trace.as_deref().and_then(Path::file_name) {
            traces.push(file.to_string_lossy().into_owned());
        }
        run.policy = spec.name;
        results.push(run);
    }
    let results = Results {
        workload: c.label.display().to_string(),
        seed: c.seed,
        runs: results,
    };
    let written = match c.out {
        Some(dir) => Some(write_out(dir, &results, traces)?),
        None => None,
    };
    if c.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        println!("{}", table::summary(&results.runs));
        if let Some(per_job) = table::per_job(&results.runs) {
            println!("\n{per_job}");
        }
        println!("\n{}", table::LEGEND);
    }
    if let (Some(dir), Some(written)) = (c.out, written) {
        // On standard error with `--json`, so standard output stays one JSON document.
        let message = format!("wrote to {}: {}", dir.display(), written.join(", "));
        if c.json {
            eprintln!("{message}");
        } else {
            println!("\n{message}");
        }
    }
    Ok(())
}

/// Runs one policy; its decision records go to `trace` (a file, its limit in KiB, and
/// the components its first line names) as they are made (JSON lines), or nowhere, so a
/// long trace runs in bounded memory either way.
fn run_one(
    runtime: &Runtime,
    spec: &runs::RunSpec,
    fallback: &PolicySlot,
    scenario: switchyard_sim::Scenario,
    seed: u64,
    options: OfflineOptions,
    trace: Option<(&Path, u64, &[DecidingPolicy])>,
) -> anyhow::Result<RunResult> {
    let total = scenario.jobs.len() as u64;
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} jobs {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(spec.name.clone());
    let mut writer = trace
        .map(|(file, limit_kib, deciders)| TraceWriter::create(file, limit_kib, deciders))
        .transpose()?;
    let run = run_offline(
        runtime,
        &spec.policy,
        &spec.settings,
        fallback,
        scenario,
        seed,
        options,
        |s, record| {
            bar.set_position(switchyard_control::Cluster::finished_jobs(s) as u64);
            if let Some(w) = writer.as_mut() {
                w.record(record);
            }
        },
    )?;
    bar.finish_and_clear();
    if let (Some((file, _, _)), Some(writer)) = (trace, writer)
        && let Some(omitted) = writer.finish()?
    {
        eprintln!(
            "{}: {} rounds from t={:.0}s to t={:.0}s past its limit of {} KiB are summarised in its last line (--trace-limit-kib)",
            file.display(),
            omitted.rounds,
            omitted.first_time,
            omitted.last_time,
            omitted.limit_bytes / 1024,
        );
    }
    Ok(run.result)
}

/// Writes the plots and `results.json`; returns the names of the files written, with
/// the decision traces already written (`traces`).
fn write_out(dir: &Path, results: &Results, traces: Vec<String>) -> anyhow::Result<Vec<String>> {
    let mut written = write_plots(dir, results)?;
    let file = dir.join("results.json");
    std::fs::write(&file, serde_json::to_vec_pretty(results)?)
        .with_context(|| format!("writing {}", file.display()))?;
    written.push("results.json".into());
    written.extend(traces);
    Ok(written)
}
