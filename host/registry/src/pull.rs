//! Pulling a component: resolve a tag to a digest once, then take the manifest and the
//! component from the cache or the registry, each verified against its digest. The
//! component's size is checked against the caller's limit before the download starts
//! (the manifest's declared size, then the response's length) and again with every
//! chunk, so an oversized blob is never downloaded whole; its first bytes must be a
//! component's header, so a blob that is not one stops the download too. Nothing that
//! failed a check is returned or cached.

use bytes::Bytes;
use futures_util::StreamExt as _;
use oci_client::errors::DigestError;
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
};
use sha2::{Digest as _, Sha256};

use crate::artifact::{self, ComponentLayer, HEADER_LEN, MANIFEST_MEDIA_TYPE};
use crate::cache::{Cache, Kind};
use crate::client::Client;
use crate::error::{Error, Size};
use crate::reference::{Digest, Reference};

/// The manifest types asked for: every kind a registry may hold under a tag, so that
/// one that is not a component's is named rather than reported missing.
const ACCEPTED_MANIFESTS: &[&str] = &[
    MANIFEST_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
    IMAGE_MANIFEST_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

/// The most bytes a manifest kept in the cache may have: a component's is a few hundred.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// A pulled component, verified.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The reference pulled, pinned to the manifest's digest.
    pub reference: Reference,
    /// The manifest's digest: what ran, as a reference names it.
    pub digest: Digest,
    /// The SHA-256 of the component's bytes (its layer's digest).
    pub component_digest: Digest,
    /// The component.
    pub bytes: Bytes,
    /// Whether the manifest and the component came from the cache (no download).
    pub cached: bool,
}

impl Client {
    /// Pulls the component `reference` names, refusing one over `limit` bytes. A tag is
    /// resolved at the registry; a pinned reference found in the cache needs no registry
    /// at all.
    pub async fn pull(&self, reference: &Reference, limit: u64) -> Result<Pulled, Error> {
        let digest = self.resolve(reference).await?;
        let pinned = reference.pinned(digest);
        if let Some(cache) = &self.options.cache
            && let Some(pulled) = from_cache(cache.clone(), pinned.clone(), limit).await?
        {
            return Ok(pulled);
        }
        self.authorize(&pinned).await;
        let auth = self.options.credentials.auth_for(pinned.registry());
        let (manifest, _) = self
            .oci
            .pull_manifest_raw(&pinned.to_oci(), &auth, ACCEPTED_MANIFESTS)
            .await
            .map_err(|e| self.error(e, &pinned))?;
        let actual = Digest::of(&manifest);
        if actual != digest {
            return Err(Error::DigestMismatch {
                reference: Box::new(pinned),
                what: "manifest",
                expected: digest.to_string(),
                actual: actual.to_string(),
            });
        }
        let layer = read_layer(&pinned, &manifest, limit)?;
        let bytes = self.download(&pinned, &layer, limit).await?;
        if let Some(cache) = &self.options.cache {
            keep(cache.clone(), digest, manifest, layer.digest, bytes.clone()).await;
        }
        Ok(Pulled {
            reference: pinned,
            digest,
            component_digest: layer.digest,
            bytes,
            cached: false,
        })
    }

