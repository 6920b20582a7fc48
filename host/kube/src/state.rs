//! The policies' state blobs, which policy is active, and the uploaded components, kept
//! in the cluster so that a restarted controller, or the replica that takes over as
//! leader, resumes them: one ConfigMap (`switchyard-state` in the controller's namespace)
//! with a `binaryData` key per policy (`<policy>.state`), `data: active.json`,
//! `data: parameters.json` (the parameters operators set, by policy), and an
//! index entry `data: <policy>.component.json` per kept upload, naming the ConfigMap
//! that holds the component (`switchyard-state-component-<policy>`, `binaryData:
//! <policy>.wasm`, the layout of the policies ConfigMap) and its digest.
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
//! Components are a few hundred KiB (Rust) to tens of MB (Python with its interpreter), so
//! each gets a ConfigMap of its own, and the state ConfigMap only indexes them: the
//! controller reads back exactly the objects the index names, with `get`, and needs no
//! `list` on ConfigMaps. The component is written before its index entry, and the digest
//! in the entry is checked on reading, so an interrupted write is a load error rather
//! than another version. A component over 1 MiB cannot be kept at all: the upload is
//! used, the answer says it will not survive a restart, and the index entry of an older
//! copy is removed (and its bytes cleared) so a restart does not bring that one back.
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

use crate::FIELD_MANAGER;
use switchyard_control::{
    ACTIVE_FILE, ActivePolicy, ComponentStore, KeepError, KeptComponent, PARAMETERS_FILE,
    PolicyParameters, StateError, StateStore,
};
use switchyard_core::ComponentDigest;

/// The ConfigMap's default name.
pub const STATE_CONFIGMAP: &str = "switchyard-state";
/// What the API server accepts in one ConfigMap: `data` and `binaryData` together, keys
/// included.
pub const CONFIGMAP_BYTES: usize = 1 << 20;
/// How long one call to the API server may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The suffix of an index entry's key in the state ConfigMap.
const INDEX_SUFFIX: &str = ".component.json";

/// One kept component, as the state ConfigMap indexes it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct IndexEntry {
    /// The policy's name.
    policy: String,
    /// The ConfigMap holding the component.
    configmap: String,
    /// Its `binaryData` key there.
    key: String,
    /// `sha256:` digest of the component.
    digest: String,
}

