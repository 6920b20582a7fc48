//! What a claim, a volume and a storage class say about a job, as [`super::VolumeCaches`]
//! reads them: the unit tests of the parent module, apart for its length.

use super::*;
use crate::rules::restricted;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::json;
use std::sync::Arc;
use switchyard_core::PlacementRules;

struct Storage {
    caches: VolumeCaches,
    claims: Writer<PersistentVolumeClaim>,
    volumes: Writer<PersistentVolume>,
    classes: Writer<StorageClass>,
}

impl Storage {
    fn new() -> Self {
        let (claims_store, claims) = kube::runtime::reflector::store();
        let (volumes_store, volumes) = kube::runtime::reflector::store();
        let (classes_store, classes) = kube::runtime::reflector::store();
        Self {
            caches: VolumeCaches {
                claims: claims_store,
                volumes: volumes_store,
                classes: classes_store,
            },
            claims,
            volumes,
            classes,
        }
    }

    fn class(mut self, name: &str, mode: &str) -> Self {
        let class = serde_json::from_value(json!({"metadata": {"name": name},
            "provisioner": "p", "volumeBindingMode": mode,
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": ["a", "b"]}]}]}))
        .unwrap();
        self.classes.apply_watcher_event(&Event::Apply(class));
        self
    }

    fn claim(mut self, name: &str, spec: serde_json::Value, phase: &str) -> Self {
        let claim = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml"},
            "spec": spec, "status": {"phase": phase}}))
        .unwrap();
        self.claims.apply_watcher_event(&Event::Apply(claim));
        self
    }

