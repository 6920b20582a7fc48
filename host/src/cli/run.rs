//! `switchyard run`: the live controller (HTTP API, policy loading, hot swap, A/B)
//! against a cluster. Today the cluster is the embedded simulator in scaled real time
//! (`--cluster sim:WORKLOAD.yaml`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use switchyard::api::{self, ApiConfig, Token};
use switchyard::live::{Controller, LiveConfig};
use switchyard::policy_dir::{self, PolicyDir};
use switchyard::sim::Simulator;
use switchyard::workload::Workload;

use super::SandboxArgs;

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The cluster: `sim:WORKLOAD.yaml` runs the embedded simulator on that workload.
    #[arg(long, value_name = "sim:WORKLOAD")]
    pub cluster: String,
    /// Virtual seconds per wall second (simulator only).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    pub speed: f64,
    /// Address of the HTTP API.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// A watched directory of `.wasm` policies and a `settings.yaml` (a mounted ConfigMap).
    #[arg(long, value_name = "DIR")]
    pub policies_dir: Option<PathBuf>,
    /// File holding the bearer token of mutating API calls (a mounted Secret). Without
    /// it, mutating calls are refused.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Directory where each policy's state blob and the active policy are kept, so a
    /// restart resumes them.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The policy active at start (unless --state-dir remembers another).
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub policy: String,
    /// Policy that decides a round when another fails.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub fallback: String,
    /// Largest policy upload, MiB.
    #[arg(long, default_value_t = 16, value_name = "MIB")]
    pub max_upload_mib: usize,
    /// Decision records kept for GET /v1/decisions.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub keep_decisions: usize,
    /// Seed (overrides the workload's).
    #[arg(long)]
    pub seed: Option<u64>,
}

pub fn run(args: RunArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let Some(workload) = args.cluster.strip_prefix("sim:") else {
        bail!(
            "--cluster {}: only the simulator is available in this build; use \
             `--cluster sim:WORKLOAD.yaml`",
            args.cluster
        );
    };
    if !(args.speed.is_finite() && args.speed > 0.0) {
        bail!("--speed {} must be a positive number", args.speed);
    }
    let workload = Workload::load(workload.as_ref())?;
    let seed = args.seed.unwrap_or(workload.seed());
    let simulator = Simulator::new(workload.scenario(seed)?);
    let token = args
        .token_file
        .as_deref()
        .map(Token::from_file)
        .transpose()?;
    if token.is_none() {
        tracing::warn!("no --token-file: the API is read-only");
    }
    let config = LiveConfig {
        speed: args.speed,
        policy: args.policy.clone(),
        fallback: args.fallback.clone(),
        state_dir: args.state_dir.clone(),
        keep_decisions: args.keep_decisions,
        seed,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (controller, driver) = Controller::start_simulated(sandbox.runtime()?, simulator, config)?;
    let _watch = match &args.policies_dir {
        Some(dir) => {
            let dir = PolicyDir::new(dir, controller.clone(), runtime.handle().clone())?;
            let (watcher, first) = policy_dir::watch(dir)?;
            for (source, error) in &first.refused {
                eprintln!("refused {source}: {error}");
            }
            Some(watcher)
        }
        None => None,
    };
    let router = api::router(
        controller,
        ApiConfig {
            token,
            max_upload_bytes: args.max_upload_mib << 20,
        },
    );
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        eprintln!(
            "switchyard: controller on {} (speed {}x), API on http://{}",
            args.cluster,
            args.speed,
            listener.local_addr()?
        );
        api::serve(listener, router, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving the API")
    })?;
    driver.shutdown();
    Ok(ExitCode::SUCCESS)
}