/// State blobs, the active policy and kept uploads in ConfigMaps.
#[derive(Clone)]
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

    /// The ConfigMap keeping `policy`'s uploaded component, and its key there.
    pub fn component_configmap_of(&self, policy: &str) -> (String, String) {
        let slug = component_slug(policy);
        (
            format!("{}-component-{slug}", self.name),
            format!("{slug}.wasm"),
        )
    }

    /// `ConfigMap <namespace>/<name>`, as messages and load errors name it.
    fn place_of(&self, name: &str) -> String {
        format!("ConfigMap {}/{name}", self.namespace)
    }

    fn error(&self, message: impl std::fmt::Display) -> StateError {
        self.error_in(&self.name, message)
    }

    fn error_in(&self, name: &str, message: impl std::fmt::Display) -> StateError {
        StateError::Remote {
            place: self.place_of(name),
            message: message.to_string(),
        }
    }

    fn read(&self) -> Result<Option<ConfigMap>, StateError> {
        self.read_configmap(&self.name)
    }

    fn read_configmap(&self, name: &str) -> Result<Option<ConfigMap>, StateError> {
        let call = self.api.get_opt(name);
        self.handle
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, call).await })
            .map_err(|_| self.error_in(name, "reading timed out"))?
            .map_err(|e| self.error_in(name, format!("reading: {e}")))
    }

    fn params() -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        }
    }

    /// Merges `patch` (`data` and `binaryData` keys) into the state ConfigMap, creating
    /// it with `created` when it does not exist yet.
    fn merge(&self, patch: serde_json::Value, created: ConfigMap) -> Result<(), StateError> {
        self.merge_into(&self.name, patch, created)
    }

    /// Merges `patch` into ConfigMap `name`, creating it with `created` when it does not
    /// exist yet.
    fn merge_into(
        &self,
        name: &str,
        patch: serde_json::Value,
        created: ConfigMap,
    ) -> Result<(), StateError> {
        let params = Self::params();
        let write = async {
            let patched = self.api.patch(name, &params, &Patch::Merge(&patch)).await;
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
                            .patch(name, &params, &Patch::Merge(&patch))
                            .await
                            .map(|_| ()),
                        other => other.map(|_| ()),
                    }
                }
                other => other.map(|_| ()),
            }
        };
        self.handle
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, write).await })
            .map_err(|_| self.error_in(name, "writing timed out"))?
            .map_err(|e| self.error_in(name, format!("writing: {e}")))
    }

    /// Merges `patch` into ConfigMap `name` if it exists (removing keys needs nothing
    /// created).
    fn merge_if_present(&self, name: &str, patch: serde_json::Value) -> Result<(), StateError> {
        let params = Self::params();
        let patch = Patch::Merge(&patch);
        let write = self.api.patch(name, &params, &patch);
        match self
            .handle
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, write).await })
            .map_err(|_| self.error_in(name, "writing timed out"))?
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
            Err(e) => Err(self.error_in(name, format!("writing: {e}"))),
        }
    }

    /// Removes `policy`'s index entry, then clears the component it named, so a restart
    /// does not load an older copy. Best effort: failures are logged.
    fn drop_component(&self, policy: &str) {
        let (configmap, key) = self.component_configmap_of(policy);
        let index_key = format!("{}{INDEX_SUFFIX}", component_slug(policy));
        let steps = [
            (self.name.as_str(), json!({"data": {index_key: null}})),
            (configmap.as_str(), json!({"binaryData": {key: null}})),
        ];
        for (name, patch) in steps {
            if let Err(error) = self.merge_if_present(name, patch) {
                tracing::warn!(%error, policy, "cannot drop the copy of the policy kept earlier; a restart may load it");
            }
        }
    }

    /// Writes the component, then its index entry.
    fn write_component(&self, policy: &str, bytes: &[u8]) -> Result<String, StateError> {
        let (configmap, key) = self.component_configmap_of(policy);
        let digest = ComponentDigest::of(bytes).to_hex();
        let annotations = BTreeMap::from([
            ("switchyard.dev/policy".to_string(), policy.to_string()),
            ("switchyard.dev/digest".to_string(), digest.clone()),
        ]);
        let encoded = ByteString(bytes.to_vec());
        let mut created = self.empty_named(&configmap);
        created.metadata.annotations = Some(annotations.clone());
        created.binary_data = Some(BTreeMap::from([(key.clone(), encoded.clone())]));
        self.merge_into(
            &configmap,
            json!({"metadata": {"annotations": annotations}, "binaryData": {&key: encoded}}),
            created,
        )?;
        let entry = IndexEntry {
            policy: policy.to_string(),
            configmap: configmap.clone(),
            key,
            digest,
        };
        let text = serde_json::to_string(&entry).map_err(|e| self.error(e))?;
        let index_key = format!("{}{INDEX_SUFFIX}", component_slug(policy));
        let mut created = self.empty();
        created.data = Some(BTreeMap::from([(index_key.clone(), text.clone())]));
        self.merge(json!({"data": {index_key: text}}), created)?;
        Ok(self.place_of(&configmap))
    }

    /// The component an index entry names, checked against the entry's digest.
    fn read_component(&self, index_key: &str, text: &str) -> Result<KeptComponent, StateError> {
        let entry: IndexEntry = serde_json::from_str(text).map_err(|e| {
            self.error(format!(
                "index entry {index_key} is not what this version writes: {e}"
            ))
        })?;
        let bytes = self
            .read_configmap(&entry.configmap)?
            .and_then(|cm| cm.binary_data?.remove(&entry.key))
            .ok_or_else(|| {
                self.error_in(
                    &entry.configmap,
                    format!(
                        "no binaryData `{}`, which the index entry {index_key} names",
                        entry.key
                    ),
                )
            })?
            .0;
        let digest = ComponentDigest::of(&bytes).to_hex();
        if digest != entry.digest {
            return Err(self.error_in(
                &entry.configmap,
                format!(
                    "`{}` has digest {digest} where the index entry {index_key} says {} (a write was interrupted, or the ConfigMap was edited)",
                    entry.key, entry.digest
                ),
            ));
        }
        Ok(KeptComponent {
            location: self.place_of(&entry.configmap),
            bytes,
        })
    }

    fn empty(&self) -> ConfigMap {
        self.empty_named(&self.name)
    }

    fn empty_named(&self, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
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

    fn load_parameters(&self) -> Result<PolicyParameters, StateError> {
        let Some(text) = self.read()?.and_then(|cm| cm.data?.remove(PARAMETERS_FILE)) else {
            return Ok(PolicyParameters::new());
        };
        serde_json::from_str(&text).map_err(|e| {
            self.error(format!(
                "{PARAMETERS_FILE} is not what this version writes: {e}"
            ))
        })
    }

    fn save_parameters(&self, parameters: &PolicyParameters) -> Result<(), StateError> {
        let text = serde_json::to_string(parameters).map_err(|e| self.error(e))?;
        let mut created = self.empty();
        created.data = Some(BTreeMap::from([(
            PARAMETERS_FILE.to_string(),
            text.clone(),
        )]));
        self.merge(json!({"data": {PARAMETERS_FILE: text}}), created)
    }
}

