//! How the command reaches OCI registries: the flags every command that takes a policy
//! shares (`--insecure-registry`, `--docker-config`), the client and the controller's
//! registry access they describe, and policy references (`oci://...`) in place of policy
//! files for the offline commands (`simulate`, `sweep`, `policy test`): each is pulled,
//! verified, once, and handed on as a file. The work is `switchyard-registry`'s; this
//! module only reads flags and says what it pulled.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use switchyard_controller::RegistryAccess;
use switchyard_registry::{Cache, Client, ClientOptions, Credentials, Error, Reference};

use super::sandbox::SandboxArgs;

/// How to reach registries.
#[derive(Debug, clap::Args)]
pub(crate) struct RegistryArgs {
    /// A registry spoken to over plain HTTP instead of TLS, as references name it
    /// (`HOST[:PORT]`); repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure_registries: Vec<String>,

    /// The docker config holding registry logins (`auths`): a `config.json`, a
    /// Kubernetes `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`, or a
    /// directory holding either (a mounted Secret) [default: $DOCKER_CONFIG/config.json,
    /// else ~/.docker/config.json, as docker reads it].
    #[arg(long, value_name = "PATH")]
    docker_config: Option<PathBuf>,
}

/// A policy pulled for an offline command, kept where the command reads it until it is
/// dropped.
pub(crate) struct PulledFile {
    /// The file, as the policy argument now names it.
    file: String,
    /// The reference pinned to the artifact's digest.
    reference: String,
    /// Removed on drop when the component is not in the on-disk cache.
    _temporary: Option<tempfile::TempPath>,
}

/// The pinned reference of the policy that `policy` (a policy argument after
/// [`RegistryArgs::pull_references`]) names, when it was pulled.
pub(crate) fn pinned_reference(pulled: &[PulledFile], policy: &str) -> Option<String> {
    pulled
        .iter()
        .find(|p| p.file == policy)
        .map(|p| p.reference.clone())
}

impl RegistryArgs {
    /// The client these flags describe, keeping pulled policies in `cache` if given.
    pub(crate) fn client(&self, cache: Option<PathBuf>) -> anyhow::Result<Client> {
        Ok(Client::new(self.options(cache)?)?)
    }

    /// The live controller's registry access: these flags, the command's cache of
    /// pulled policies, components up to `max_bytes`.
    pub(crate) fn access(
        &self,
        sandbox: &SandboxArgs,
        max_bytes: u64,
    ) -> anyhow::Result<RegistryAccess> {
        let cache = sandbox.compile_cache()?.map(|dir| dir.join("oci"));
        Ok(RegistryAccess::new(self.options(cache)?, max_bytes)?)
    }

    fn options(&self, cache: Option<PathBuf>) -> anyhow::Result<ClientOptions> {
        for registry in &self.insecure_registries {
            anyhow::ensure!(
                !registry.contains('/') && !registry.is_empty(),
                "--insecure-registry takes a registry as references name it, HOST[:PORT] \
                 (for example 127.0.0.1:5000), not `{registry}`"
            );
        }
        let credentials = match &self.docker_config {
            Some(path) => Credentials::from_docker_config_file(path)?,
            None => Credentials::from_user_docker_config()?,
        };
        Ok(ClientOptions {
            insecure_registries: self.insecure_registries.clone(),
            credentials,
            cache: cache.map(Cache::new),
        })
    }

    /// Replaces every policy reference among `policies` (each `POLICY` or `NAME=POLICY`,
    /// as `simulate --policy` takes them) by the file of the component it names, pulled
    /// and verified (from the cache when pinned and there), and says on standard error
    /// which digest each is. The files stay while the returned guards live.
    pub(crate) fn pull_references<'a>(
        &self,
        policies: impl IntoIterator<Item = &'a mut String>,
        sandbox: &SandboxArgs,
    ) -> anyhow::Result<Vec<PulledFile>> {
        let mut guards = Vec::new();
        let mut client = None;
        for policy in policies {
            let Some(at) = reference_start(policy) else {
                continue;
            };
            let reference = Reference::parse(&policy[at..])?;
            let cache_dir = sandbox.compile_cache()?.map(|dir| dir.join("oci"));
            let client = match &mut client {
                Some(client) => client,
                None => client.insert(self.client(cache_dir.clone())?),
            };
            let limit = switchyard_controller::DEFAULT_MAX_UPLOAD_BYTES as u64;
            let pulled = block_on(client.pull(&reference, limit))
                .map_err(|error| with_flag_hint(error, &reference))?;
            let (path, guard) = match cache_dir
                .map(|dir| Cache::new(dir).component_path(pulled.component_digest))
            {
                Some(path) if path.is_file() => (path, None),
                _ => {
                    let file = tempfile::Builder::new()
                        .prefix("switchyard-policy-")
                        .suffix(".wasm")
                        .tempfile()
                        .context("cannot create a temporary file for a pulled policy")?;
                    std::fs::write(file.path(), &pulled.bytes)
                        .context("cannot write a pulled policy to a temporary file")?;
                    let path = file.into_temp_path();
                    (path.to_path_buf(), Some(path))
                }
            };
            eprintln!(
                "policy {} (component {}){}",
                pulled.reference,
                pulled.component_digest,
                if pulled.cached {
                    ", from the cache"
                } else {
                    ""
                }
            );
            let file = file_name(&path);
            policy.replace_range(at.., &file);
            guards.push(PulledFile {
                file,
                reference: pulled.reference.to_string(),
                _temporary: guard,
            });
        }
        Ok(guards)
    }
}

/// Where a reference starts in `POLICY` or `NAME=POLICY`.
fn reference_start(policy: &str) -> Option<usize> {
    if Reference::is_reference(policy) {
        return Some(0);
    }
    let (_, rest) = policy.split_once('=')?;
    Reference::is_reference(rest).then(|| policy.len() - rest.len())
}

/// A path as a policy argument; a path that is not UTF-8 cannot be one.
fn file_name(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// A registry that did not answer over TLS may serve plain HTTP: name the flag.
pub(crate) fn with_flag_hint(error: Error, reference: &Reference) -> anyhow::Error {
    match error {
        Error::Unreachable {
            scheme: "https", ..
        } => anyhow::anyhow!(
            "{error}; for such a registry add --insecure-registry {}",
            reference.registry()
        ),
        error => error.into(),
    }
}

/// Runs one registry request to completion on a runtime of its own.
pub(crate) fn block_on<F: std::future::Future>(request: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a single-threaded runtime starts")
        .block_on(request)
}
