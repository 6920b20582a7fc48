//! `switchyard sweep`: workloads × policies × parameter values × seeds in the simulator,
//! the cells run in parallel on this machine's cores (or one by one as a Kubernetes
//! Indexed Job, `--emit-job`, and gathered by `sweep merge`), summarised as means over
//! seeds with confidence intervals and changes against a baseline paired by seed.
//!
//! Files (`results.json`, the plot, a cell's file) are written before the table is
//! printed, so a reader that stops early (`| head`) does not cost them. What a cell runs
//! and how cells are summarised is [`switchyard_sim::run_cell`]'s and [`SweepResults`]'; this module plans,
//! schedules and prints.

mod job;
mod table;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context as _, bail, ensure};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use switchyard::write_sweep;
use switchyard_control::PolicySlot;
use switchyard_runtime::{PolicyRef, Runtime};
use switchyard_sim::{
    CellFile, CellOutcome, CellResult, SweepPlan as Plan, SweepResults, SweepRun, Workload,
    run_cell,
};

use super::SandboxArgs;
use super::input_limits::InputLimitArgs;
use super::registry::RegistryArgs;
use super::simulate::{plan as plan_runs, policies_or_defaults, target_of};

/// Arguments of `sweep`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct SweepArgs {
    #[command(subcommand)]
    pub command: Option<SweepCommand>,
    /// Workload files (YAML, see docs/workloads.md); every one runs every cell.
    #[arg(required = true, value_name = "WORKLOAD")]
    pub workloads: Vec<PathBuf>,
    /// A policy to run, `[NAME=]POLICY` as for `simulate`; repeat. Default: the first
    /// workload's default policies.
    #[arg(long = "policy", value_name = "[NAME=]POLICY")]
    pub policies: Vec<String>,
    /// Parameter values of one run, `NAME.key=v1,v2,...`: the run is made once per
    /// value (once per combination when several keys have several values).
    #[arg(long = "set", value_name = "NAME.KEY=V1,V2")]
    pub sets: Vec<String>,
    /// Seeds: `1..20` (1 to 20, both included), `1,5,9`, or both (`1..5,10`).
    #[arg(long, default_value = "1..10", value_name = "SEEDS")]
    pub seeds: String,
    /// The run the others are compared with, seed by seed (a run's name as the table
    /// shows it). Default: the first run.
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Policy that decides a round when the tested one fails.
    #[arg(long, default_value = "default", value_name = "NAME|FILE.wasm")]
    pub fallback: String,
    /// Directory for results.json and the plot (sweep.svg, sweep.png); with --cell, the
    /// cell's file goes to DIR/cells/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Cells run at once [default: the machine's cores].
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Run only cell N (numbered workload by workload, run by run, seed by seed, from
    /// 0) and write it to --out DIR/cells/: what each pod of `--emit-job` does.
    #[arg(long, value_name = "N", requires = "out")]
    pub cell: Option<usize>,
    /// Print results.json's content instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub job: job::JobArgs,
    /// The bounds every workload is read within, when the sweep is planned and in each
    /// cell (the plan carries them to the cells of `--emit-job`).
    #[command(flatten)]
    pub input_limits: InputLimitArgs,
    /// How policies named by reference (`--policy oci://REGISTRY/REPOSITORY:TAG`) are
    /// pulled.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum SweepCommand {
    /// Build the table, results.json and the plot from the cells' files that `sweep
    /// --cell` (each pod of `--emit-job`) wrote into DIR/cells/.
    Merge(MergeArgs),
}

