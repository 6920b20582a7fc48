//! Running the controller in a cluster: connect (kubeconfig, or in-cluster), start the
//! reflectors, the metrics poller, the leader election and the probes, run the control
//! loop on a blocking thread over [`KubeCluster`], and stop everything when the shutdown
//! future resolves (SIGTERM/SIGINT in `main`; anything in tests). It wires; the pieces
//! do the work.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::events::Reporter;
use tokio::sync::watch;

use super::act::Actor;
use super::cluster::KubeCluster;
use super::lease::{Leadership, LeaseLock};
use super::observe::{self, Caches};
use super::{Error, Result, health};
use crate::control::{ControlLoop, RunEnd};

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// This replica's identity (the pod name).
    pub identity: String,
    /// Namespace of the leader-election Lease.
    pub lease_namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// How long a Lease holds without renewal.
    pub lease_duration: Duration,
    /// Where the probes listen.
    pub health_addr: SocketAddr,
    /// How often usage is read from `metrics.k8s.io`.
    pub metrics_every: Duration,
}

/// Connects with the kubeconfig, or the in-cluster service account.
pub async fn connect() -> Result<Client> {
    Client::try_default().await.map_err(Error::Config)
}

/// Runs `control` against the cluster behind `client` until `shutdown` resolves.
pub async fn run(
    client: Client,
    options: Options,
    mut control: ControlLoop,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<RunEnd> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let (caches, drivers) = Caches::start(&client);
    let mut tasks: Vec<tokio::task::JoinHandle<()>> =
        drivers.into_iter().map(tokio::spawn).collect();

    let ready = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind(options.health_addr)
        .await
        .map_err(|source| Error::Listen {
            addr: options.health_addr,
            source,
        })?;
    let mut health_stop = stop_rx.clone();
    tasks.push(tokio::spawn(health::serve(
        listener,
        ready.clone(),
        async move {
            let _ = health_stop.wait_for(|s| *s).await;
        },
    )));

    {
        let (caches, ready) = (caches.clone(), ready.clone());
        tasks.push(tokio::spawn(async move {
            let synced = tokio::join!(
                caches.nodes.wait_until_ready(),
                caches.pods.wait_until_ready(),
                caches.jobs.wait_until_ready()
            );
            if synced.0.is_ok() && synced.1.is_ok() && synced.2.is_ok() {
                ready.store(true, Ordering::SeqCst);
            }
        }));
    }

    {
        let (client, caches, every) = (client.clone(), caches.clone(), options.metrics_every);
        tasks.push(tokio::spawn(async move {
            loop {
                let usage = observe::fetch_usage(&client).await.unwrap_or_else(|error| {
                    tracing::warn!(%error, "reading metrics.k8s.io");
                    None
                });
                *caches.usage.lock().expect("usage lock") = usage;
                tokio::time::sleep(every).await;
            }
        }));
    }

    let leading = Arc::new(AtomicBool::new(false));
    let lock = LeaseLock::new(
        Api::<Lease>::namespaced(client.clone(), &options.lease_namespace),
        &options.lease_name,
        &options.identity,
        options.lease_duration,
    );
    {
        let (lock, leading) = (lock.clone(), leading.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let now = k8s_openapi::jiff::Timestamp::now();
                let state = lock.try_acquire_or_renew(now).await;
                let lead = matches!(state, Ok(Leadership::Leading));
                if leading.swap(lead, Ordering::SeqCst) != lead {
                    tracing::info!(leading = lead, "leadership changed");
                }
                if let Err(error) = state {
                    tracing::warn!(%error, "leader election");
                }
                tokio::time::sleep(lock.renew_every()).await;
            }
        }));
    }

    let reporter = Reporter {
        controller: "switchyard".into(),
        instance: Some(options.identity.clone()),
    };
    let actor = Actor::new(client.clone(), reporter);
    let cluster = KubeCluster::new(
        tokio::runtime::Handle::current(),
        client,
        caches,
        actor,
        leading.clone(),
        stop_rx,
    );
    let mut looping = tokio::task::spawn_blocking(move || {
        let mut cluster = cluster;
        control.run(&mut cluster, |_| {})
    });
    let end = tokio::select! {
        end = &mut looping => end,
        _ = shutdown => {
            tracing::info!("shutting down");
            let _ = stop_tx.send(true);
            looping.await
        }
    };
    let _ = stop_tx.send(true);
    for task in &tasks {
        task.abort();
    }
    if leading.load(Ordering::SeqCst)
        && let Err(error) = lock.release().await
    {
        tracing::warn!(%error, "releasing the Lease");
    }
    end.map_err(Error::LoopPanicked)
}
