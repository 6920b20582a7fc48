//! Events told once per object and occasion, whoever leads: the `IntegrationNotEnabled`
//! Event on a gated pod, the `NotAdopted` one on an owner whose pods run without the
//! gate, and the end of an adopted job's checkpoint. The Event's name is made from the
//! object and the occasion, so the cluster itself remembers that it was told: a second
//! create of the same name is refused (`AlreadyExists`) whichever replica sends it, a
//! restarted leader included, and two leaders racing tell it once. It creates Events;
//! it must not decide what to tell.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;

use super::actor::{Actor, truncate};
use crate::{Error, FIELD_MANAGER};

/// The longest name an Event may have (a DNS subdomain).
const NAME_MAX: usize = 253;

/// What became of an Event told once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Told {
    /// Created now.
    Now,
    /// It exists already: this replica or another told it before.
    Before,
}

/// The name of the Event about `regarding` (named `name`) for `occasion` (lowercase
/// letters, digits, `-` and `.`): `<name>.<occasion>`, the object's name shortened
/// when the whole would be longer than a name may be.
pub(crate) fn event_name(name: &str, occasion: &str) -> String {
    let room = NAME_MAX.saturating_sub(occasion.len() + 1);
    let mut head = truncate(name, room);
    // A name ends in a letter or a digit.
    while head.ends_with(['-', '.']) {
        head.pop();
    }
    match head.is_empty() {
        true => truncate(occasion, NAME_MAX),
        false => format!("{head}.{occasion}"),
    }
}

impl Actor {
    /// Publishes an Event about `regarding` once for `occasion` (see the module docs):
    /// `Told::Before` when the cluster holds it already.
    pub(crate) async fn tell_once(
        &self,
        regarding: &ObjectReference,
        occasion: &str,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> crate::Result<Told> {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let object = regarding.name.as_deref().unwrap_or_default();
        let name = event_name(object, occasion);
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(Timestamp::now())),
            action: Some(action.into()),
            reason: Some(reason.into()),
            note: Some(truncate(note, 1024)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            ..Event::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match self.guard.call(api.create(&params, &event)).await {
            Ok(_) => Ok(Told::Now),
            Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(Told::Before),
            Err(error) => Err(Error::api(format!("publishing Event {name}"))(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_name_is_the_object_and_the_occasion_and_never_longer_than_a_name_may_be() {
        assert_eq!(
            event_name("bert-master-0", "integrationnotenabled"),
            "bert-master-0.integrationnotenabled"
        );
        let long = format!("{}-x", "a".repeat(300));
        let name = event_name(&long, "notadopted.uid-1");
        assert_eq!(name.len(), NAME_MAX);
        assert!(name.ends_with(".notadopted.uid-1"), "{name}");
        // A cut that ends in a dash or a dot is trimmed back to a letter.
        let name = event_name(&format!("{}-{}", "b".repeat(235), "c".repeat(40)), "x");
        assert!(!name.contains("-."), "{name}");
    }
}