impl ComponentStore for ConfigMapStateStore {
    fn keep(&self, policy: &str, bytes: &[u8]) -> Result<String, KeepError> {
        let (_, key) = self.component_configmap_of(policy);
        let limit = CONFIGMAP_BYTES - key.len();
        if bytes.len() > limit {
            self.drop_component(policy);
            return Err(KeepError::TooLarge {
                size: bytes.len(),
                limit,
                place: "a ConfigMap".into(),
            });
        }
        self.write_component(policy, bytes).map_err(|error| {
            self.drop_component(policy);
            KeepError::Store(error)
        })
    }

    fn kept(&self) -> Vec<Result<KeptComponent, StateError>> {
        let index = match self.read() {
            Ok(state) => state.and_then(|cm| cm.data).unwrap_or_default(),
            Err(error) => return vec![Err(error)],
        };
        index
            .iter()
            .filter(|(key, _)| key.ends_with(INDEX_SUFFIX))
            .map(|(key, text)| self.read_component(key, text))
            .collect()
    }
}

/// `policy` as a piece of a ConfigMap name (lowercase letters, digits, `-`). A name
/// that had to change gets a hash of the original, so two policies never share one.
fn component_slug(policy: &str) -> String {
    let reduced: String = policy
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    let trimmed = reduced.trim_matches('-');
    if trimmed == policy && policy.len() <= 100 {
        return policy.to_string();
    }
    let hash = ComponentDigest::of(policy.as_bytes()).short();
    let head: String = trimmed.chars().take(100).collect();
    if head.is_empty() {
        hash
    } else {
        format!("{head}-{hash}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_name_becomes_a_valid_configmap_name_and_two_names_never_share_one() {
        assert_eq!(component_slug("specon"), "specon");
        let odd = component_slug("My_Policy");
        assert!(odd.starts_with("my-policy-"), "{odd}");
        assert_ne!(odd, component_slug("my-policy"));
        assert_ne!(component_slug("a_b"), component_slug("a.b"));
        let long = component_slug(&"x".repeat(300));
        assert!(long.len() < 120, "{long}");
        assert!(
            component_slug("__")
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
}
