//! The policies' state blobs, and which policy is active, kept in the cluster so that a
//! restarted controller, or the replica that takes over as leader, resumes them: one
//! ConfigMap (`switchyard-state` in the controller's namespace) with a `binaryData` key
//! per policy (`<policy>.state`) and `data: active.json`.
//!
//! Why a ConfigMap rather than the TrainingJobs' status or annotations: a blob belongs
//! to a policy, not to a job (SpeCon's monitor spans every job, and the blob must
//! outlive the jobs it saw), and the active policy belongs to the controller. One object
//! in the controller's own namespace, written only by the leader, needs only a
//! namespaced Role (`get`, `create`, `patch` on configmaps), where per-job state would
//! need a write to every job on every round. Each write is a merge patch of one key, so
//! writing one policy's blob never overwrites another's. The limit is the ConfigMap's
//! 1 MiB: a write the API server refuses is reported like any failed save (counted,
//! logged) and the policy keeps its blob in memory.
//!
//! [`StateStore`] is synchronous (the decision thread calls it between rounds), so this
//! store enters the async runtime through a [`Handle`]; every call has a deadline so a
//! hanging API server cannot stall the decision thread for long.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::runtime::Handle;

use super::FIELD_MANAGER;
use crate::control::state::ACTIVE_FILE;
use crate::control::{ActivePolicy, StateError, StateStore};

/// The ConfigMap's default name.
pub const STATE_CONFIGMAP: &str = "switchyard-state";
/// How long one call to the API server may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// State blobs in a ConfigMap.
pub struct ConfigMapStateStore {
    handle: Handle,
    api: Api<ConfigMap>,
    name: String,
    namespace: String,
}

impl ConfigMapStateStore {
    /// Keeps state in ConfigMap `name` of `namespace` (created on the first write).
    pub fn new(handle: Handle, client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            handle,
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            namespace: namespace.to_string(),
        }
    }

    /// The key of `policy`'s blob: names reduced to what ConfigMap keys allow.
    pub fn key_of(policy: &str) -> String {
        let safe: String = policy
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{safe}.state")
    }

    fn error(&self, message: impl std::fmt::Display) -> StateError {
        StateError::Remote {
            place: format!("ConfigMap {}/{}", self.namespace, self.name),
            message: message.to_string(),
        }
    }

    fn read(&self) -> Result<Option<ConfigMap>, StateError> {
        let call = self.api.get_opt(&self.name);
        self.handle
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, call).await })
            .map_err(|_| self.error("reading timed out"))?
            .map_err(|e| self.error(format!("reading: {e}")))
    }

    /// Merges `patch` (`data` and `binaryData` keys) into the ConfigMap, creating it
    /// with `created` when it does not exist yet.
    fn merge(&self, patch: serde_json::Value, created: ConfigMap) -> Result<(), StateError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let outcome = self.handle.block_on(async {
            let patched = self
                .api
                .patch(&self.name, &params, &Patch::Merge(&patch))
                .await;
            match patched {
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    let pp = PostParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PostParams::default()
                    };
                    match self.api.create(&pp, &created).await {
                        // Another writer created it first: merge into theirs.
                        Err(kube::Error::Api(s)) if s.is_already_exists() => self
                            .api
                            .patch(&self.name, &params, &Patch::Merge(&patch))
                            .await
                            .map(|_| ()),
                        other => other.map(|_| ()),
                    }
                }
                other => other.map(|_| ()),
            }
        });
        outcome.map_err(|e| self.error(format!("writing: {e}")))
    }

    fn empty(&self) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    "switchyard".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }
}

impl StateStore for ConfigMapStateStore {
    fn load(&self, policy: &str) -> Result<Option<Vec<u8>>, StateError> {
        let key = Self::key_of(policy);
        Ok(self
            .read()?
            .and_then(|cm| cm.binary_data?.remove(&key))
            .map(|b| b.0))
    }

