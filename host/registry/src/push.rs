//! Pushing a component: check that the bytes are a component, build the wasm-pkg-tools
//! layout (its layer titled `NAME.wasm` after the repository's last name), upload the
//! component (unless the repository already holds it), the config and the manifest, and
//! answer with the digest the manifest is known by. The component is held once, as
//! shared bytes that the upload slices without copying. A push names a tag and sends
//! only a component: it never writes to a digest reference, and refuses other bytes
//! before anything is sent.

use bytes::Bytes;
use http::HeaderValue;

use crate::artifact::{self, HEADER_LEN, MANIFEST_MEDIA_TYPE};
use crate::client::Client;
use crate::error::Error;
use crate::reference::{Digest, Reference};

/// What a push left in the registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The reference pushed to, pinned to the manifest's digest.
    pub reference: Reference,
    /// The manifest's digest: what `@sha256:...` references name.
    pub digest: Digest,
    /// The SHA-256 of the component's bytes (its layer's digest).
    pub component_digest: Digest,
    /// The component's size in bytes.
    pub size: u64,
}

impl Client {
    /// Pushes `component` to `reference` (which names a tag), in the layout `wkg oci push`
    /// writes.
    pub async fn push(&self, reference: &Reference, component: Bytes) -> Result<Pushed, Error> {
        if reference.digest().is_some() {
            return Err(Error::PushToDigest {
                reference: Box::new(reference.clone()),
            });
        }
        let not_component = |problem| Error::NotComponent {
            reference: Box::new(reference.clone()),
            problem,
        };
        artifact::check_header(&component[..component.len().min(HEADER_LEN)])
            .map_err(not_component)?;
        let component_digest = Digest::of(&component);
        let name = reference
            .repository()
            .rsplit('/')
            .next()
            .unwrap_or("policy");
        let title = format!("{name}.wasm");
        let layout = artifact::layout(&component, component_digest, chrono::Utc::now(), &title)
            .map_err(not_component)?;
        let digest = Digest::of(&layout.manifest);
        let fail = |e| self.error(e, reference);

        self.authorize(reference).await;
        let target = reference.to_oci();
        let layer = component_digest.to_string();
        // A component pushed under another tag (or pushed before) is not sent again.
        if !self.oci.blob_exists(&target, &layer).await.map_err(fail)? {
            self.oci
                .push_blob(&target, component.clone(), &layer)
                .await
                .map_err(fail)?;
        }
        self.oci
            .push_blob(&target, layout.config, &layout.config_digest.to_string())
            .await
            .map_err(fail)?;
        self.oci
            .push_manifest_raw(
                &target,
                layout.manifest,
                HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
            )
            .await
            .map_err(fail)?;
        Ok(Pushed {
            reference: reference.pinned(digest),
            digest,
            component_digest,
            size: component.len() as u64,
        })
    }
}
