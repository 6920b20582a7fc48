//! Running the controller in a cluster: connect (kubeconfig, or in-cluster), start the
//! reflectors, the metrics poller and the leader election, start the live controller
//! ([`Controller`], the same one the simulator runs under) over [`KubeCluster`] with its
//! state and uploads kept in ConfigMaps, follow the policies directory, serve the HTTP
//! API (which also answers the probes) and, when configured, the pod webhook on every
//! replica, and stop everything when the shutdown future resolves (SIGTERM/SIGINT in `main`; anything in tests). It wires; the pieces do the
//! work.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::events::Reporter;

use switchyard_kube::{
    Actor, CALL_TIMEOUT, Caches, ConfigMapStateStore, KubeCluster, LeaderLabel, LeadershipLost,
    LeaseLock,
};

use crate::api::{self, ApiConfig};
use crate::live::{Controller, LiveConfig};
use crate::policy_dir::{self, PolicyDir};
use crate::webhook::{Webhook, WebhookConfig};
use switchyard_control::Leader;
use switchyard_runtime::Runtime;

/// How often the leader label is brought in step with the grant: well inside the
/// Lease's renewal period, so the Service follows a change of leader within a second.
const LEADER_LABEL_EVERY: Duration = Duration::from_secs(1);

/// Why the controller in a cluster stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum InClusterError {
    /// The API's port could not be opened.
    #[error("cannot listen on {addr} for the API and the probes: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The control loop's thread panicked.
    #[error("the control loop stopped abnormally: {0}")]
    LoopPanicked(#[source] tokio::task::JoinError),
    /// The live controller could not start (a policy named on the command line is not
    /// loaded, say).
    #[error("starting the controller: {0}")]
    Live(#[source] crate::live::LiveError),
    /// The policies directory cannot be followed.
    #[error(transparent)]
    PolicyDir(crate::policy_dir::PolicyDirError),
    /// The pod webhook could not start (its certificate, its port).
    #[error(transparent)]
    Webhook(crate::webhook::WebhookError),
    /// Serving the API failed.
    #[error("serving the API: {0}")]
    Serve(#[source] std::io::Error),
    /// This replica led and lost the lead; it stopped so that a fresh process follows.
    #[error("lost the leader election; exiting so that a fresh process starts as a follower")]
    LostLeadership,
}

impl InClusterError {
    /// A short label for metrics, one per variant.
    pub fn metric_label(&self) -> &'static str {
        match self {
            InClusterError::Listen { .. } => "listen",
            InClusterError::LoopPanicked(_) => "loop_panicked",
            InClusterError::Live(_) => "live",
            InClusterError::PolicyDir(_) => "policy_dir",
            InClusterError::Webhook(error) => error.metric_label(),
            InClusterError::Serve(_) => "serve",
            InClusterError::LostLeadership => "lost_leadership",
        }
    }
}

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct InClusterOptions {
    /// This replica's identity (the pod name).
    pub identity: String,
    /// This replica's own pod, labelled while it leads (see
    /// [`switchyard_kube::LeaderLabel`]); `None` outside a pod.
    pub own_pod: Option<String>,
    /// The controller's namespace: the Lease, the state ConfigMap and the pod the
    /// controller's own Events are about.
    pub namespace: String,
    /// Name of the leader-election Lease.
    pub lease_name: String,
    /// How long a Lease holds without renewal.
    pub lease_duration: Duration,
    /// Name of the ConfigMap holding policy state.
    pub state_configmap: String,
    /// The controller class whose TrainingJobs this installation acts on.
    pub controller_class: String,
    /// The kinds of job whose gated pods of [`InClusterOptions::queue`] are adopted
    /// (none: no adoption).
    pub integrations: Vec<switchyard_kube::Integration>,
    /// The queue whose pods this installation adopts (the pods' `switchyard.dev/queue`
    /// label).
    pub queue: String,
    /// How often usage is read from `metrics.k8s.io`.
    pub metrics_every: Duration,
    /// Where the HTTP API (and the probes) listen.
    pub listen: SocketAddr,
    /// The mounted policy ConfigMap, if any.
    pub policies_dir: Option<PathBuf>,
    /// The live controller's settings.
    pub live: LiveConfig,
    /// The API's settings.
    pub api: ApiConfig,
    /// The pod webhook's, when it is served.
    pub webhook: Option<WebhookConfig>,
}

/// Runs the live controller against the cluster behind `client`, policies compiled by
/// `runtime`, until `shutdown` resolves.
pub async fn run_in_cluster(
    client: Client,
    runtime: Runtime,
    options: InClusterOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), InClusterError> {
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| InClusterError::Listen {
            addr: options.listen,
            source,
        })?;
    // The webhook needs nothing of the cluster: it answers from the start, on every
    // replica, until the API stops.
    let (webhook_stop, webhook_stopping) = tokio::sync::oneshot::channel::<()>();
    let webhook = match &options.webhook {
        Some(config) => {
            let webhook = Webhook::bind(config)
                .await
                .map_err(InClusterError::Webhook)?;
            tracing::info!(addr = %config.listen, queue = config.queue, "serving the pod webhook");
            Some(tokio::spawn(webhook.serve(async move {
                let _ = webhook_stopping.await;
            })))
        }
        None => None,
    };
    let (caches, drivers) = Caches::start(&client);
    let (adoption, adopting) = switchyard_kube::Adoption::start(
        &client,
        &options.integrations,
        &options.queue,
        caches.changed.clone(),
    );
    let caches = caches
        .of_class(&options.controller_class)
        .with_adoption(adoption);
    let mut tasks: Vec<tokio::task::JoinHandle<()>> = drivers
        .into_iter()
        .chain(adopting)
        .map(tokio::spawn)
        .collect();

    {
        let (client, caches, every) = (client.clone(), caches.clone(), options.metrics_every);
        tasks.push(tokio::spawn(async move {
            loop {
                let fetched =
                    tokio::time::timeout(CALL_TIMEOUT, switchyard_kube::fetch_usage(&client));
                let usage = match fetched.await {
                    Ok(Ok(usage)) => usage,
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "reading metrics.k8s.io");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(timeout = ?CALL_TIMEOUT, "metrics.k8s.io did not answer");
                        None
                    }
                };
                *caches.usage.lock().expect("usage lock") = usage.map(Arc::new);
                tokio::time::sleep(every).await;
            }
        }));
    }

    let leader = Arc::new(Leader::elected(&options.identity));
    let lock = LeaseLock::new(
        Api::<Lease>::namespaced(client.clone(), &options.namespace),
        &options.lease_name,
        &options.identity,
        options.lease_duration,
    );
    if let Some(pod) = &options.own_pod {
        let label = LeaderLabel::new(Api::namespaced(client.clone(), &options.namespace), pod);
        tasks.push(tokio::spawn(switchyard_kube::keep_marked(
            label,
            leader.clone(),
            LEADER_LABEL_EVERY,
        )));
    }
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<LeadershipLost>();
    {
        // The election starts only once every reflector has listed: a leader acting on
        // an empty pod cache would place running jobs again and finish restarts whose
        // old pods still run. Until then this replica is a follower and not ready.
        let (caches, lock, leader) = (caches.clone(), lock.clone(), leader.clone());
        tasks.push(tokio::spawn(async move {
            if caches.wait_synced().await {
                tracing::info!("caches synced; joining the election");
                let lost = switchyard_kube::keep_leading(lock, leader).await;
                let _ = lost_tx.send(lost);
            }
        }));
    }

    let handle = tokio::runtime::Handle::current();
    let reporter = Reporter {
        controller: "switchyard".into(),
        instance: Some(options.identity.clone()),
    };
    let cluster = KubeCluster::new(
        handle.clone(),
        client.clone(),
        caches,
        // Its status writes carry the Lease term it leads under: a newer leader's
        // status stops it at the API server.
        Actor::new(client.clone(), reporter.clone()).with_term(lock.term()),
        leader.clone(),
    );
    let store = ConfigMapStateStore::new(
        handle.clone(),
        client.clone(),
        &options.namespace,
        &options.state_configmap,
    );
    let (live, started_leader) = (options.live.clone(), leader.clone());
    let (controller, driver) = tokio::task::spawn_blocking(move || {
        let components = Arc::new(store.clone());
        Controller::start(
            runtime,
            cluster,
            live,
            Box::new(store),
            components,
            started_leader,
        )
    })
    .await
    .map_err(InClusterError::LoopPanicked)?
    .map_err(InClusterError::Live)?;
    controller.on_refusal(switchyard_kube::refusal_events(
        handle.clone(),
        client.clone(),
        reporter,
        &options.namespace,
        &options.identity,
    ));

    let watcher = match options.policies_dir.clone() {
        Some(dir) => {
            let (controller, handle) = (controller.clone(), handle.clone());
            let limit = options.api.max_upload_bytes;
            let (watcher, first) = tokio::task::spawn_blocking(move || {
                policy_dir::watch_policy_dir(
                    PolicyDir::new(&dir, controller, handle)?.max_file_bytes(limit),
                )
            })
            .await
            .map_err(InClusterError::LoopPanicked)?
            .map_err(InClusterError::PolicyDir)?;
            for (source, error) in &first.refused {
                tracing::warn!(source, error, "refused from the policies directory");
            }
            Some(watcher)
        }
        None => None,
    };

    tracing::info!(addr = %options.listen, identity = options.identity, "serving the API; electing a leader");
    let router = api::router(controller.clone(), options.api.clone());
    // A replica that led and lost the lead stops: what it remembers (deletes sent, pods
    // assumed, restarts half-way) may be out of date, and a fresh process starts as a
    // follower on fresh caches.
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = {
        let lost = lost.clone();
        async move {
            tokio::select! {
                () = shutdown => {}
                Ok(LeadershipLost) = lost_rx => {
                    tracing::error!("lost the lead; stopping so that a fresh process follows");
                    lost.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
    };
    let served = api::serve(
        listener,
        router,
        controller.clone(),
        options.api.limits.clone(),
        stop,
    )
    .await;
    tracing::info!("shutting down");
    drop(webhook_stop);
    if let Some(webhook) = webhook {
        match webhook.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "serving the pod webhook"),
            Err(error) => tracing::warn!(%error, "the pod webhook stopped abnormally"),
        }
    }
    // Stop deciding first, then stop acting, then hand the Lease over.
    tokio::task::spawn_blocking(move || {
        driver.shutdown();
        drop(watcher);
    })
    .await
    .map_err(InClusterError::LoopPanicked)?;
    for task in &tasks {
        task.abort();
    }
    let led = leader.is_leading() || lost.load(std::sync::atomic::Ordering::SeqCst);
    if let (true, Some(pod)) = (led, &options.own_pod) {
        // Off the Service before the Lease is handed over, so no change request reaches
        // a replica on its way out.
        let label = LeaderLabel::new(Api::namespaced(client.clone(), &options.namespace), pod);
        match tokio::time::timeout(CALL_TIMEOUT, label.mark(false)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "removing the leader label"),
            Err(_) => tracing::warn!("removing the leader label did not answer"),
        }
    }
    if leader.is_leading() {
        leader.follow(None);
        // Within the pod's grace period: a release that does not answer is left to
        // expire.
        match tokio::time::timeout(CALL_TIMEOUT, lock.release()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "releasing the Lease"),
            Err(_) => tracing::warn!("releasing the Lease did not answer; it will expire"),
        }
    }
    served.map_err(InClusterError::Serve)?;
    if lost.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(InClusterError::LostLeadership);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::policy_dir::DirSettings;

    const CONFIGMAP: &str = include_str!("../../../deploy/configmap.yaml");

    #[test]
    fn the_deployed_policy_configmap_holds_settings_the_policies_directory_accepts() {
        let configmap: serde_json::Value = serde_norway::from_str(CONFIGMAP).unwrap();
        let text = configmap["data"]["settings.yaml"]
            .as_str()
            .expect("deploy/configmap.yaml has data.settings.yaml");
        let settings = DirSettings::parse(text).expect("the settings parse");
        assert_eq!(settings.active.as_deref(), Some("specon"));
    }
}
