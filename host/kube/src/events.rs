//! Events about the controller itself, as opposed to a job's decisions (those are in
//! [`super::act`]): a refused policy component or settings file becomes a Warning Event
//! on the controller's own pod, so `kubectl events -n switchyard --for pod/<pod>` shows
//! why the running policy stayed. The pod, not the ConfigMap, is the object: the pod is
//! what refused it (each replica reads the ConfigMap itself and says so for itself), and
//! the controller cannot know which ConfigMap is mounted where.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::runtime::Handle;

use switchyard_control::RefusalHook;

/// The hook that publishes a `PolicyRefused` Event on pod `pod` of `namespace` for every
/// refusal; each Event is sent on `handle` without waiting for it.
pub fn refusal_events(
    handle: Handle,
    client: Client,
    reporter: Reporter,
    namespace: &str,
    pod: &str,
) -> RefusalHook {
    let recorder = Recorder::new(client, reporter);
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.to_string()),
        namespace: Some(namespace.to_string()),
        ..ObjectReference::default()
    };
    Arc::new(move |source: &str, error: &str| {
        let (recorder, reference) = (recorder.clone(), reference.clone());
        let mut note = format!("{source}: {error}; the running policy stays");
        if note.len() > 1024 {
            let mut end = 1024;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
        }
        handle.spawn(async move {
            let event = Event {
                type_: EventType::Warning,
                reason: "PolicyRefused".into(),
                note: Some(note),
                action: "LoadPolicy".into(),
                secondary: None,
            };
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::warn!(%error, "could not publish the refusal as an Event");
            }
        });
    })
}
