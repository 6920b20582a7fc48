//! `switchyard crd` (print the TrainingJob CRD) and `switchyard run --cluster kube`
//! (the controller in a cluster). Parsing and wiring only; the work is in
//! `switchyard::kube`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use switchyard::control::{ControlLoop, PolicySlot};
use switchyard::kube::run::{self, Options};
use switchyard::registry::PolicyRef;

use super::SandboxArgs;

/// Which cluster `run` drives.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ClusterKind {
    /// The Kubernetes cluster of the kubeconfig, or the one the pod runs in.
    Kube,
}

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The cluster to schedule.
    #[arg(long, value_enum)]
    pub cluster: ClusterKind,
    /// The active policy: a built-in name or a `.wasm` file.
    #[arg(
        long,
        default_value = "default",
        env = "SWITCHYARD_POLICY",
        value_name = "NAME|FILE.wasm"
    )]
    pub policy: String,
    /// A YAML map of the policy's settings (the ConfigMap's `settings.yaml`).
    #[arg(long, env = "SWITCHYARD_SETTINGS", value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Policy that decides a round when the active one fails.
    #[arg(long, default_value = "default", value_name = "NAME|FILE.wasm")]
    pub fallback: String,
    /// This replica's identity in leader election.
    #[arg(long, env = "POD_NAME", default_value = "switchyard-local")]
    pub identity: String,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "switchyard")]
    pub lease_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "switchyard-leader")]
    pub lease_name: String,
    /// Address of /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub health_addr: SocketAddr,
    /// Seed of the policies' randomness.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Prints the CRD.
pub fn crd() -> anyhow::Result<ExitCode> {
    print!("{}", switchyard::kube::crd::crd_yaml());
    Ok(ExitCode::SUCCESS)
}

/// Runs the controller until SIGTERM or SIGINT.
pub fn run(args: RunArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let ClusterKind::Kube = args.cluster;
    let settings: BTreeMap<String, String> = match &args.settings {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_norway::from_str(&text).with_context(|| {
                format!(
                    "{}: expected a YAML map of setting name to value (strings)",
                    path.display()
                )
            })?
        }
        None => BTreeMap::new(),
    };
    let runtime = sandbox.runtime()?;
    let active = PolicySlot::configure(PolicyRef::parse(&args.policy)?.load(&runtime)?, &settings)
        .with_context(|| format!("configuring {}", args.policy))?;
    let fallback = PolicySlot::configure(
        PolicyRef::parse(&args.fallback)?.load(&runtime)?,
        &BTreeMap::new(),
    )
    .with_context(|| format!("configuring {}", args.fallback))?;
    let control = ControlLoop::new(active, fallback, args.seed).keep_records(false);
    let options = Options {
        identity: args.identity,
        lease_namespace: args.lease_namespace,
        lease_name: args.lease_name,
        lease_duration: Duration::from_secs(15),
        health_addr: args.health_addr,
        metrics_every: Duration::from_secs(30),
    };
    let tokio = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    tokio.block_on(async {
        let client = run::connect().await?;
        run::run(client, options, control, shutdown_signal()).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Resolves on SIGINT, or on SIGTERM (what the kubelet sends) on Unix.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
