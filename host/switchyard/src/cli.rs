//! Command-line interface: argument parsing and the commands' output. The work itself is
//! done by the library; this module formats what it returns for a person.

mod action_text;
mod ctl;
mod experiment;
mod input_limits;
mod kube;
mod openapi;
mod policy;
mod registry;
mod replay;
mod run;
mod sandbox;
mod simulate;
mod size;
mod sweep;
mod terminal;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub(crate) use sandbox::SandboxArgs;

/// Host for WebAssembly scheduling policies of deep-learning training jobs.
#[derive(Debug, Parser)]
#[command(name = "switchyard", version, about)]
pub(crate) struct Cli {
    /// Log as JSON lines instead of text.
    #[arg(long, global = true)]
    pub log_json: bool,

    #[command(flatten)]
    pub sandbox: SandboxArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Inspect, validate and list policy components.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Run a workload in the cluster simulator under one or more policies and compare.
    Simulate(simulate::SimulateArgs),
    /// Run workloads under policies, parameter values and seeds in the simulator, in
    /// parallel, and report means over seeds with confidence intervals and changes
    /// against a baseline; or emit the sweep as a Kubernetes Indexed Job (`--emit-job`)
    /// and merge its cells (`sweep merge DIR`).
    Sweep(sweep::SweepArgs),
    /// Print the TrainingJob CustomResourceDefinition (what deploy/crd.yaml holds).
    Crd,
    /// Run the controller: `--cluster sim:WORKLOAD.yaml` (HTTP API, hot swap, A/B on the
    /// simulator; see `run --cluster sim:x --help`) or `--cluster kube` (a real cluster;
    /// see `run --cluster kube --help`).
    #[command(disable_help_flag = true)]
    Run(RunCommand),
    /// Decide the rounds of a recording (`run --record DIR`) again under other policies
    /// and report where they agree with what was recorded, and why not; or export the
    /// recording anonymised.
    Replay(replay::ReplayArgs),
    /// Write the HTTP API's OpenAPI document (docs/openapi.json).
    Openapi(openapi::OpenapiArgs),
    /// Operate a running controller over its HTTP API: status, policies, jobs, upload,
    /// activate, parameters, experiments, decisions (address and token from flags or
    /// SWITCHYARD_URL, SWITCHYARD_TOKEN, SWITCHYARD_TOKEN_FILE; see `ctl --help`).
    #[command(disable_help_flag = true)]
    Ctl(ctl::CtlCommandLine),
}

/// Runs the parsed command.
pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Policy(cmd) => policy::run(cmd, &cli.sandbox),
        Command::Simulate(args) => simulate::run(args, &cli.sandbox),
        Command::Sweep(args) => sweep::run(args, &cli.sandbox),
        Command::Crd => kube::crd(),
        Command::Run(cmd) => cmd.run(&cli.sandbox),
        Command::Replay(args) => replay::run(args, &cli.sandbox),
        Command::Openapi(args) => openapi::run(args),
        Command::Ctl(args) => ctl::run(args),
    }
}

/// Logs go to standard error so command output stays clean on standard output.
/// Without SWITCHYARD_LOG, the live controller (`run`) reports uploads, swaps, refusals
/// and leadership at info, and every other command only warnings. Colours only on a
/// terminal (and not under `NO_COLOR`): a file, a pipe or `kubectl logs` gets plain text.
pub(crate) fn init_tracing(json: bool, live: bool) {
    let default = if live { LIVE_LOG_DEFAULT } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// `switchyard run`: the two backends take different flags, so the cluster is read first
/// and the rest is parsed by the backend's own argument set.
#[derive(Debug, clap::Args)]
pub(crate) struct RunCommand {
    /// `kube`, or `sim:WORKLOAD.yaml`; absent only with `--help`, which then lists both
    /// backends' flags.
    #[arg(long, value_name = "kube|sim:WORKLOAD")]
    pub cluster: Option<String>,
    /// The backend's own flags.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

/// What `run --help` says about logging, for both backends.
const LOGGING_HELP: &str = "Logging: the controller writes to standard error what SWITCHYARD_LOG \
selects, a tracing filter such as `info`, `debug` or `switchyard=debug,kube=warn`. The default \
logs switchyard's own info lines (uploads, activations, swaps, refusals, leadership) and \
other crates' warnings; SWITCHYARD_LOG=warn keeps only warnings.";

/// The live controller's filter when SWITCHYARD_LOG is unset.
const LIVE_LOG_DEFAULT: &str =
    "warn,switchyard=info,switchyard_control=info,switchyard_kube=info,switchyard_runtime=info";

#[derive(Debug, Parser)]
#[command(name = "switchyard run", after_help = LOGGING_HELP)]
struct KubeRun {
    #[command(flatten)]
    args: kube::RunArgs,
}

#[derive(Debug, Parser)]
#[command(name = "switchyard run", after_help = LOGGING_HELP)]
struct SimRun {
    #[command(flatten)]
    args: run::RunArgs,
}

impl RunCommand {
    fn run(self, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
        let Some(cluster) = self.cluster else {
            if self.rest.iter().any(|a| a == "--help" || a == "-h") {
                print_both_helps()?;
                return Ok(ExitCode::SUCCESS);
            }
            anyhow::bail!(
                "switchyard run needs --cluster: `sim:WORKLOAD.yaml` (the embedded simulator) \
                 or `kube` (a real cluster); `switchyard run --help` lists the flags of both"
            );
        };
        let argv = [
            "switchyard run".to_string(),
            "--cluster".into(),
            cluster.clone(),
        ]
        .into_iter()
        .chain(self.rest);
        if cluster == "kube" {
            let parsed = KubeRun::try_parse_from(argv).unwrap_or_else(|e| e.exit());
            kube::run(parsed.args, sandbox)
        } else {
            let parsed = SimRun::try_parse_from(argv).unwrap_or_else(|e| e.exit());
            run::run(parsed.args, sandbox)
        }
    }
}

/// `switchyard run --help` without a cluster: each backend's flags in turn.
fn print_both_helps() -> std::io::Result<()> {
    use clap::CommandFactory;
    println!(
        "switchyard run: the live controller. --cluster chooses where it runs, and each \
         cluster takes its own flags.\n\n\
         == switchyard run --cluster sim:WORKLOAD.yaml: on the embedded simulator ==\n"
    );
    SimRun::command().print_help()?;
    println!("\n\n== switchyard run --cluster kube: on a Kubernetes cluster ==\n");
    KubeRun::command().print_help()?;
    println!();
    Ok(())
}
