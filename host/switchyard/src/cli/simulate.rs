//! `switchyard simulate`: run one workload under several policies in the simulator and
//! compare them (table, per-job change, results.json, decision traces, SVG plots).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use switchyard::plot;
use switchyard_control::PolicySlot;
use switchyard_runtime::Runtime;
use switchyard_runtime::registry::{PolicyRef, builtin};
use switchyard_sim::offline;
use switchyard_sim::report::{Results, RunResult};
use switchyard_sim::workload::Workload;

use super::SandboxArgs;

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {
    /// The workload file (YAML, see docs/workloads.md).
    pub workload: PathBuf,
    /// A policy to run: a built-in name or a `.wasm` file; repeat to compare. Default:
    /// `default`, `even` and `gang`; for an imported trace (Philly, Pollux) `default`,
    /// `gang` and `tiresias`.
    #[arg(long = "policy", value_name = "NAME|FILE.wasm")]
    pub policies: Vec<String>,
    /// A policy parameter, `policy.key=value` (policy as given to --policy).
    #[arg(long = "set", value_name = "POLICY.KEY=VALUE")]
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
    /// the jobs (by a hash of their id) to B, the rest to A.
    #[arg(long, value_name = "A:B:RATIO")]
    pub split: Option<String>,
}

/// Reads `--set POLICY.key=value` options. POLICY is a `--policy` argument as given
/// (a built-in name or a `.wasm` path, whose own dots are no trouble: the longest
/// argument that prefixes the option wins) or the name the policy gives itself.
fn parse_sets(
    sets: &[String],
    policies: &[(String, String)],
) -> anyhow::Result<BTreeMap<String, BTreeMap<String, String>>> {
    let mut by_policy: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for set in sets {
        let (target, value) = set
            .split_once('=')
            .with_context(|| format!("--set {set}: expected policy.key=value"))?;
        let matched = policies
            .iter()
            .flat_map(|(argument, name)| [(argument, argument), (argument, name)])
            .filter_map(|(argument, prefix)| {
                let key = target.strip_prefix(prefix.as_str())?.strip_prefix('.')?;
                Some((prefix.len(), argument, key))
            })
            .max_by_key(|(len, _, _)| *len);
        let Some((_, argument, key)) = matched else {
            bail!(
                "--set {set} names no policy that is run (policies: {}); write POLICY.key=value",
                policies
                    .iter()
                    .map(|(argument, name)| if argument == name {
                        argument.clone()
                    } else {
                        format!("{argument} ({name})")
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        if key.is_empty() {
            bail!("--set {set}: the parameter name after `{argument}.` is empty");
        }
        by_policy
            .entry(argument.clone())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }
    Ok(by_policy)
}

pub(super) fn run(args: SimulateArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    if args.shadow.is_some() || args.split.is_some() {
        return super::experiment::run(&args, sandbox);
    }
    let workload = Workload::load(&args.workload)?;
    let seed = args.seed.unwrap_or(workload.seed());
    let scenario = workload.scenario(seed)?;
    let mut policies = args.policies.clone();
    if policies.is_empty() {
        let (defaults, why) = workload.default_policies();
        policies = defaults
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
    }
    let runtime = sandbox.offline_runtime()?;
    // Each policy's own name, so `--set` can address it by that too (compiling here is
    // no extra cost: the runtime keeps the module for the run).
    let named: Vec<(String, String)> = policies
        .iter()
        .map(|p| {
            let module = PolicyRef::parse(p)?.load(&runtime)?;
            Ok((p.clone(), module.name().to_string()))
        })
        .collect::<anyhow::Result<_>>()?;
    let sets = parse_sets(&args.sets, &named)?;
    let fallback = PolicySlot::configure(
        PolicyRef::parse(&args.fallback)?.load(&runtime)?,
        &Default::default(),
    )?;
    let names = file_names(&policies);
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut runs = Vec::new();
    for (name, file_name) in policies.iter().zip(&names) {
        let trace = args
            .out
            .as_ref()
            .map(|dir| dir.join(format!("decisions-{file_name}.jsonl")));
        let run = run_one(
            &runtime,
            name,
            sets.get(name).cloned().unwrap_or_default(),
            &fallback,
            scenario.clone(),
            seed,
            trace.as_deref(),
        )?;
        runs.push(run);
    }
    print_table(&runs);
    print_changes(&runs);
    if let Some(dir) = &args.out {
        write_out(dir, &args.workload, seed, runs)?;
        println!(
            "\nwrote results.json, decisions-*.jsonl and plots to {}",
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one policy; its decision records go to `trace` as they are made (JSON lines),
/// or nowhere, so a long trace runs in bounded memory either way.
fn run_one(
    runtime: &Runtime,
    name: &str,
    settings: BTreeMap<String, String>,
    fallback: &PolicySlot,
    scenario: switchyard_sim::simulator::Scenario,
    seed: u64,
    trace: Option<&Path>,
) -> anyhow::Result<RunResult> {
    let total = scenario.jobs.len() as u64;
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} jobs {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(name.to_string());
    let mut writer = trace
        .map(|file| {
            std::fs::File::create(file)
                .map(std::io::BufWriter::new)
                .with_context(|| format!("writing {}", file.display()))
        })
        .transpose()?;
    let mut write_error = None;
    let run = offline::run(
        runtime,
        name,
        &settings,
        fallback,
        scenario,
        seed,
        offline::Records::Stream,
        |s, record| {
            bar.set_position(switchyard_control::Cluster::finished_jobs(s) as u64);
            if let (Some(w), None) = (writer.as_mut(), &write_error) {
                let written = serde_json::to_writer(&mut *w, record)
                    .map_err(std::io::Error::from)
                    .and_then(|()| w.write_all(b"\n"));
                write_error = written.err();
            }
        },
    )?;
    bar.finish_and_clear();
    if let (Some(file), Some(error)) = (trace, write_error) {
        return Err(error).with_context(|| format!("writing {}", file.display()));
    }
    if let (Some(file), Some(mut w)) = (trace, writer) {
        w.flush()
            .with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(run.result)
}

fn secs(s: f64) -> String {
    if s >= 86400.0 * 2.0 {
        format!("{:.1}d", s / 86400.0)
    } else if s >= 7200.0 {
        format!("{:.1}h", s / 3600.0)
    } else {
        format!("{s:.0}s")
    }
}

/// `seconds` as a table cell, or `n/a` when it averages over no job.
fn if_any(jobs: usize, seconds: f64) -> String {
    if jobs == 0 {
        "n/a".into()
    } else {
        secs(seconds)
    }
}

fn print_table(runs: &[RunResult]) {
    let header = [
        "policy",
        "jobs",
        "done",
        "avg JCT",
        "p50 JCT",
        "p95 JCT",
        "makespan",
        "avg wait",
        "CPU",
        "GPU",
        "migr",
        "rescale",
        "preempt",
        "deadlock",
        "unstarted",
        "fails",
    ];
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let s = &r.summary;
            vec![
                r.policy.clone(),
                s.jobs.to_string(),
                s.finished.to_string(),
                // Completion figures are over finished jobs only: none finished, none
                // to show (a 0 s average would read as a perfect run).
                if_any(s.finished, s.avg_completion),
                if_any(s.finished, s.p50_completion),
                if_any(s.finished, s.p95_completion),
                secs(s.makespan),
                if_any(s.jobs - s.never_started, s.avg_wait),
                format!("{:.0}%", 100.0 * s.cpu_utilisation),
                format!("{:.0}%", 100.0 * s.gpu_utilisation),
                s.migrations.to_string(),
                s.rescales.to_string(),
                s.preemptions.to_string(),
                s.deadlocked.to_string(),
                s.never_started.to_string(),
                s.policy_failures.to_string(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        let text: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == 0 {
                    format!("{v:<w$}", w = widths[c])
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        println!("{}", text.join("  "));
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row);
    }
}

fn print_changes(runs: &[RunResult]) {
    let Some((base, others)) = runs.split_first() else {
        return;
    };
    if others.is_empty() {
        return;
    }
    println!(
        "\ncompletion time per job against {} (negative = faster):",
        base.policy
    );
    let shown = base.jobs.len().min(20);
    print!("{:<16}{:>12}", "job", base.policy);
    for o in others {
        print!("{:>16}", o.policy);
    }
    println!();
    for (i, job) in base.jobs.iter().take(shown).enumerate() {
        let jct = |r: &RunResult| r.jobs[i].finish_time.map(|f| f - r.jobs[i].submit_time);
        let b = jct(base);
        print!(
            "{:<16}{:>12}",
            job.id,
            b.map_or("unfinished".to_string(), secs)
        );
        for o in others {
            let cell = match (b, jct(o)) {
                (Some(b), Some(x)) if b > 0.0 => format!("{:+.1}%", 100.0 * (x - b) / b),
                (None, Some(x)) => format!("{} (new)", secs(x)),
                (_, None) => "unfinished".to_string(),
                _ => "-".to_string(),
            };
            print!("{cell:>16}");
        }
        println!();
    }
    if base.jobs.len() > shown {
        println!("... {} more jobs in results.json", base.jobs.len() - shown);
    }
}

fn write_out(dir: &Path, workload: &Path, seed: u64, runs: Vec<RunResult>) -> anyhow::Result<()> {
    plot::write_all(dir, &runs)?;
    let results = Results {
        workload: workload.display().to_string(),
        seed,
        runs,
    };
    let file = dir.join("results.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&results)?)
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

/// A file-name-safe name per run, unique even when two policies share a file stem
/// (`a/x.wasm` and `b/x.wasm` become `x` and `x-2`).
fn file_names(policies: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(policies.len());
    for policy in policies {
        let base = sanitize(policy);
        let mut name = base.clone();
        let mut n = 1;
        while names.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        names.push(name);
    }
    names
}

fn sanitize(name: &str) -> String {
    let base = Path::new(name)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(name);
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
