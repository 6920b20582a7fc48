//! `switchyard policy new` and `switchyard policy test`: the policy author's commands.
//! The work is in [`switchyard_authoring`]; this module parses flags and prints.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use switchyard_authoring::{
    Comparison, Evidence, Lang, Sdk, TestSpec, check_expectations, component_change,
    create_js_project, create_python_project, create_rust_project, diff_trace, load_expectations,
    render_trace, run_policy_test, vendor_js_sdk, vendor_python_sdk, vendor_rust_sdk,
};
use switchyard_control::PolicySlot;
use switchyard_core::Settings;
use switchyard_runtime::PolicyRef;

use crate::cli::SandboxArgs;
use crate::cli::input_limits::InputLimitArgs;
use crate::cli::registry::RegistryArgs;
use crate::cli::terminal::escaped;

/// Arguments of `policy new`.
#[derive(Debug, clap::Args)]
pub(crate) struct NewArgs {
    /// The policy's name (lowercase letters, digits and `-`).
    pub name: String,
    /// Where to create the policy (default: ./NAME). Inside this repository's
    /// `policies/` folder a Rust crate joins the workspace.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The policy's language: a Rust crate built with cargo, a Python project built
    /// with componentize-py, or a JavaScript project built with componentize-js.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// Rust only: depend on this guest SDK crate by its path (a switchyard checkout's
    /// `policies/sdk`) instead of writing the SDK and WIT this binary was built with into
    /// the crate's `switchyard-sdk/`.
    #[arg(long, value_name = "DIR")]
    pub sdk: Option<PathBuf>,
}

/// Arguments of `policy sdk`.
#[derive(Debug, clap::Args)]
pub(crate) struct SdkArgs {
    /// The folder to write the SDK into: a policy's `switchyard-sdk/` (its files are
    /// replaced) or a new folder.
    #[arg(long, value_name = "DIR", default_value = switchyard_authoring::SDK_DIR)]
    pub dir: PathBuf,
    /// Which SDK: the Rust crate, the Python package or the JavaScript modules.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
}

