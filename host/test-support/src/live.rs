//! Starting the live controller on the simulator with its HTTP API on an ephemeral
//! loopback port, and talking to it, for the integration tests. It checks only that its
//! own requests succeed; what the controller does is for the tests to judge.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use switchyard_controller::{ApiConfig, Controller, DriverHandle, HttpLimits, LiveConfig, Token};
use switchyard_runtime::{Runtime, RuntimeOptions, SandboxLimits};
use switchyard_sim::Workload;
use tokio::sync::oneshot;

use crate::compile_cache::compile_cache_dir;

/// The API token of every controller [`start_live`] starts.
pub const TOKEN: &str = "test-token-5f0c";

/// A steady stream of one-core jobs that each run 20 virtual seconds: at a high speed
/// the controller decides hundreds of rounds per second.
pub const STREAM: &str = "
seed: 1
cluster:
  nodes:
    - {name: cpu, count: 4, cpus: 8, memory_gib: 32, labels: {pool: a}}
    - {name: big, count: 4, cpus: 8, memory_gib: 32, labels: {pool: b}}
templates:
  small: {work: 20, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none, checkpointable: false}
jobs:
  - {template: small, count: 200000, every: 1}
";

/// A running controller and a client for it.
pub struct Live {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// A client for it.
    pub client: reqwest::Client,
    /// The controller itself, for what the API does not show.
    pub controller: Controller,
    driver: Option<DriverHandle>,
    stop_server: Option<oneshot::Sender<()>>,
}

/// Starts the controller on `workload` at `speed`, with policy calls cut at `deadline`.
pub async fn start_live(workload: &str, speed: f64, deadline: Duration) -> Live {
    start_live_with(
        workload,
        LiveConfig {
            speed,
            keep_decisions: 1_000_000,
            ..LiveConfig::default()
        },
        deadline,
    )
    .await
}

/// Like [`start_live`], with the whole configuration.
pub async fn start_live_with(workload: &str, config: LiveConfig, deadline: Duration) -> Live {
    start_live_serving(workload, config, deadline, HttpLimits::default()).await
}

/// Like [`start_live_with`], with the HTTP API held to `limits`.
pub async fn start_live_serving(
    workload: &str,
    config: LiveConfig,
    deadline: Duration,
    limits: HttpLimits,
) -> Live {
    let runtime = Runtime::new(RuntimeOptions {
        limits: SandboxLimits {
            deadline,
            ..SandboxLimits::default()
        },
        cache_dir: Some(compile_cache_dir()),
        ..Default::default()
    })
    .unwrap();
    let scenario = Workload::parse(workload, Path::new("test.yaml"))
        .unwrap()
        .scenario(1)
        .unwrap();
    let (controller, driver) = tokio::task::spawn_blocking(move || {
        Controller::start_scenario(runtime, scenario, config).unwrap()
    })
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = switchyard_controller::router(
        controller.clone(),
        ApiConfig {
            token: Token::new(TOKEN),
            max_upload_bytes: 4 << 20,
            limits: limits.clone(),
        },
    );
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(switchyard_controller::serve(
        listener,
        router,
        controller.clone(),
        limits,
        async {
            let _ = rx.await;
        },
    ));
    Live {
        base,
        client: reqwest::Client::new(),
        controller,
        driver: Some(driver),
        stop_server: Some(tx),
    }
}

impl Live {
    /// The URL of `path` on this controller.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A GET without a token: the status and the body, as JSON when it is JSON.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self.client.get(self.url(path)).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A POST with the right token and a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// A PUT with the right token and a JSON body.
    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .put(self.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// A policy component uploaded with the right token.
    pub async fn upload(&self, bytes: Vec<u8>) -> (u16, Value) {
        let response = self
            .client
            .post(self.url("/v1/policies"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/wasm")
            .body(bytes)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// The rounds decided so far, from `/v1/status`.
    pub async fn rounds(&self) -> u64 {
        self.get("/v1/status").await.1["rounds"].as_u64().unwrap()
    }

    /// Waits until `check` holds on GET `path`, for at most 30 s (a generous bound on a
    /// loaded machine, not a performance figure).
    pub async fn wait_for(&self, path: &str, check: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let (_, body) = self.get(path).await;
            if check(&body) {
                return body;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "gave up waiting on {path}; last answer: {body}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&self) {
        let started = Instant::now();
        loop {
            let ready = self.client.get(self.url("/readyz")).send().await.unwrap();
            if ready.status() == 200 {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "/readyz still answers {}",
                ready.status()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until more rounds than `after` have been decided.
    pub async fn wait_for_rounds_after(&self, after: u64) -> u64 {
        self.wait_for("/v1/status", |s| s["rounds"].as_u64().unwrap() > after)
            .await["rounds"]
            .as_u64()
            .unwrap()
    }

    /// Every decision kept so far, page by page.
    pub async fn all_decisions(&self) -> Vec<Value> {
        let mut all: Vec<Value> = Vec::new();
        let mut since = -1_i64;
        loop {
            let (status, body) = self
                .get(&format!("/v1/decisions?since={since}&limit=1000"))
                .await;
            assert_eq!(status, 200, "{body}");
            let page = body["decisions"].as_array().unwrap();
            all.extend(page.iter().cloned());
            if !body["more"].as_bool().unwrap() || page.is_empty() {
                return all;
            }
            since = page.last().unwrap()["round"].as_i64().unwrap();
        }
    }

    /// Stops the server and the decision thread.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop_server.take() {
            let _ = tx.send(());
        }
        if let Some(driver) = self.driver.take() {
            tokio::task::spawn_blocking(move || driver.shutdown())
                .await
                .unwrap();
        }
    }
}
