//! Events about the controller itself: a refused policy file.

use kube::runtime::events::Reporter;
use serde_json::json;
use tokio::runtime::Handle;

use crate::support::fixtures::event_json;
use crate::support::mock::{Access, Expect, MockServer};
use switchyard_kube::*;

pub(crate) async fn a_refusal_becomes_an_event_on_the_pod() -> Vec<Access> {
    let (client, server) = MockServer::start(vec![
        Expect::post("/apis/events.k8s.io/v1/namespaces/switchyard/events")
            .body(json!({"type": "Warning", "reason": "PolicyRefused", "action": "LoadPolicy",
                "note": "/etc/switchyard/policies/broken.wasm: not a component; the running policy stays",
                "regarding": {"kind": "Pod", "name": "switchyard-0", "namespace": "switchyard"}}))
            .respond(201, event_json()),
    ]);
    let hook = refusal_events(
        Handle::current(),
        client,
        Reporter {
            controller: "switchyard".into(),
            instance: Some("switchyard-0".into()),
        },
        "switchyard",
        "switchyard-0",
    );
    hook("/etc/switchyard/policies/broken.wasm", "not a component");
    server.finish().await
}

#[tokio::test(start_paused = true)]
async fn a_refused_policy_file_leaves_a_warning_event_on_the_controllers_pod() {
    a_refusal_becomes_an_event_on_the_pod().await;
}