/// Arguments of `sweep merge`.
#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// The directory the cells wrote to (their --out).
    pub dir: PathBuf,
    /// Print results.json's content instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(mut args: SweepArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    if let Some(SweepCommand::Merge(merge_args)) = &args.command {
        return merge(merge_args);
    }
    if args.job.emit_job
        && let Some(reference) = args
            .policies
            .iter()
            .chain([&args.fallback])
            .find(|p| p.contains(switchyard_registry::SCHEME))
    {
        anyhow::bail!(
            "--emit-job: the Job's pods would each pull `{reference}` without the registry \
             flags; pull it first (`switchyard policy pull REF -o FILE.wasm`) and give the file"
        );
    }
    let _pulled = args.registry.pull_references(
        args.policies.iter_mut().chain([&mut args.fallback]),
        sandbox,
    )?;
    let runtime = sandbox.offline_runtime()?;
    let plan = make_plan(&args, &runtime)?;
    if args.job.emit_job {
        let command = job::SweepCommand {
            workloads: &args.workloads,
            policies: &args.policies,
            sets: &args.sets,
        };
        print!("{}", job::manifest(command, &args.job, &plan)?);
        return Ok(ExitCode::SUCCESS);
    }
    let fallback = PolicySlot::configure(
        PolicyRef::parse(&plan.fallback)?.load(&runtime)?,
        &Default::default(),
    )?;
    let cells = plan.cells();
    if let Some(index) = args.cell {
        let Some(cell) = cells.get(index) else {
            bail!(
                "--cell {index}: this sweep has {} cells, numbered 0 to {}",
                cells.len(),
                cells.len().saturating_sub(1)
            );
        };
        let result = run_cell(&runtime, &plan, &fallback, cell);
        let dir = args.out.as_deref().unwrap_or(Path::new("."));
        let file = write_cell(dir, plan, result)?;
        eprintln!("wrote {}", file.display());
        return Ok(ExitCode::SUCCESS);
    }
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, cells.len().max(1));
    let started = Instant::now();
    let results = run_cells(&runtime, &plan, &fallback, workers);
    let wall = started.elapsed().as_secs_f64();
    let busy: f64 = results.iter().map(|c| c.seconds).sum();
    eprintln!(
        "{} cells, {workers} at a time: {wall:.1} s wall, {busy:.1} s of cells ({:.2} cells at once on average)",
        results.len(),
        busy / wall.max(f64::EPSILON)
    );
    report(
        args.out.as_deref(),
        SweepResults::of(plan, results),
        args.json,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Writes results.json and the plot to `out`, then prints the table (or the JSON).
fn report(out: Option<&Path>, results: SweepResults, json: bool) -> anyhow::Result<()> {
    let written = match out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let mut written = write_sweep(dir, &results)?;
            let file = dir.join("results.json");
            std::fs::write(&file, serde_json::to_vec_pretty(&results)?)
                .with_context(|| format!("writing {}", file.display()))?;
            written.push("results.json".into());
            Some(format!(
                "wrote to {}: {}",
                dir.display(),
                written.join(", ")
            ))
        }
        None => None,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        if let Some(message) = written {
            eprintln!("{message}");
        }
    } else {
        println!("{}", table::text(&results));
        if let Some(message) = written {
            println!("\n{message}");
        }
    }
    Ok(())
}