    fn local_volume(mut self, name: &str, host: &str) -> Self {
        let volume = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}}}))
        .unwrap();
        self.volumes.apply_watcher_event(&Event::Apply(volume));
        self
    }

    /// What job `a`, whose worker role mounts `claim`, gets from it.
    fn verdict(&self, claim: &str) -> JobVolumes {
        let job: TrainingJob = serde_json::from_value(json!({
            "apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
            "metadata": {"name": "a", "namespace": "ml"},
            "spec": {"roles": [{"name": "worker", "replicas": 2, "template": {"spec": {
                "containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}}}]}
        }))
        .unwrap();
        self.caches.of_job(&job)
    }
}

impl Storage {
    /// A class annotated as the cluster's default, created at `created`.
    fn default_class(mut self, name: &str, mode: &str, created: &str) -> Self {
        let class = serde_json::from_value(json!({"metadata": {"name": name,
                "creationTimestamp": created,
                "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
            "provisioner": "p", "volumeBindingMode": mode}))
        .unwrap();
        self.classes.apply_watcher_event(&Event::Apply(class));
        self
    }

    /// What job `a`, whose worker role has an ephemeral volume of `class` (none:
    /// the template names no class), gets from it.
    fn ephemeral_verdict(&self, class: Option<&str>) -> JobVolumes {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}});
        if let Some(class) = class {
            spec["storageClassName"] = json!(class);
        }
        let job: TrainingJob = serde_json::from_value(json!({
            "apiVersion": "switchyard.dev/v1alpha1", "kind": "TrainingJob",
            "metadata": {"name": "a", "namespace": "ml"},
            "spec": {"roles": [{"name": "worker", "replicas": 2, "template": {"spec": {
                "containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "scratch",
                    "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}]}}}]}
        }))
        .unwrap();
        assert!(mounts_claims(&job));
        self.caches.of_job(&job)
    }
}

#[test]
fn an_ephemeral_volume_keeps_its_role_to_its_class_s_topology() {
    let storage = Storage::new().class("wffc", "WaitForFirstConsumer");
    let placeable = storage.ephemeral_verdict(Some("wffc"));
    assert_eq!(placeable.held, None, "its claim is made with the pod");
    assert_eq!(
        placeable.restrictions["worker"][0][0].match_expressions[0].values,
        ["a", "b"],
        "the class's allowed zones"
    );
    // A class the cache does not know restricts nothing: the scheduler judges.
    assert!(
        storage
            .ephemeral_verdict(Some("nope"))
            .restrictions
            .is_empty()
    );
    assert!(storage.ephemeral_verdict(None).restrictions.is_empty());
    let storage = storage
        .default_class("old-default", "Immediate", "2025-01-01T00:00:00Z")
        .default_class(
            "new-default",
            "WaitForFirstConsumer",
            "2026-01-01T00:00:00Z",
        );
    assert!(
        storage.ephemeral_verdict(None).restrictions.is_empty(),
        "the newest default has no topology"
    );
}

fn held(verdict: &JobVolumes) -> (&'static str, String) {
    let held = verdict.held.as_ref().expect("the claim holds the job");
    (held.reason, held.message.clone())
}

#[test]
fn a_claim_that_cannot_be_bound_for_a_node_holds_the_job_and_the_reason_names_it() {
    let storage = Storage::new()
        .class("fast", "Immediate")
        .class("wffc", "WaitForFirstConsumer")
        .claim(
            "lost",
            json!({"storageClassName": "fast", "volumeName": "pv-gone"}),
            "Lost",
        )
        .claim("immediate", json!({"storageClassName": "fast"}), "Pending")
        .claim("classless", json!({"storageClassName": ""}), "Pending")
        .claim(
            "unknown-class",
            json!({"storageClassName": "nope"}),
            "Pending",
        )
        .claim(
            "dangling",
            json!({"storageClassName": "fast", "volumeName": "pv-gone"}),
            "Bound",
        )
        .claim(
            "provisioning",
            json!({"storageClassName": "wffc"}),
            "Pending",
        );
    let (reason, message) = held(&storage.verdict("absent"));
    assert_eq!(reason, "ClaimNotFound");
    assert!(message.contains("ml/absent"), "{message}");
    assert_eq!(held(&storage.verdict("lost")).0, "ClaimLost");
    let (reason, message) = held(&storage.verdict("immediate"));
    assert_eq!(reason, "ClaimUnbound");
    assert!(
        message.contains("ml/immediate") && message.contains("Immediately"),
        "{message}"
    );
    assert!(
        held(&storage.verdict("classless"))
            .1
            .contains("no storage class")
    );
    assert!(
        held(&storage.verdict("unknown-class"))
            .1
            .contains("nope does not exist")
    );
    assert_eq!(held(&storage.verdict("dangling")).0, "VolumeNotFound");
    // Waiting for its consumer: placeable, within the class's zones.
    let waiting = storage.verdict("provisioning");
    assert_eq!(waiting.held, None);
    assert_eq!(
        waiting.restrictions["worker"][0][0].match_expressions[0].values,
        ["a", "b"]
    );
}

#[test]
fn a_bound_claim_keeps_its_role_where_its_volume_is() {
    let storage = Storage::new()
        .class("local", "WaitForFirstConsumer")
        .local_volume("pv-n3", "n3")
        .claim(
            "scratch",
            json!({"storageClassName": "local", "volumeName": "pv-n3"}),
            "Bound",
        );
    let bound = storage.verdict("scratch");
    assert_eq!(bound.held, None);
    let rules = restricted(&Arc::default(), &bound.restrictions["worker"]);
    let labels =
        |host: &str| BTreeMap::from([("kubernetes.io/hostname".to_string(), host.to_string())]);
    assert!(rules.allow(&labels("n3"), &[]));
    assert!(!rules.allow(&labels("n1"), &[]));
}

impl Storage {
    /// A `WaitForFirstConsumer` class whose volumes are all pre-provisioned.
    fn local_class(mut self, name: &str) -> Self {
        let class = serde_json::from_value(json!({"metadata": {"name": name},
            "provisioner": matching::NO_PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer"}))
        .unwrap();
        self.classes.apply_watcher_event(&Event::Apply(class));
        self
    }

    /// A volume of `class` and `size` on node `host`, with `extra` merged into its
    /// JSON (an object of top-level parts, e.g. `status`).
    fn volume(
        mut self,
        name: &str,
        class: &str,
        size: &str,
        host: &str,
        extra: serde_json::Value,
    ) -> Self {
        let mut volume = json!({"metadata": {"name": name, "resourceVersion": "7"},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}},
            "status": {"phase": "Available"}});
        for (key, part) in extra.as_object().unwrap() {
            for (inner, value) in part.as_object().unwrap() {
                volume[key][inner] = value.clone();
            }
        }
        let volume = serde_json::from_value(volume).unwrap();
        self.volumes.apply_watcher_event(&Event::Apply(volume));
        self
    }

    /// An unbound claim `name` of `class` asking for `size`.
    fn unbound(self, name: &str, class: &str, size: &str) -> Self {
        self.claim(
            name,
            json!({"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}}}),
            "Pending",
        )
    }
}

fn host(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())])
}

#[test]
fn a_claim_waiting_for_its_consumer_is_offered_the_nodes_of_the_volumes_that_match_it() {
    let none = json!({});
    let storage = Storage::new()
        .local_class("local")
        .volume("small", "local", "10Gi", "n1", none.clone())
        .volume("big", "local", "100Gi", "n2", none.clone())
        .volume("huge", "local", "1Ti", "n2", none.clone())
        .volume("other-class", "fast", "500Gi", "n3", none.clone())
        .volume(
            "read-only",
            "local",
            "500Gi",
            "n3",
            json!({"spec": {"accessModes": ["ReadOnlyMany"]}}),
        )
        .volume(
            "block",
            "local",
            "500Gi",
            "n3",
            json!({"spec": {"volumeMode": "Block"}}),
        )
        .volume(
            "released",
            "local",
            "500Gi",
            "n4",
            json!({"status": {"phase": "Released"}}),
        )
        .volume(
            "promised-elsewhere",
            "local",
            "500Gi",
            "n5",
            json!({"spec": {"claimRef": {"namespace": "ml", "name": "someone-else"}}}),
        )
        .unbound("data", "local", "50Gi")
        .unbound("too-big", "local", "2Ti");
    let waiting = storage.verdict("data");
    assert_eq!(waiting.held, None, "{:?}", waiting.held);
    let rules = restricted(&Arc::default(), &waiting.restrictions["worker"]);
    for (node, offered) in [
        ("n1", false),
        ("n2", true),
        ("n3", false),
        ("n4", false),
        ("n5", false),
    ] {
        assert_eq!(rules.allow(&host(node), &[]), offered, "node {node}");
    }
    let (reason, message) = held(&storage.verdict("too-big"));
    assert_eq!(reason, "NoMatchingVolume");
    assert!(
        message.contains("ml/too-big") && message.contains("local"),
        "{message}"
    );
}

#[test]
fn a_class_that_provisions_offers_its_topology_beside_the_matching_volumes() {
    let storage = Storage::new()
        .class("wffc", "WaitForFirstConsumer")
        .volume("local-n9", "wffc", "100Gi", "n9", json!({}))
        .volume(
            "promised",
            "wffc",
            "100Gi",
            "n8",
            json!({"spec": {"claimRef": {"namespace": "ml", "name": "taken"}}}),
        )
        .unbound("data", "wffc", "50Gi");
    let waiting = storage.verdict("data");
    let rules = restricted(&Arc::default(), &waiting.restrictions["worker"]);
    let zone =
        |z: &str| BTreeMap::from([("topology.kubernetes.io/zone".to_string(), z.to_string())]);
    assert!(
        rules.allow(&host("n9"), &[]),
        "the pre-provisioned volume's node"
    );
    assert!(
        !rules.allow(&host("n8"), &[]),
        "a volume promised to another claim"
    );
    assert!(rules.allow(&zone("a"), &[]), "where the class provisions");
    assert!(!rules.allow(&zone("c"), &[]));
}

#[test]
fn a_volume_s_terms_are_added_to_the_template_s_own_affinity_not_instead_of_it() {
    let term = |key: &str, value: &str| SelectorTerm {
        match_expressions: vec![SelectorRequirement {
            key: key.into(),
            operator: SelectorOperator::In,
            values: vec![value.into()],
        }],
    };
    let own = Arc::new(PlacementRules {
        required_node_affinity: vec![term("gpu", "a100"), term("gpu", "h100")],
        ..PlacementRules::default()
    });
    let zones = vec![term("zone", "a"), term("zone", "b")];
    let rules = restricted(&own, std::slice::from_ref(&zones));
    assert_eq!(rules.required_node_affinity.len(), 4, "every pairing");
    let node = |gpu: &str, zone: &str| {
        BTreeMap::from([
            ("gpu".to_string(), gpu.to_string()),
            ("zone".to_string(), zone.to_string()),
        ])
    };
    assert!(rules.allow(&node("h100", "b"), &[]));
    assert!(!rules.allow(&node("h100", "c"), &[]), "the volume's zone");
    assert!(!rules.allow(&node("v100", "a"), &[]), "the template's GPU");
    assert!(Arc::ptr_eq(&restricted(&own, &[]), &own), "nothing to add");
}
