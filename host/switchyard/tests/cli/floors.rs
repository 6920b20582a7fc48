//! The host crates stand on the floors `docs/architecture.md` gives them: a crate uses
//! exactly the host crates its row names, all of them on lower floors, so an upward
//! import cannot compile and the table cannot drift from `Cargo.toml`. The test-only
//! crate (floor `test`) is a dev-dependency of any crate and a normal one of none. A
//! policy author's test crate that uses the simulator or the authoring tools does not
//! pull in the Kubernetes client or the HTTP server.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

use crate::cargo_metadata;

/// One row of the floors table: the crate's floor and the host crates it may use.
#[derive(Debug)]
struct Floor {
    /// `None` for the test-only crate.
    level: Option<u32>,
    uses: BTreeSet<String>,
}

const HOST_PREFIX: &str = "switchyard";

/// Reads the table in `docs/architecture.md` whose rows look like
/// `| 2 | `switchyard-runtime` | owns ... | `switchyard-core` |`.
fn documented_floors() -> BTreeMap<String, Floor> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/architecture.md");
    let text = std::fs::read_to_string(path).expect("docs/architecture.md");
    let mut floors = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 {
            continue;
        }
        let level = match cells[1] {
            "test" => None,
            floor => match floor.parse::<u32>() {
                Ok(level) => Some(level),
                Err(_) => continue,
            },
        };
        let name = cells[2].trim_matches('`').to_string();
        let uses = cells[cells.len() - 2]
            .split(',')
            .map(|c| c.trim().trim_matches('`').to_string())
            .filter(|c| c.starts_with(HOST_PREFIX))
            .collect();
        floors.insert(name, Floor { level, uses });
    }
    assert!(
        !floors.is_empty(),
        "docs/architecture.md has no floors table (rows `| level | `crate` | ... | uses |`)"
    );
    floors
}

/// The workspace's host crates (those under `host/`) and, per crate, the host crates it
/// depends on, by kind (`normal`, `dev`, `build`).
fn host_crates(meta: &Value) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let mut out = BTreeMap::new();
    for package in meta["packages"].as_array().unwrap() {
        let id = package["id"].as_str().unwrap();
        let manifest = package["manifest_path"].as_str().unwrap();
        if !members.contains(id) || !manifest.contains("/host/") {
            continue;
        }
        let mut by_kind: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for dep in package["dependencies"].as_array().unwrap() {
            let name = dep["name"].as_str().unwrap();
            // Host crates only: the policies and the test guests (their SDK included) are
            // guests, built for Wasm and natively only for benches and tests, on no floor.
            let in_host = dep["path"].as_str().is_some_and(|p| p.contains("/host/"));
            if !name.starts_with(HOST_PREFIX) || !in_host {
                continue;
            }
            let kind = dep["kind"].as_str().unwrap_or("normal").to_string();
            by_kind.entry(kind).or_default().insert(name.to_string());
        }
        out.insert(package["name"].as_str().unwrap().to_string(), by_kind);
    }
    out
}

#[test]
fn every_host_crate_uses_exactly_the_crates_its_floor_names_and_only_lower_ones() {
    let floors = documented_floors();
    let crates = host_crates(&cargo_metadata(&["--locked"]));
    let documented: BTreeSet<&String> = floors.keys().collect();
    let built: BTreeSet<&String> = crates.keys().collect();
    assert_eq!(
        documented, built,
        "the floors table in docs/architecture.md and the crates under host/ differ"
    );
    for (name, by_kind) in &crates {
        let floor = &floors[name];
        let normal = by_kind.get("normal").cloned().unwrap_or_default();
        assert_eq!(
            normal, floor.uses,
            "{name} depends on {normal:?}; docs/architecture.md says it uses {:?}",
            floor.uses
        );
        for (kind, deps) in by_kind {
            for dep in deps {
                match (floors[dep].level, floor.level) {
                    // The test-only crate: any crate's tests may use it, no crate's code.
                    (None, _) => assert_eq!(
                        kind, "dev",
                        "{name} has a {kind} dependency on the test-only {dep}"
                    ),
                    (Some(_), None) => {}
                    (Some(dep_level), Some(level)) => assert!(
                        dep_level < level,
                        "{name} (floor {level}) has a {kind} dependency on {dep} (floor \
                         {dep_level}): a crate may only use crates on lower floors"
                    ),
                }
            }
        }
    }
}

/// Every package `root` pulls in through normal dependencies, transitively.
fn normal_closure(meta: &Value, root: &str) -> BTreeSet<String> {
    let nodes = meta["resolve"]["nodes"].as_array().unwrap();
    let by_id: BTreeMap<&str, &Value> = nodes
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let start = name_of
        .iter()
        .find(|(_, name)| **name == root)
        .map(|(id, _)| *id)
        .expect("the root package is in the workspace");
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        for dep in by_id[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                stack.push(dep["pkg"].as_str().unwrap());
            }
        }
    }
    seen.iter().map(|id| name_of[id].to_string()).collect()
}

/// Fails when `root` pulls in any of `heavy` (normal dependencies, transitively), saying
/// `why` that matters; `present`, a crate it does pull in, shows the closure was read.
fn assert_pulls_in_none(root: &str, heavy: &[&str], present: &str, why: &str) {
    let closure = normal_closure(&cargo_metadata(&["--locked"]), root);
    for heavy in heavy {
        assert!(!closure.contains(*heavy), "{root} pulls in {heavy}: {why}");
    }
    assert!(closure.contains(present), "the closure was read");
}

#[test]
fn a_policy_authors_crates_pull_in_no_kubernetes_client_no_http_server_and_no_controller() {
    for root in ["switchyard-sim", "switchyard-authoring"] {
        assert_pulls_in_none(
            root,
            &[
                "kube",
                "kube-client",
                "k8s-openapi",
                "axum",
                "hyper",
                "switchyard-controller",
                "switchyard-kube",
            ],
            "wasmtime",
            "a policy author's test crate would build it",
        );
    }
}

#[test]
fn the_registry_client_pulls_in_no_wasm_engine_no_kubernetes_client_and_no_http_server() {
    assert_pulls_in_none(
        "switchyard-registry",
        &["wasmtime", "kube", "kube-client", "k8s-openapi", "axum"],
        "oci-client",
        "it stands beside the runtime, not on it",
    );
}