    /// Downloads `layer`, checking its size, header and digest as the chunks arrive.
    async fn download(
        &self,
        pinned: &Reference,
        layer: &ComponentLayer,
        limit: u64,
    ) -> Result<Bytes, Error> {
        let too_large = |size| Error::TooLarge {
            reference: Box::new(pinned.clone()),
            size,
            limit,
        };
        let size_mismatch = |received| Error::SizeMismatch {
            reference: Box::new(pinned.clone()),
            declared: layer.size,
            received,
        };
        let digest_mismatch = |actual: Digest| Error::DigestMismatch {
            reference: Box::new(pinned.clone()),
            what: "component",
            expected: layer.digest.to_string(),
            actual: actual.to_string(),
        };
        let not_component = |problem| Error::NotComponent {
            reference: Box::new(pinned.clone()),
            problem,
        };

        let mut stream = self
            .oci
            .pull_blob_stream(&pinned.to_oci(), &layer.descriptor)
            .await
            .map_err(|e| self.error(e, pinned))?;
        if let Some(length) = stream.content_length {
            if length > limit {
                return Err(too_large(Size::Exactly(length)));
            }
            if length != layer.size {
                return Err(size_mismatch(Size::Exactly(length)));
            }
        }
        // `layer.size` is at most `limit` (read_layer checked), so this reserves no more
        // than the caller accepts.
        let mut bytes = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
        let mut hasher = Sha256::new();
        let mut header_checked = false;
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                // `oci-client` verifies the digest too, and says so at the stream's end:
                // every byte has arrived, so the hasher holds the digest of what was sent.
                Err(error)
                    if error
                        .get_ref()
                        .is_some_and(|inner| inner.downcast_ref::<DigestError>().is_some()) =>
                {
                    return Err(digest_mismatch(Digest::from_hasher(hasher)));
                }
                Err(error) => {
                    return Err(Error::Registry {
                        reference: Box::new(pinned.clone()),
                        detail: format!("the download broke off: {error}"),
                    });
                }
            };
            let received = (bytes.len() + chunk.len()) as u64;
            if received > limit {
                return Err(too_large(Size::MoreThan(limit)));
            }
            if received > layer.size {
                return Err(size_mismatch(Size::MoreThan(layer.size)));
            }
            hasher.update(&chunk);
            bytes.extend_from_slice(&chunk);
            if !header_checked && bytes.len() >= HEADER_LEN {
                artifact::check_header(&bytes[..HEADER_LEN]).map_err(not_component)?;
                header_checked = true;
            }
        }
        if !header_checked {
            artifact::check_header(&bytes).map_err(not_component)?;
        }
        if bytes.len() as u64 != layer.size {
            return Err(size_mismatch(Size::Exactly(bytes.len() as u64)));
        }
        let actual = Digest::from_hasher(hasher);
        if actual != layer.digest {
            return Err(digest_mismatch(actual));
        }
        Ok(Bytes::from(bytes))
    }
}

/// The component layer of `manifest`, refused when it is not a component's or declares
/// more than `limit` bytes.
fn read_layer(pinned: &Reference, manifest: &[u8], limit: u64) -> Result<ComponentLayer, Error> {
    let layer = artifact::component_layer(manifest).map_err(|problem| Error::NotComponent {
        reference: Box::new(pinned.clone()),
        problem,
    })?;
    if layer.size > limit {
        return Err(Error::TooLarge {
            reference: Box::new(pinned.clone()),
            size: Size::Exactly(layer.size),
            limit,
        });
    }
    Ok(layer)
}

/// The component `pinned` names, if the cache holds its manifest and its bytes.
async fn from_cache(cache: Cache, pinned: Reference, limit: u64) -> Result<Option<Pulled>, Error> {
    tokio::task::spawn_blocking(move || {
        let digest = pinned.digest().expect("a pinned reference has a digest");
        let Some(manifest) = cache.read(Kind::Manifest, digest, MAX_MANIFEST_BYTES) else {
            return Ok(None);
        };
        let layer = read_layer(&pinned, &manifest, limit)?;
        let Some(bytes) = cache.read(Kind::Blob, layer.digest, limit) else {
            return Ok(None);
        };
        Ok(Some(Pulled {
            digest,
            component_digest: layer.digest,
            bytes: Bytes::from(bytes),
            reference: pinned,
            cached: true,
        }))
    })
    .await
    .expect("reading the cache does not panic")
}

/// Keeps a verified manifest and component in the cache; a cache that cannot be written
/// costs the next pull a download, not this one its result.
async fn keep(cache: Cache, digest: Digest, manifest: Bytes, layer: Digest, bytes: Bytes) {
    let written = tokio::task::spawn_blocking(move || {
        cache.write(Kind::Blob, layer, &bytes)?;
        cache.write(Kind::Manifest, digest, &manifest)
    })
    .await
    .expect("writing the cache does not panic");
    if let Err(error) = written {
        tracing::warn!(%error, %digest, "cannot keep the pulled policy in the cache");
    }
}
