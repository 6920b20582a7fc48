//! A real OCI registry on loopback for tests: Debian's `docker-registry` package (the CNCF
//! distribution registry), started on an ephemeral port with its configuration and its
//! filesystem storage in a temporary directory, with or without basic auth, and stopped
//! when dropped. The binary is `SWITCHYARD_DOCKER_REGISTRY`, else `docker-registry` on
//! the PATH. Without it a test says it is skipped and returns, unless
//! `SWITCHYARD_REQUIRE_REGISTRY` is set (as CI sets it), where it fails. It serves; it
//! must not judge what a test pushed.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use switchyard_registry::{Cache, Client, ClientOptions, Credentials};

use crate::{Tool, executable, optional_tool};

/// How long the registry may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Debian's distribution registry, which CI requires with `SWITCHYARD_REQUIRE_REGISTRY`.
const DOCKER_REGISTRY: Tool = Tool {
    name: "the distribution registry",
    install: "Debian: apt-get install docker-registry, or name it with SWITCHYARD_DOCKER_REGISTRY",
    required_by: "SWITCHYARD_REQUIRE_REGISTRY",
};

/// A running registry; stopped and its storage removed on drop.
pub struct TestRegistry {
    child: Child,
    dir: tempfile::TempDir,
    address: String,
    login: Option<(String, String)>,
}

impl TestRegistry {
    /// A registry anyone may push to and pull from, or `None` (with a SKIPPED line) where
    /// the package is not installed.
    pub fn anonymous() -> Option<Self> {
        Self::start(None)
    }

    /// A registry that wants the basic-auth login `user`/`password` for everything.
    pub fn with_login(user: &str, password: &str) -> Option<Self> {
        Self::start(Some((user.to_string(), password.to_string())))
    }

    fn start(login: Option<(String, String)>) -> Option<Self> {
        let found = executable("SWITCHYARD_DOCKER_REGISTRY", "docker-registry");
        let binary = optional_tool(DOCKER_REGISTRY, "the registry test", found)?;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let storage = dir.path().join("storage");
        let mut config = format!(
            "version: 0.1\n\
             log:\n  level: info\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:0\n  secret: switchyard-test\n",
            storage.display()
        );
        if let Some((user, password)) = &login {
            // bcrypt is the one hash the registry's htpasswd accepts; the lowest cost
            // keeps each request's check quick.
            let hash = bcrypt::hash(password, 4).expect("bcrypt hashes");
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: switchyard-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let mut child = Command::new(&binary)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let address = match listening_address(&mut child) {
            Ok(address) => address,
            Err(log) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the registry did not say where it listens; its log:\n{log}");
            }
        };
        Some(Self {
            child,
            dir,
            address,
            login,
        })
    }

    /// `127.0.0.1:PORT`, as a reference names the registry.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// `oci://127.0.0.1:PORT/{path}`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.address)
    }

    /// The registry's login, if it wants one.
    pub fn login(&self) -> Option<(&str, &str)> {
        self.login.as_ref().map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// Where the registry keeps the blob `sha256:HEX` (manifests are blobs too), so a
    /// test can damage what the registry serves.
    pub fn blob_file(&self, hex: &str) -> PathBuf {
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// A switchyard client that speaks plain HTTP to this registry, with `credentials`,
    /// keeping pulls in `cache` if given.
    pub fn client(&self, credentials: Credentials, cache: Option<&Path>) -> Client {
        Client::new(ClientOptions {
            insecure_registries: vec![self.address.clone()],
            credentials,
            cache: cache.map(Cache::new),
        })
        .expect("a registry client")
    }

    /// `oci-client` itself, anonymous, for what switchyard's client will not do: read an
    /// artifact's config, or push one that is not a component.
    pub fn raw_client(&self) -> oci_client::Client {
        oci_client::Client::try_from(oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::HttpsExcept(vec![self.address.clone()]),
            ..Default::default()
        })
        .expect("an oci-client client")
    }

    /// Pushes one layer of `layer_type` with a `{}` config of `config_type` to
    /// `repository:tag`, as some other tool would (an image, a Wasm module, a text
    /// file), anonymously.
    pub async fn push_artifact(
        &self,
        repository: &str,
        tag: &str,
        layer: &[u8],
        layer_type: &str,
        config_type: &str,
    ) {
        use oci_client::client::{Config, ImageLayer};
        let layers = [ImageLayer::new(
            layer.to_vec(),
            layer_type.to_string(),
            None,
        )];
        let config = Config::new(b"{}".to_vec(), config_type.to_string(), None);
        let manifest = oci_client::manifest::OciImageManifest::build(&layers, &config, None);
        let target = oci_client::Reference::with_tag(
            self.address.clone(),
            repository.to_string(),
            tag.to_string(),
        );
        self.raw_client()
            .push(
                &target,
                &layers,
                config,
                &oci_client::secrets::RegistryAuth::Anonymous,
                Some(manifest),
            )
            .await
            .expect("the registry takes the artifact");
    }

    /// Writes a docker config holding `user`/`password` for this registry at `path`.
    pub fn write_docker_config(&self, path: &Path, user: &str, password: &str) {
        let json = serde_json::json!({
            "auths": {self.address.clone(): {"username": user, "password": password}}
        });
        std::fs::write(path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the registry's log until it says `listening on ADDRESS`, and keeps draining it
/// afterwards so the registry never blocks on a full pipe. The log so far on failure.
fn listening_address(child: &mut Child) -> Result<String, String> {
    let stderr = child.stderr.take().expect("stderr is piped");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            // Once the address is sent nobody listens; the loop goes on draining.
            let _ = sender.send(line);
        }
    });
    let mut log = String::new();
    let deadline = std::time::Instant::now() + START_TIMEOUT;
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        let Ok(line) = receiver.recv_timeout(left) else {
            break;
        };
        if let Some(address) = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split(['"', ' ']).next())
        {
            return Ok(address.to_string());
        }
        log.push_str(&line);
        log.push('\n');
    }
    Err(log)
}
