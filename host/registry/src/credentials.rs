//! Registry credentials from a docker config JSON: the user's `~/.docker/config.json`
//! (or `$DOCKER_CONFIG/config.json`) and a Kubernetes `kubernetes.io/dockerconfigjson`
//! Secret's `.dockerconfigjson`, which share one format: `auths`, keyed by registry, each
//! with `auth` (base64 of `user:password`) or `username` and `password`. This module reads
//! that format and answers "which login for this registry"; it does not run credential
//! helpers (`credsStore`, `credHelpers`), and it never logs or prints a password.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use thiserror::Error;

/// A registry login: a user name and a password (or token used as one).
#[derive(Clone, PartialEq, Eq)]
struct Login {
    username: String,
    password: String,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The logins of one docker config, by registry (`host[:port]`), and where they came from.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    source: Option<String>,
    logins: BTreeMap<String, Login>,
    helpers: BTreeMap<String, String>,
}

/// One registry's entry under `auths`.
#[derive(Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// The parts of a docker config this crate reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
    creds_store: Option<String>,
}

impl Credentials {
    /// No logins: every registry is spoken to anonymously.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads a docker config JSON (a config file's text, or a `kubernetes.io/dockerconfigjson`
    /// Secret's `.dockerconfigjson`); `source` names it in messages (a path, `secret
    /// NAMESPACE/NAME`).
    pub fn from_docker_config_json(json: &[u8], source: &str) -> Result<Self, CredentialsError> {
        let fail = |problem| CredentialsError {
            origin: source.to_string(),
            problem,
        };
        let config: DockerConfig = serde_json::from_slice(json)
            .map_err(|e| fail(CredentialsProblem::Json(e.to_string())))?;
        let mut logins = BTreeMap::new();
        for (key, entry) in config.auths {
            let registry = registry_of_key(&key);
            let login = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    decode_auth(&auth).ok_or_else(|| fail(CredentialsProblem::Auth(key.clone())))?
                }
                (_, Some(username), Some(password)) => Login { username, password },
                // An entry with neither is what `docker login` leaves when a credential
                // helper holds the secret; the helper's entry says so below.
                _ => continue,
            };
            logins.insert(registry, login);
        }
        let mut helpers: BTreeMap<String, String> = config
            .cred_helpers
            .into_iter()
            .map(|(key, helper)| (registry_of_key(&key), helper))
            .collect();
        if let Some(store) = config.creds_store {
            helpers.insert(String::new(), store);
        }
        Ok(Self {
            source: Some(source.to_string()),
            logins,
            helpers,
        })
    }

    /// Reads the docker config at `path`: a `config.json` or a Secret's
    /// `.dockerconfigjson`, or a directory holding one (as `docker --config DIR` takes
    /// it, or as Kubernetes mounts a `kubernetes.io/dockerconfigjson` Secret). A
    /// directory holding neither holds no logins, as docker reads it (an optional Secret
    /// that was not created mounts as an empty directory).
    pub fn from_docker_config_file(path: &Path) -> Result<Self, CredentialsError> {
        let file = if path.is_dir() {
            let found = [".dockerconfigjson", "config.json"]
                .into_iter()
                .map(|name| path.join(name))
                .find(|file| file.is_file());
            match found {
                Some(file) => file,
                None => return Ok(Self::none()),
            }
        } else {
            path.to_path_buf()
        };
        let json = std::fs::read(&file).map_err(|e| CredentialsError {
            origin: file.display().to_string(),
            problem: CredentialsProblem::Read(e.to_string()),
        })?;
        Self::from_docker_config_json(&json, &file.display().to_string())
    }

    /// The user's docker config, where docker looks for it
    /// ([`Credentials::user_docker_config_path`]); none when there is no such file.
    pub fn from_user_docker_config() -> Result<Self, CredentialsError> {
        match Self::user_docker_config_path() {
            Some(path) if path.is_file() => Self::from_docker_config_file(&path),
            _ => Ok(Self::none()),
        }
    }

    /// `$DOCKER_CONFIG/config.json` when `DOCKER_CONFIG` is set, else
    /// `$HOME/.docker/config.json`, as docker reads it.
    pub fn user_docker_config_path() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir).join("config.json"));
        }
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
        Some(PathBuf::from(home).join(".docker").join("config.json"))
    }

    /// Where these logins came from, if anywhere.
    pub(crate) fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The user name of `registry`'s login, if there is one.
    pub(crate) fn username_for(&self, registry: &str) -> Option<&str> {
        self.logins.get(registry).map(|l| l.username.as_str())
    }

    /// How to authenticate to `registry`: its login, or anonymously.
    pub(crate) fn auth_for(&self, registry: &str) -> RegistryAuth {
        match self.logins.get(registry) {
            Some(login) => RegistryAuth::Basic(login.username.clone(), login.password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    /// Why `registry` was spoken to without a login: a sentence for an access error.
    pub(crate) fn why_anonymous(&self, registry: &str) -> String {
        let Some(source) = self.source.as_deref() else {
            return format!("no login for {registry} was sent (no docker config was read)");
        };
        let helper = self.helpers.get(registry).or_else(|| self.helpers.get(""));
        match helper {
            Some(helper) => format!(
                "no login for {registry} in {source}: its credentials are kept by the \
                 credential helper `{helper}`, which switchyard does not run; give a config \
                 whose `auths` hold them"
            ),
            None => format!("no login for {registry} in {source}"),
        }
    }
}

/// The registry an `auths` key names: docker writes `registry.example.com`, but also
/// `https://registry.example.com/v1/` and the like.
fn registry_of_key(key: &str) -> String {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// `auth`: base64 of `username:password`.
fn decode_auth(auth: &str) -> Option<Login> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (username, password) = text.split_once(':')?;
    Some(Login {
        username: username.to_string(),
        password: password.to_string(),
    })
}

/// A docker config that could not be read: where it came from and what is wrong.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("registry credentials from {origin}: {problem}")]
pub struct CredentialsError {
    /// The file or Secret the config came from.
    pub origin: String,
    /// What is wrong with it.
    pub problem: CredentialsProblem,
}

/// What is wrong with a docker config.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CredentialsProblem {
    /// The file could not be read.
    #[error("cannot read it: {0}")]
    Read(String),
    /// Not the docker config JSON format.
    #[error(
        "not a docker config JSON object (`{{\"auths\": {{REGISTRY: {{\"auth\": ...}}}}}}`): {0}"
    )]
    Json(String),
    /// An `auth` that is not base64 of `user:password`.
    #[error("`auths.{0}.auth` is not base64 of USER:PASSWORD")]
    Auth(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(auth: RegistryAuth) -> (String, String) {
        match auth {
            RegistryAuth::Basic(user, password) => (user, password),
            other => panic!("expected a login, got {other:?}"),
        }
    }

    #[test]
    fn auth_and_username_password_entries_both_give_a_login_keyed_by_host_and_port() {
        let json = br#"{"auths": {
            "reg.example.com:5000": {"auth": "YWxpY2U6czNjcjN0"},
            "https://other.example.com/v1/": {"username": "bob", "password": "pw"}
        }}"#;
        let credentials = Credentials::from_docker_config_json(json, "test").unwrap();
        assert_eq!(
            basic(credentials.auth_for("reg.example.com:5000")),
            ("alice".into(), "s3cr3t".into())
        );
        assert_eq!(
            basic(credentials.auth_for("other.example.com")),
            ("bob".into(), "pw".into())
        );
        assert_eq!(
            credentials.auth_for("reg.example.com"),
            RegistryAuth::Anonymous
        );
    }

    #[test]
    fn a_kubernetes_dockerconfigjson_reads_like_a_config_file() {
        // What `kubectl create secret docker-registry` puts under `.dockerconfigjson`.
        let json = br#"{"auths":{"reg.example.com":{"username":"u","password":"p","email":"e@x","auth":"dTpw"}}}"#;
        let credentials = Credentials::from_docker_config_json(json, "secret ns/pull").unwrap();
        assert_eq!(
            basic(credentials.auth_for("reg.example.com")),
            ("u".into(), "p".into())
        );
        assert_eq!(credentials.source(), Some("secret ns/pull"));
    }

    #[test]
    fn a_bad_auth_or_bad_json_is_refused_naming_the_source_and_the_entry() {
        let error = Credentials::from_docker_config_json(
            br#"{"auths": {"reg.example.com": {"auth": "not base64!"}}}"#,
            "/home/u/.docker/config.json",
        )
        .unwrap_err();
        assert_eq!(
            error.problem,
            CredentialsProblem::Auth("reg.example.com".into())
        );
        let message = error.to_string();
        assert!(message.contains("/home/u/.docker/config.json"), "{message}");
        assert!(message.contains("auths.reg.example.com.auth"), "{message}");
        let error = Credentials::from_docker_config_json(b"[1]", "x").unwrap_err();
        assert!(
            matches!(error.problem, CredentialsProblem::Json(_)),
            "{error}"
        );
    }

    #[test]
    fn a_registry_kept_by_a_credential_helper_says_so_when_access_is_refused() {
        let json = br#"{"auths": {"reg.example.com": {}}, "credHelpers": {"reg.example.com": "ecr-login"}}"#;
        let credentials = Credentials::from_docker_config_json(json, "c.json").unwrap();
        assert_eq!(
            credentials.auth_for("reg.example.com"),
            RegistryAuth::Anonymous
        );
        let why = credentials.why_anonymous("reg.example.com");
        assert!(why.contains("`ecr-login`"), "{why}");
    }

    #[test]
    fn a_password_never_shows_in_debug_output() {
        let json = br#"{"auths": {"r": {"username": "u", "password": "hunter2"}}}"#;
        let credentials = Credentials::from_docker_config_json(json, "c.json").unwrap();
        let shown = format!("{credentials:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("\"u\""), "{shown}");
    }
}
