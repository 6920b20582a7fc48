//! `switchyard run`: the live controller (HTTP API, policy loading, hot swap, A/B)
//! against a cluster. This file holds the flags both backends share and the simulator's
//! wiring (`--cluster sim:WORKLOAD.yaml`); `--cluster kube` is wired in `kube.rs`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use switchyard_control::RecordOptions;
use switchyard_controller::{
    ApiConfig, Controller, DirWatcher, LiveConfig, PolicyDir, Token, watch_policy_dir,
};
use switchyard_sim::Workload;

use super::SandboxArgs;
use super::input_limits::InputLimitArgs;
use super::registry::RegistryArgs;
use super::size::parse_size;

mod http_limits;

use http_limits::HttpLimitArgs;

/// The live controller's flags, the same for every cluster.
#[derive(Debug, clap::Args)]
pub(super) struct LiveArgs {
    /// A watched directory of `.wasm` policies and a `settings.yaml` (a mounted ConfigMap).
    #[arg(long, value_name = "DIR")]
    pub policies_dir: Option<PathBuf>,
    /// File holding the bearer token of mutating API calls (a mounted Secret). Without
    /// it, mutating calls are refused.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The policy active at start (unless the persisted state remembers another).
    #[arg(
        long,
        default_value = "default",
        env = "SWITCHYARD_POLICY",
        value_name = "NAME"
    )]
    pub policy: String,
    /// Policy that decides a round when another fails.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub fallback: String,
    /// Largest policy upload, MiB.
    #[arg(long, default_value_t = switchyard_controller::DEFAULT_MAX_UPLOAD_BYTES >> 20, value_name = "MIB")]
    pub max_upload_mib: usize,
    /// Decision records kept for GET /v1/decisions.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub keep_decisions: usize,
    /// Seed of the policies' randomness (the simulator: overrides the workload's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Record every round (snapshot changes, decisions, outcomes) to this directory,
    /// for `switchyard replay` (docs/recording.md).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// The most the recording directory may hold; the oldest segments are deleted to
    /// stay within it. Bytes, or with a unit: `500MiB`, `2GiB`, `1GB`.
    #[arg(long, default_value = "1GiB", value_name = "SIZE", value_parser = parse_size, requires = "record")]
    pub record_max_bytes: u64,
    #[command(flatten)]
    pub http: HttpLimitArgs,
    /// How policies named by reference (`oci://...`, in the API, `ctl upload`, the
    /// policies directory's settings and the kept state) are pulled; the largest one
    /// pulled is --max-upload-mib.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

impl LiveArgs {
    /// The controller's configuration; `seed` when --seed is not given. `cluster` names
    /// the cluster in a recording's header.
    pub(super) fn config(
        &self,
        seed: u64,
        cluster: &str,
        sandbox: &SandboxArgs,
    ) -> anyhow::Result<LiveConfig> {
        let seed = self.seed.unwrap_or(seed);
        let max_upload_bytes = (self.max_upload_mib as u64).saturating_mul(1 << 20);
        Ok(LiveConfig {
            policy: self.policy.clone(),
            fallback: self.fallback.clone(),
            keep_decisions: self.keep_decisions,
            seed,
            record: self.record.as_ref().map(|dir| RecordOptions {
                dir: dir.clone(),
                max_bytes: self.record_max_bytes,
                cluster: cluster.to_string(),
                seed,
            }),
            disruption: sandbox.disruption.budget()?,
            registry: Some(self.registry.access(sandbox, max_upload_bytes)?),
            ..LiveConfig::default()
        })
    }

    /// The API's configuration. With `missing_is_read_only`, a token file that does not
    /// exist (an optional Secret not created) leaves the API read-only until it appears,
    /// instead of failing.
    pub(super) fn api(&self, missing_is_read_only: bool) -> anyhow::Result<ApiConfig> {
        let token = match &self.token_file {
            Some(path) if missing_is_read_only && !path.exists() => {
                tracing::warn!(path = %path.display(), "the token file does not exist: the API is read-only until it does");
                Some(Token::watching(path))
            }
            Some(path) => Some(Token::from_file(path)?),
            None => {
                tracing::warn!("no --token-file: the API is read-only");
                None
            }
        };
        Ok(ApiConfig {
            token,
            max_upload_bytes: self.max_upload_mib << 20,
            limits: self.http.limits()?,
        })
    }
}

/// Arguments of `run --cluster sim:WORKLOAD`.
#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    /// The cluster: `sim:WORKLOAD.yaml` runs the embedded simulator on that workload.
    #[arg(long, value_name = "sim:WORKLOAD")]
    pub cluster: String,
    /// Virtual seconds per wall second.
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    pub speed: f64,
    /// Address of the HTTP API.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Directory where each policy's state blob and the active policy are kept, so a
    /// restart resumes them.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
    #[command(flatten)]
    pub input_limits: InputLimitArgs,
}

pub(super) fn run(args: RunArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let Some(workload) = args.cluster.strip_prefix("sim:") else {
        bail!(
            "--cluster {}: expected `sim:WORKLOAD.yaml` (the embedded simulator) or `kube`",
            args.cluster
        );
    };
    if !(args.speed.is_finite() && args.speed > 0.0) {
        bail!("--speed {} must be a positive number", args.speed);
    }
    let workload = Workload::load_with(workload.as_ref(), args.input_limits.limits())?;
    let config = LiveConfig {
        speed: args.speed,
        state_dir: args.state_dir.clone(),
        ..args.live.config(workload.seed(), &args.cluster, sandbox)?
    };
    let scenario = workload.scenario(config.seed)?;
    let api_config = args.live.api(false)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let (controller, driver) = Controller::start_scenario(sandbox.runtime()?, scenario, config)?;
    let _watch = watch_policies(
        args.live.policies_dir.as_deref(),
        &controller,
        &runtime,
        api_config.max_upload_bytes,
    )?;
    let limits = api_config.limits.clone();
    let router = switchyard_controller::router(controller.clone(), api_config);
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let shutdown = shutdown_signal()?;
        eprintln!(
            "switchyard: controller on {} (speed {}x), API on http://{}",
            args.cluster,
            args.speed,
            listener.local_addr()?
        );
        switchyard_controller::serve(listener, router, controller, limits, shutdown)
            .await
            .context("serving the API")
    })?;
    driver.shutdown();
    Ok(ExitCode::SUCCESS)
}

/// Starts following `dir` (when given); the first scan's refusals are printed.
pub(super) fn watch_policies(
    dir: Option<&Path>,
    controller: &Controller,
    runtime: &tokio::runtime::Runtime,
    max_file_bytes: usize,
) -> anyhow::Result<Option<DirWatcher>> {
    let Some(dir) = dir else { return Ok(None) };
    let dir = PolicyDir::new(dir, controller.clone(), runtime.handle().clone())?
        .max_file_bytes(max_file_bytes);
    let (watcher, first) = watch_policy_dir(dir)?;
    for (source, error) in &first.refused {
        eprintln!("refused {source}: {error}");
    }
    Ok(Some(watcher))
}

/// Installs the SIGINT and SIGTERM (what the kubelet and most process managers send)
/// handlers now, and resolves on the first of them: both shut the controller down
/// gracefully. Installing before the controller announces itself means a signal sent
/// as soon as the address is printed is never missed. Call it inside the runtime.
pub(super) fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt =
            signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = term.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