/// Arguments of `policy test`.
#[derive(Debug, clap::Args)]
pub(crate) struct TestArgs {
    /// The policy under test: a built-in name, a `.wasm` file or a registry reference
    /// (`oci://REGISTRY/REPOSITORY:TAG`, `...@sha256:DIGEST`).
    pub policy: String,
    /// A workload (YAML, see docs/workloads.md) or a fixture snapshot (a YAML file with
    /// a top-level `snapshot`, e.g. from --save-snapshots).
    pub input: PathBuf,
    /// A parameter of the policy under test, `key=value`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Seed (overrides the workload's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Expectations to check (YAML: `expect` and `forbid` lists, see
    /// docs/policy-authoring.md).
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// Compare the decision trace with this golden file; fails with a diff when they
    /// differ.
    #[arg(long, value_name = "FILE")]
    pub golden: Option<PathBuf>,
    /// Write the trace into the --golden file instead of comparing.
    #[arg(long, requires = "golden")]
    pub bless: bool,
    /// Show this policy the same snapshots (never applied) and list the rounds in which
    /// it decides differently.
    #[arg(long, value_name = "NAME|FILE.wasm")]
    pub against: Option<String>,
    /// Write every round's snapshot as a fixture (`round-N.yaml`) into DIR.
    #[arg(long, value_name = "DIR")]
    pub save_snapshots: Option<PathBuf>,
    /// Policy that decides a round when the tested one fails.
    #[arg(long, default_value = "default", value_name = "NAME|FILE.wasm")]
    pub fallback: String,
    #[command(flatten)]
    pub input_limits: InputLimitArgs,
    /// How policies named by reference are pulled.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub(super) fn new(args: NewArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let created = match args.lang {
        Lang::Rust => {
            let sdk = args.sdk.map_or(Sdk::Vendored, Sdk::Path);
            create_rust_project(&args.name, &dir, &sdk)?
        }
        Lang::Python => {
            anyhow::ensure!(
                args.sdk.is_none(),
                "--sdk names a Rust SDK crate; a Python policy gets the Python SDK in its \
                 switchyard-sdk/ (leave --sdk out)"
            );
            create_python_project(&args.name, &dir)?
        }
        Lang::Js => {
            anyhow::ensure!(
                args.sdk.is_none(),
                "--sdk names a Rust SDK crate; a JavaScript policy gets the JavaScript SDK in \
                 its switchyard-sdk/ (leave --sdk out)"
            );
            create_js_project(&args.name, &dir)?
        }
    };
    println!(
        "created policy `{}` in {}{}",
        args.name,
        created.dir.display(),
        if created.in_workspace {
            " (a member of the switchyard workspace)"
        } else {
            ""
        }
    );
    for file in &created.files {
        println!("  {}", file.display());
    }
    let setup = match args.lang {
        Lang::Rust => "",
        Lang::Python => {
            "\n  python3 -m venv .venv\n  .venv/bin/pip install -r requirements.txt\n  .venv/bin/pytest -q"
        }
        Lang::Js => "\n  npm ci\n  npm test",
    };
    println!(
        "\nnext:\n  cd {}{setup}\n  {}\n  switchyard policy validate {}\n  \
         switchyard policy test {} policy-tests/workload.yaml --expect policy-tests/expect.yaml",
        created.dir.display(),
        created.build,
        created.wasm_path,
        created.wasm_path
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn sdk(args: SdkArgs) -> anyhow::Result<ExitCode> {
    let files = match args.lang {
        Lang::Rust => vendor_rust_sdk(&args.dir)?,
        Lang::Python => vendor_python_sdk(&args.dir)?,
        Lang::Js => vendor_js_sdk(&args.dir)?,
    };
    println!(
        "wrote the policy SDK and WIT of switchyard {} ({} files) to {}",
        env!("CARGO_PKG_VERSION"),
        files.len(),
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) fn test(mut args: TestArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let mut settings = Settings::new();
    for set in &args.sets {
        let (key, value) = set
            .split_once('=')
            .with_context(|| format!("--set {set}: expected key=value"))?;
        settings.insert(key.to_string(), value.to_string());
    }
    // Expectations are read before anything runs, so a typo costs no simulation.
    let expectations = args.expect.as_deref().map(load_expectations).transpose()?;
    let _pulled = args.registry.pull_references(
        [&mut args.policy, &mut args.fallback]
            .into_iter()
            .chain(args.against.as_mut()),
        sandbox,
    )?;
    let runtime = sandbox.offline_runtime()?;
    let fallback = PolicySlot::configure(
        PolicyRef::parse(&args.fallback)?.load(&runtime)?,
        &Settings::new(),
    )?;
    let spec = TestSpec {
        policy: &args.policy,
        settings: &settings,
        against: args.against.as_deref(),
        input: &args.input,
        seed: args.seed,
        save_snapshots: args.save_snapshots.as_deref(),
        disruption: sandbox.disruption.budget()?,
        limits: args.input_limits.limits(),
    };
    let run = run_policy_test(&runtime, &spec, &fallback)?;
    let rendered = render_trace(&run.header, &run.records);
    let mut passed = true;
    if expectations.is_none() && args.golden.is_none() {
        print!("{rendered}");
    }
    if let Some(dir) = &args.save_snapshots {
        println!("saved {} snapshots in {}", run.records.len(), dir.display());
    }
    if let Some(expectations) = &expectations {
        let verdicts = check_expectations(
            expectations,
            Evidence {
                records: &run.records,
                finished: run.finished.as_ref(),
            },
        );
        for verdict in &verdicts {
            println!("{verdict}");
        }
        let failed = verdicts.iter().filter(|v| !v.passed).count();
        println!(
            "{} of {} expectations held",
            verdicts.len() - failed,
            verdicts.len()
        );
        passed &= failed == 0;
    }
    if let Some(golden) = &args.golden {
        if args.bless {
            std::fs::write(golden, &rendered)
                .with_context(|| format!("writing {}", golden.display()))?;
            println!("wrote the decision trace to {}", golden.display());
        } else {
            let expected = std::fs::read_to_string(golden).with_context(|| {
                format!(
                    "reading the golden trace {} (create it with --bless)",
                    golden.display()
                )
            })?;
            if let Some((before, now)) = component_change(&expected, &rendered) {
                println!(
                    "note: {} was made by component {before}; this run's is {now} (other \
                     bytes: another build or version; --bless records it)",
                    golden.display()
                );
            }
            match diff_trace(&expected, &rendered) {
                None => println!("the decision trace matches {}", golden.display()),
                Some(diff) => {
                    println!(
                        "the decision trace differs from {} (accept the change with --bless):\n{diff}",
                        golden.display()
                    );
                    passed = false;
                }
            }
        }
    }
    if let Some(comparison) = &run.comparison {
        print_comparison(&args.policy, comparison);
    }
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// How many differing rounds are printed in full.
const DIFFERENCES_SHOWN: usize = 20;

fn print_comparison(tested: &str, c: &Comparison) {
    let rate = if c.compared == 0 {
        0.0
    } else {
        100.0 * c.agreed as f64 / c.compared as f64
    };
    println!(
        "{tested} and {} agreed in {} of {} rounds ({rate:.0}%)",
        c.against, c.agreed, c.compared
    );
    for d in c.differing.iter().take(DIFFERENCES_SHOWN) {
        println!("round {} t={:.3}", d.round, d.time);
        for op in &d.only_tested {
            println!("  - {}   (only {tested})", escaped(op));
        }
        for op in &d.only_other {
            println!("  + {}   (only {})", escaped(op), c.against);
        }
    }
    if c.differing.len() > DIFFERENCES_SHOWN {
        println!(
            "... and {} more differing rounds",
            c.differing.len() - DIFFERENCES_SHOWN
        );
    }
}
