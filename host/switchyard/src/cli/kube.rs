//! `switchyard crd` (print the TrainingJob CRD) and `switchyard run --cluster kube`
//! (the live controller in a cluster). Parsing and wiring only; the work is in
//! `switchyard_kube`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use switchyard_controller::{InClusterOptions, WebhookConfig, run_in_cluster};
use switchyard_kube::{DEFAULT_CONTROLLER_CLASS, DEFAULT_QUEUE, Integration, STATE_CONFIGMAP};

use super::SandboxArgs;
use super::run::{LiveArgs, shutdown_signal};

/// Which cluster `run` drives.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(super) enum ClusterKind {
    /// The Kubernetes cluster of the kubeconfig, or the one the pod runs in.
    Kube,
}

/// Arguments of `run --cluster kube`.
#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    /// The cluster to schedule.
    #[arg(long, value_enum)]
    pub cluster: ClusterKind,
    /// Address of the HTTP API, which also answers /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// This replica's identity in leader election (the pod name). When it comes from
    /// POD_NAME, the leader also labels that pod `switchyard.dev/leader=true`, which the
    /// Service in deploy/ selects on.
    #[arg(long, env = "POD_NAME", default_value = "switchyard-local")]
    pub identity: String,
    /// The controller's namespace: its Lease, its state ConfigMap, its pod's Events.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "switchyard",
        alias = "lease-namespace"
    )]
    pub namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "switchyard-leader")]
    pub lease_name: String,
    /// Name of the ConfigMap that keeps each policy's state blob and the active policy.
    #[arg(long, default_value = STATE_CONFIGMAP)]
    pub state_configmap: String,
    /// The TrainingJobs this installation acts on: those whose `spec.managedBy` is this
    /// class (a job without one belongs to the default class). Two installations in one
    /// cluster need two classes; each leaves the other's jobs alone.
    #[arg(long, env = "SWITCHYARD_CONTROLLER_CLASS", default_value = DEFAULT_CONTROLLER_CLASS)]
    pub controller_class: String,
    /// Kinds of job to adopt: job (batch/v1 Job), jobset (JobSet, and Kubeflow Trainer
    /// TrainJobs through their JobSets), pytorchjob (Kubeflow PyTorchJob). A comma list,
    /// and the flag may be repeated. A pod is adopted when its template carries the
    /// scheduling gate switchyard.dev/placement and the label switchyard.dev/queue
    /// naming --queue; the job's own operator keeps creating its pods. Default: none.
    #[arg(long, value_name = "KINDS", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub integrations: Vec<Integration>,
    /// The queue this installation adopts pods from: the value of their
    /// switchyard.dev/queue label. Pods of another queue are left to the installation
    /// that serves it.
    #[arg(long, default_value = DEFAULT_QUEUE, value_parser = parse_queue)]
    pub queue: String,
    /// Serve the pod webhook over HTTPS with the certificate in DIR (tls.crt and
    /// tls.key, as cert-manager writes them into a Secret; read again when they change).
    /// It adds the scheduling gate switchyard.dev/placement to the pods created with the
    /// label switchyard.dev/queue naming --queue, so the label alone adopts a job
    /// (deploy/webhook/). Every replica serves it. Default: no webhook.
    #[arg(long, value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// The webhook's port, on the address of --listen.
    #[arg(long, default_value_t = switchyard_controller::DEFAULT_WEBHOOK_PORT, value_name = "PORT", requires = "webhook_cert_dir")]
    pub webhook_port: u16,
    #[command(flatten)]
    pub live: LiveArgs,
}

impl RunArgs {
    /// The webhook's settings, when --webhook-cert-dir is given.
    fn webhook(&self) -> Option<WebhookConfig> {
        self.webhook_cert_dir.as_ref().map(|dir| WebhookConfig {
            listen: SocketAddr::new(self.listen.ip(), self.webhook_port),
            cert_dir: dir.clone(),
            queue: self.queue.clone(),
        })
    }
}