    fn save(&self, policy: &str, blob: &[u8]) -> Result<(), StateError> {
        let key = Self::key_of(policy);
        let encoded = ByteString(blob.to_vec());
        let mut created = self.empty();
        created.binary_data = Some(BTreeMap::from([(key.clone(), encoded.clone())]));
        self.merge(json!({"binaryData": {key: encoded}}), created)
    }

    fn load_active(&self) -> Result<Option<ActivePolicy>, StateError> {
        let Some(text) = self.read()?.and_then(|cm| cm.data?.remove(ACTIVE_FILE)) else {
            return Ok(None);
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            self.error(format!(
                "{ACTIVE_FILE} is not what this version writes: {e}"
            ))
        })
    }

    fn save_active(&self, active: &ActivePolicy) -> Result<(), StateError> {
        let text = serde_json::to_string(active).map_err(|e| self.error(e))?;
        let mut created = self.empty();
        created.data = Some(BTreeMap::from([(ACTIVE_FILE.to_string(), text.clone())]));
        self.merge(json!({"data": {ACTIVE_FILE: text}}), created)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;
    use crate::kube::mock::{Access, Expect, MockServer};

    const CM: &str = "/api/v1/namespaces/switchyard/configmaps/switchyard-state";

    fn config_map(data: serde_json::Value) -> serde_json::Value {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "switchyard-state", "namespace": "switchyard", "resourceVersion": "3"}});
        cm.as_object_mut()
            .unwrap()
            .extend(data.as_object().unwrap().clone());
        cm
    }

    /// Saves a blob and the active policy into a ConfigMap that does not exist yet, and
    /// reads both back as a restarted controller would.
    pub(crate) async fn state_survives_in_a_configmap() -> Vec<Access> {
        let active = r#"{"policy":"specon","settings":{"alpha":"0.1"}}"#;
        let full = config_map(
            json!({"binaryData": {"specon.state": "AQID"}, "data": {"active.json": active}}),
        );
        let (client, server) = MockServer::start(vec![
            Expect::get(CM).fail(404, "NotFound", "configmaps \"switchyard-state\" not found"),
            Expect::patch(CM)
                .body(json!({"binaryData": {"specon.state": "AQID"}}))
                .fail(404, "NotFound", "configmaps \"switchyard-state\" not found"),
            Expect::post("/api/v1/namespaces/switchyard/configmaps")
                .body(
                    json!({"metadata": {"name": "switchyard-state", "namespace": "switchyard"},
                    "binaryData": {"specon.state": "AQID"}}),
                )
                .respond(
                    201,
                    config_map(json!({"binaryData": {"specon.state": "AQID"}})),
                ),
            Expect::patch(CM)
                .body(json!({"data": {"active.json": active}}))
                .ok(full.clone()),
            Expect::get(CM).ok(full.clone()),
            Expect::get(CM).ok(full),
        ]);
        let store =
            ConfigMapStateStore::new(Handle::current(), client, "switchyard", STATE_CONFIGMAP);
        tokio::task::spawn_blocking(move || {
            assert_eq!(store.load("specon").unwrap(), None, "nothing saved yet");
            store.save("specon", &[1, 2, 3]).unwrap();
            let saved = ActivePolicy {
                policy: "specon".into(),
                settings: [("alpha".to_string(), "0.1".to_string())].into(),
            };
            store.save_active(&saved).unwrap();
            assert_eq!(store.load("specon").unwrap(), Some(vec![1, 2, 3]));
            assert_eq!(store.load_active().unwrap(), Some(saved));
        })
        .await
        .unwrap();
        server.finish().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn policy_state_and_the_active_policy_are_kept_in_a_configmap_a_restart_reads_back() {
        state_survives_in_a_configmap().await;
    }

    #[test]
    fn a_policy_name_becomes_a_valid_configmap_key() {
        assert_eq!(ConfigMapStateStore::key_of("spe/con:1"), "spe_con_1.state");
    }
}
