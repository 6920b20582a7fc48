//! Measured usage from `metrics.k8s.io/v1beta1`, when the cluster serves it: each
//! node's, and each of the controller's pods'. It reads; it must not write.

use std::collections::{BTreeMap, HashMap};

use kube::Client;
use serde_json::Value;
use switchyard_core::Resources;

use crate::{Error, Result, quantity};

/// Usage measured by the metrics server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// Per node name.
    pub nodes: HashMap<String, Resources>,
    /// Per (namespace, pod name), containers summed.
    pub pods: HashMap<(String, String), Resources>,
}

/// Reads node usage, and the controller's pods' usage, from `metrics.k8s.io/v1beta1`.
/// `Ok(None)` when the cluster does not serve it (404 or 503): the snapshot then carries
/// no usage.
pub async fn fetch_usage(client: &Client) -> Result<Option<Usage>> {
    let get = |path: &'static str| async move {
        let request = http::Request::get(path)
            .body(Vec::new())
            .expect("a valid request");
        match client.request::<Value>(request).await {
            Ok(v) => Ok(Some(v)),
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 503) => Ok(None),
            Err(error) => Err(Error::api(format!("reading {path}"))(error)),
        }
    };
    let Some(nodes) = get("/apis/metrics.k8s.io/v1beta1/nodes").await? else {
        return Ok(None);
    };
    // Only the controller's pods: the snapshot carries no other pod's usage.
    let Some(pods) =
        get("/apis/metrics.k8s.io/v1beta1/pods?labelSelector=switchyard.dev%2Fjob").await?
    else {
        return Ok(None);
    };
    let resources = |usage: &Value| -> Resources {
        let map: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> =
            serde_json::from_value(usage.clone()).unwrap_or_default();
        quantity::resources(&map)
    };
    let items = |list: &Value| list["items"].as_array().cloned().unwrap_or_default();
    let mut usage = Usage::default();
    for item in items(&nodes) {
        if let Some(name) = item["metadata"]["name"].as_str() {
            usage
                .nodes
                .insert(name.to_string(), resources(&item["usage"]));
        }
    }
    for item in items(&pods) {
        let (Some(ns), Some(name)) = (
            item["metadata"]["namespace"].as_str(),
            item["metadata"]["name"].as_str(),
        ) else {
            continue;
        };
        let sum = item["containers"]
            .as_array()
            .iter()
            .flat_map(|c| c.iter())
            .fold(Resources::default(), |acc, c| {
                acc.plus(&resources(&c["usage"]))
            });
        usage.pods.insert((ns.to_string(), name.to_string()), sum);
    }
    Ok(Some(usage))
}