/// Runs every cell of `plan` on `workers` threads, with a progress bar; a cell that
/// fails or panics is reported as failed and the others go on.
fn run_cells(
    runtime: &Runtime,
    plan: &Plan,
    fallback: &PolicySlot,
    workers: usize,
) -> Vec<CellResult> {
    let cells = plan.cells();
    let bar = ProgressBar::with_draw_target(Some(cells.len() as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "sweep [{bar:30}] {pos}/{len} cells {elapsed} (~{eta} left) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let next = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(cells.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(cell) = cells.get(i) else { break };
                    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        run_cell(runtime, plan, fallback, cell)
                    }))
                    .unwrap_or_else(|panic| CellResult {
                        cell: cell.clone(),
                        outcome: CellOutcome::Failed {
                            error: format!("the run panicked: {}", panic_text(&*panic)),
                        },
                        seconds: 0.0,
                    });
                    if matches!(result.outcome, CellOutcome::Failed { .. }) {
                        let n = failed.fetch_add(1, Ordering::Relaxed) + 1;
                        bar.set_message(format!("{n} failed"));
                    }
                    bar.inc(1);
                    results
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .push(result);
                }
            });
        }
    });
    bar.finish_and_clear();
    results
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Writes one cell's file into `dir/cells/`.
fn write_cell(dir: &Path, plan: Plan, result: CellResult) -> anyhow::Result<PathBuf> {
    let cells = dir.join("cells");
    std::fs::create_dir_all(&cells).with_context(|| format!("creating {}", cells.display()))?;
    let file = cells.join(CellFile::name(result.cell.index));
    let text = serde_json::to_vec_pretty(&CellFile { plan, result })?;
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// `sweep merge DIR`: the cells' files into one table.
fn merge(args: &MergeArgs) -> anyhow::Result<ExitCode> {
    let cells_dir = args.dir.join("cells");
    let mut plan: Option<(Plan, PathBuf)> = None;
    let mut results = Vec::new();
    let entries = std::fs::read_dir(&cells_dir).with_context(|| {
        format!(
            "reading {} (where `sweep --cell N --out {}` writes)",
            cells_dir.display(),
            args.dir.display()
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", cells_dir.display()))?;
    files.retain(|f| f.extension().is_some_and(|e| e == "json"));
    files.sort();
    for file in files {
        let text = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        let cell: CellFile = serde_json::from_slice(&text)
            .with_context(|| format!("{}: not a sweep cell's file", file.display()))?;
        match &plan {
            None => plan = Some((cell.plan.clone(), file.clone())),
            Some((first, first_file)) => ensure!(
                *first == cell.plan,
                "{} belongs to another sweep than {}: their plans (workloads, runs, seeds, \
                 baseline) differ; merge the cells of one sweep at a time",
                file.display(),
                first_file.display()
            ),
        }
        results.push(cell.result);
    }
    let Some((plan, _)) = plan else {
        bail!("{}: no cell files (cell-NNNNN.json)", cells_dir.display());
    };
    let expected = plan.cells().len();
    let mut seen = std::collections::BTreeSet::new();
    for result in &results {
        ensure!(
            seen.insert(result.cell.index),
            "{}: cell {} appears twice",
            cells_dir.display(),
            result.cell.index
        );
    }
    let missing: Vec<String> = (0..expected)
        .filter(|i| !seen.contains(i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "{} of {expected} cells have no file yet (cells {}): the table counts the others",
            missing.len(),
            missing.join(", ")
        );
    }
    report(Some(&args.dir), SweepResults::of(plan, results), args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads the arguments into the sweep's plan: runs expanded over the parameter values,
/// seeds parsed, the baseline checked.
fn make_plan(args: &SweepArgs, runtime: &Runtime) -> anyhow::Result<Plan> {
    let limits = args.input_limits.limits();
    let policies = if args.policies.is_empty() {
        policies_or_defaults(&[], &Workload::load_with(&args.workloads[0], limits)?)?
    } else {
        args.policies.clone()
    };
    let specs = plan_runs(&policies, &[], |policy| {
        Ok(PolicyRef::parse(policy)?.load(runtime)?.name().to_string())
    })?;
    // Each run's parameters, each with its values.
    let mut grids: Vec<Vec<(String, Vec<String>)>> = vec![Vec::new(); specs.len()];
    for set in &args.sets {
        let (index, key, values) = target_of(set, &specs)?;
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        ensure!(
            values.iter().all(|v| !v.is_empty()),
            "--set {set}: an empty value in the list (write NAME.key=v1,v2)"
        );
        grids[index].push((key.to_string(), values));
    }
    let mut runs = Vec::new();
    for (spec, grid) in specs.iter().zip(grids) {
        for settings in combinations(&grid) {
            let swept: Vec<String> = grid
                .iter()
                .filter(|(_, values)| values.len() > 1)
                .map(|(key, _)| format!("{key}={}", settings[key]))
                .collect();
            let name = if swept.is_empty() {
                spec.name.clone()
            } else {
                format!("{}({})", spec.name, swept.join(","))
            };
            runs.push(SweepRun {
                name,
                policy: spec.policy.clone(),
                settings: settings.into_iter().collect(),
            });
        }
    }
    let baseline = match &args.baseline {
        Some(name) => {
            ensure!(
                runs.iter().any(|r| &r.name == name),
                "--baseline {name} names no run (runs: {})",
                runs.iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            name.clone()
        }
        None => runs[0].name.clone(),
    };
    Ok(Plan {
        workloads: args
            .workloads
            .iter()
            .map(|w| w.display().to_string())
            .collect(),
        runs,
        seeds: parse_seeds(&args.seeds)?,
        baseline,
        fallback: args.fallback.clone(),
        limits,
    })
}

/// Every combination of one value per parameter, in the order given.
fn combinations(grid: &[(String, Vec<String>)]) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut all = vec![std::collections::BTreeMap::new()];
    for (key, values) in grid {
        all = all
            .into_iter()
            .flat_map(|partial| {
                values.iter().map(move |value| {
                    let mut next = partial.clone();
                    next.insert(key.clone(), value.clone());
                    next
                })
            })
            .collect();
    }
    all
}

/// `1..20` (both ends included), `1,5,9`, or both, in the order given, no repeats.
fn parse_seeds(text: &str) -> anyhow::Result<Vec<u64>> {
    let bad = |part: &str| {
        anyhow::anyhow!(
            "--seeds {text}: `{part}` is neither a seed (a whole number) nor a range FROM..TO \
             (both included, FROM <= TO)"
        )
    };
    let mut seeds = Vec::new();
    for part in text.split(',').map(str::trim) {
        let range = part.split_once("..=").or_else(|| part.split_once(".."));
        match range {
            Some((from, to)) => {
                let (from, to): (u64, u64) = (
                    from.trim().parse().map_err(|_| bad(part))?,
                    to.trim().parse().map_err(|_| bad(part))?,
                );
                ensure!(from <= to, bad(part));
                ensure!(
                    to - from < 100_000,
                    "--seeds {text}: `{part}` is over 100,000 seeds"
                );
                seeds.extend(from..=to);
            }
            None => seeds.push(part.parse().map_err(|_| bad(part))?),
        }
    }
    let mut seen = std::collections::HashSet::new();
    seeds.retain(|s| seen.insert(*s));
    Ok(seeds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_ranges_with_both_ends_or_lists() {
        assert_eq!(parse_seeds("1..5").unwrap(), [1, 2, 3, 4, 5]);
        assert_eq!(parse_seeds("1..=3,10,2").unwrap(), [1, 2, 3, 10]);
        let error = parse_seeds("5..1").unwrap_err().to_string();
        assert!(error.contains("`5..1`"), "{error}");
        assert!(parse_seeds("a").is_err());
    }

    #[test]
    fn several_values_of_several_parameters_make_every_combination() {
        let grid = vec![
            (
                "alpha".to_string(),
                vec!["0.01".to_string(), "0.02".to_string()],
            ),
            (
                "interval".to_string(),
                vec!["20".to_string(), "30".to_string(), "40".to_string()],
            ),
        ];
        let all = combinations(&grid);
        assert_eq!(all.len(), 6);
        assert_eq!(all[5]["alpha"], "0.02");
        assert_eq!(all[5]["interval"], "40");
    }
}