/// A `--queue`, checked to be a label value.
fn parse_queue(queue: &str) -> Result<String, switchyard_kube::InvalidQueue> {
    switchyard_kube::valid_queue(queue).map(str::to_string)
}

/// Prints the CRD.
pub(super) fn crd() -> anyhow::Result<ExitCode> {
    print!("{}", switchyard_kube::crd_yaml());
    Ok(ExitCode::SUCCESS)
}

/// Runs the controller until SIGTERM or SIGINT.
pub(super) fn run(args: RunArgs, sandbox: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let ClusterKind::Kube = args.cluster;
    let options = InClusterOptions {
        identity: args.identity.clone(),
        // In a pod (the downward API set POD_NAME) the leader labels its own pod so the
        // Service reaches it alone; run from a workstation there is no pod to label.
        own_pod: std::env::var_os("POD_NAME")
            .is_some()
            .then(|| args.identity.clone()),
        namespace: args.namespace.clone(),
        lease_name: args.lease_name.clone(),
        lease_duration: Duration::from_secs(15),
        state_configmap: args.state_configmap.clone(),
        controller_class: args.controller_class.clone(),
        integrations: args.integrations.clone(),
        queue: args.queue.clone(),
        metrics_every: Duration::from_secs(30),
        listen: args.listen,
        policies_dir: args.live.policies_dir.clone(),
        live: args.live.config(0, "kube", sandbox)?,
        // An optional Secret that was not created leaves the API read-only.
        api: args.live.api(true)?,
        webhook: args.webhook(),
    };
    let runtime = sandbox.runtime()?;
    let tokio = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    tokio.block_on(async {
        let client = switchyard_kube::connect().await?;
        run_in_cluster(client, runtime, options, shutdown_signal()?).await?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use switchyard_kube::Integration;

    #[derive(Debug, Parser)]
    struct Run {
        #[command(flatten)]
        args: super::RunArgs,
    }

    fn parse(extra: &[&str]) -> Result<super::RunArgs, String> {
        let argv = ["switchyard run", "--cluster", "kube"].iter().chain(extra);
        Run::try_parse_from(argv)
            .map(|r| r.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn integrations_are_a_comma_list_that_each_deploy_component_may_add_to() {
        let args = parse(&["--integrations", "job,jobset", "--integrations=pytorchjob"]).unwrap();
        assert_eq!(
            args.integrations,
            [
                Integration::Job,
                Integration::JobSet,
                Integration::PyTorchJob
            ]
        );
        assert_eq!(args.queue, "default");
        assert!(
            parse(&[]).unwrap().integrations.is_empty(),
            "no adoption by default"
        );
        let error = parse(&["--integrations", "job,tfjob"]).unwrap_err();
        assert!(
            error.contains("unknown integration `tfjob`: accepted are job, jobset, pytorchjob"),
            "{error}"
        );
    }

    #[test]
    fn the_webhook_is_off_unless_its_certificate_directory_is_given_and_serves_beside_the_api() {
        assert!(parse(&[]).unwrap().webhook().is_none());
        let on = parse(&["--webhook-cert-dir", "/certs", "--listen", "[::]:8080"]).unwrap();
        let config = on.webhook().unwrap();
        assert_eq!(config.listen, "[::]:9443".parse().unwrap());
        assert_eq!(config.cert_dir, std::path::Path::new("/certs"));
        assert_eq!(config.queue, "default");
        let error = parse(&["--webhook-port", "8443"]).unwrap_err();
        assert!(error.contains("--webhook-cert-dir"), "{error}");
    }

    #[test]
    fn a_queue_that_cannot_be_a_label_value_is_refused() {
        assert_eq!(parse(&["--queue", "team-a"]).unwrap().queue, "team-a");
        let error = parse(&["--queue", "team a"]).unwrap_err();
        assert!(error.contains("is not a label value"), "{error}");
    }
}
