//! The OCI artifact layout of a Wasm component, as wasm-pkg-tools (`wkg oci push`) writes
//! it: an OCI image manifest whose config blob has media type
//! `application/vnd.wasm.config.v0+json` (a JSON object naming the architecture `wasm`,
//! the OS `wasip2`, the layer digests and the component's top-level imports and exports)
//! and whose one layer is the component itself, `application/wasm` (titled as a file, so
//! that `oras pull` saves it too). This module builds that manifest and config and says
//! whether a pulled manifest and its bytes are a component; it does not speak to a
//! registry, and it does not check that a component is a policy (the runtime does, when
//! it loads one).

use chrono::{DateTime, Utc};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use serde::Serialize;
use thiserror::Error;
use wasmparser::{Parser, Payload};

use crate::reference::Digest;

/// The manifest's media type: an OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// The config blob's media type in the wasm-pkg-tools layout.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// The component layer's media type in the wasm-pkg-tools layout.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The config and layer media types of the older wasm-to-oci layout (Kubewarden's
/// policies, `oci-client`'s `WASM_*` constants), accepted when pulling so that a
/// component published that way loads too.
const LEGACY_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v1+json";
const LEGACY_LAYER_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";

/// The layer annotation that names the file a layer is saved as: `oras pull` saves only
/// layers that carry it (wasm-pkg-tools neither writes nor needs it).
pub(crate) const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// The first four bytes of every Wasm binary.
const WASM_MAGIC: &[u8; 4] = b"\0asm";

/// How many leading bytes say whether a binary is a component: the magic, then a
/// 16-bit version and a 16-bit layer, 1 for a component and 0 for a core module.
pub(crate) const HEADER_LEN: usize = 8;

/// Why an artifact or a file is not a Wasm component.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum NotComponent {
    /// The manifest is not an OCI image manifest (a Docker manifest list, an index, ...).
    #[error("its manifest has media type `{0}`, not {MANIFEST_MEDIA_TYPE}")]
    ManifestMediaType(String),
    /// The manifest could not be read as an OCI image manifest.
    #[error("its manifest is not an OCI image manifest: {0}")]
    Manifest(String),
    /// The config blob is not a Wasm config (a container image, another artifact).
    #[error(
        "its config has media type `{0}`; a Wasm component's is {CONFIG_MEDIA_TYPE} (as \
         `wkg oci push` writes it)"
    )]
    ConfigMediaType(String),
    /// Not exactly one layer.
    #[error("it has {0} layers; a Wasm component has exactly one")]
    LayerCount(usize),
    /// The one layer is not a Wasm layer.
    #[error("its layer has media type `{0}`, not {LAYER_MEDIA_TYPE}")]
    LayerMediaType(String),
    /// The layer's digest is not a SHA-256 digest.
    #[error("its layer's digest `{0}` is not a sha256 digest")]
    LayerDigest(String),
    /// The bytes do not start with the Wasm magic number.
    #[error("its bytes do not start with the WebAssembly magic number (\\0asm)")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "it is a core WebAssembly module, not a component (`wasm-tools component new` wraps \
         a module into one; building for wasm32-wasip2 makes one)"
    )]
    CoreModule,
    /// Wasm with a header that is neither a core module's nor a component's.
    #[error(
        "its WebAssembly header has version {version} and layer {layer}; a component has layer 1"
    )]
    UnknownLayer {
        /// The header's version field.
        version: u16,
        /// The header's layer field.
        layer: u16,
    },
    /// A component header with a body that cannot be read.
    #[error("its component binary cannot be read: {0}")]
    Malformed(String),
}

/// Whether `prefix`, the first bytes of a binary (at least [`HEADER_LEN`] of them, or the
/// whole binary when shorter), starts like a component.
pub(crate) fn check_header(prefix: &[u8]) -> Result<(), NotComponent> {
    if prefix.len() < HEADER_LEN || &prefix[..4] != WASM_MAGIC {
        return Err(NotComponent::NotWasm);
    }
    let version = u16::from_le_bytes([prefix[4], prefix[5]]);
    let layer = u16::from_le_bytes([prefix[6], prefix[7]]);
    match layer {
        1 => Ok(()),
        0 => Err(NotComponent::CoreModule),
        _ => Err(NotComponent::UnknownLayer { version, layer }),
    }
}

/// The config blob of the wasm-pkg-tools layout (its `WasmConfig`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WasmConfig {
    created: DateTime<Utc>,
    author: Option<String>,
    architecture: &'static str,
    os: &'static str,
    layer_digests: Vec<String>,
    component: ComponentWorld,
}

/// The component's top-level imports and exports, by name.
#[derive(Debug, Serialize)]
struct ComponentWorld {
    exports: Vec<String>,
    imports: Vec<String>,
    target: Option<String>,
}

/// The top-level import and export names of `component` (`wasi:clocks/wall-clock@0.2.6`,
/// `switchyard:policy/incremental-scheduler@0.3.0`), not those of the modules and
/// components nested inside it.
fn world_of(component: &[u8]) -> Result<ComponentWorld, NotComponent> {
    let malformed =
        |error: wasmparser::BinaryReaderError| NotComponent::Malformed(error.to_string());
    let mut world = ComponentWorld {
        exports: Vec::new(),
        imports: Vec::new(),
        target: None,
    };
    // `parse_all` walks into nested modules and components; each ends with its own `End`.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        match payload.map_err(malformed)? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    world
                        .imports
                        .push(import.map_err(malformed)?.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    world
                        .exports
                        .push(export.map_err(malformed)?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(world)
}

/// What a push sends: the config blob and the manifest, serialised, for one component.
pub(crate) struct Layout {
    /// The config blob's bytes.
    pub(crate) config: Vec<u8>,
    /// The config blob's digest.
    pub(crate) config_digest: Digest,
    /// The manifest's bytes, exactly as pushed: its digest is the artifact's.
    pub(crate) manifest: Vec<u8>,
}

/// The artifact of `component` (already checked by [`check_header`]), whose digest is
/// `component_digest`, created at `created`, saved as the file `title` by tools that save
/// layers as files.
pub(crate) fn layout(
    component: &[u8],
    component_digest: Digest,
    created: DateTime<Utc>,
    title: &str,
) -> Result<Layout, NotComponent> {
    let config = WasmConfig {
        created,
        author: None,
        architecture: "wasm",
        os: "wasip2",
        layer_digests: vec![component_digest.to_string()],
        component: world_of(component)?,
    };
    let config = serde_json::to_vec(&config).expect("the config serialises");
    let config_digest = Digest::of(&config);
    let descriptor = |media_type: &str, digest: Digest, size: usize| OciDescriptor {
        media_type: media_type.to_string(),
        digest: digest.to_string(),
        size: size as i64,
        ..Default::default()
    };
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_string()),
        config: descriptor(CONFIG_MEDIA_TYPE, config_digest, config.len()),
        layers: vec![OciDescriptor {
            annotations: Some([(TITLE_ANNOTATION.to_string(), title.to_string())].into()),
            ..descriptor(LAYER_MEDIA_TYPE, component_digest, component.len())
        }],
        ..Default::default()
    };
    let manifest = serde_json::to_vec(&manifest).expect("the manifest serialises");
    Ok(Layout {
        config,
        config_digest,
        manifest,
    })
}

/// The component layer a pulled manifest describes: its descriptor, digest and declared
/// size, if the manifest is a Wasm component's.
pub(crate) struct ComponentLayer {
    /// The layer's descriptor, as the registry's blob API wants it.
    pub(crate) descriptor: OciDescriptor,
    /// The layer's digest: the SHA-256 of the component's bytes.
    pub(crate) digest: Digest,
    /// The size the manifest declares.
    pub(crate) size: u64,
}

/// Reads `manifest` (the bytes a registry returned) as a Wasm component's manifest.
pub(crate) fn component_layer(manifest: &[u8]) -> Result<ComponentLayer, NotComponent> {
    // The media type first: an index or a manifest list has no config to read.
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Typed {
        media_type: Option<String>,
    }
    let unreadable = |e: serde_json::Error| NotComponent::Manifest(e.to_string());
    let typed: Typed = serde_json::from_slice(manifest).map_err(unreadable)?;
    if let Some(media_type) = typed.media_type
        && media_type != MANIFEST_MEDIA_TYPE
    {
        return Err(NotComponent::ManifestMediaType(media_type));
    }
    let manifest: OciImageManifest = serde_json::from_slice(manifest).map_err(unreadable)?;
    let config = manifest.config.media_type.as_str();
    if config != CONFIG_MEDIA_TYPE && config != LEGACY_CONFIG_MEDIA_TYPE {
        return Err(NotComponent::ConfigMediaType(config.to_string()));
    }
    let [layer] = <[OciDescriptor; 1]>::try_from(manifest.layers)
        .map_err(|layers| NotComponent::LayerCount(layers.len()))?;
    if layer.media_type != LAYER_MEDIA_TYPE && layer.media_type != LEGACY_LAYER_MEDIA_TYPE {
        return Err(NotComponent::LayerMediaType(layer.media_type));
    }
    let digest = Digest::parse(&layer.digest)
        .map_err(|_| NotComponent::LayerDigest(layer.digest.clone()))?;
    let size = u64::try_from(layer.size).unwrap_or(0);
    Ok(ComponentLayer {
        descriptor: layer,
        digest,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the header alone.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[test]
    fn the_header_tells_a_component_from_a_module_and_from_anything_else() {
        assert_eq!(check_header(EMPTY_COMPONENT), Ok(()));
        assert_eq!(
            check_header(b"\0asm\x01\x00\x00\x00"),
            Err(NotComponent::CoreModule)
        );
        assert_eq!(check_header(b"{\"json\": 1}"), Err(NotComponent::NotWasm));
        assert_eq!(check_header(b"\0asm"), Err(NotComponent::NotWasm));
        assert_eq!(
            check_header(b"\0asm\x0d\x00\x07\x00"),
            Err(NotComponent::UnknownLayer {
                version: 13,
                layer: 7
            })
        );
    }

    #[test]
    fn the_layout_is_the_one_wkg_writes_and_reads_back_as_a_component() {
        let digest = Digest::of(EMPTY_COMPONENT);
        let created = DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&Utc);
        let layout = layout(EMPTY_COMPONENT, digest, created, "empty.wasm").unwrap();
        let config: serde_json::Value = serde_json::from_slice(&layout.config).unwrap();
        assert_eq!(
            config,
            serde_json::json!({
                "created": "2026-01-02T03:04:05Z",
                "author": null,
                "architecture": "wasm",
                "os": "wasip2",
                "layerDigests": [digest.to_string()],
                "component": {"exports": [], "imports": [], "target": null},
            })
        );
        assert_eq!(layout.config_digest, Digest::of(&layout.config));
        let manifest: serde_json::Value = serde_json::from_slice(&layout.manifest).unwrap();
        assert_eq!(manifest["mediaType"], MANIFEST_MEDIA_TYPE);
        assert_eq!(manifest["config"]["mediaType"], CONFIG_MEDIA_TYPE);
        assert_eq!(manifest["layers"][0]["mediaType"], LAYER_MEDIA_TYPE);
        assert_eq!(
            manifest["layers"][0]["annotations"][TITLE_ANNOTATION],
            "empty.wasm"
        );
        let layer = component_layer(&layout.manifest).unwrap();
        assert_eq!(layer.digest, digest);
        assert_eq!(layer.size, EMPTY_COMPONENT.len() as u64);
    }

    #[test]
    fn a_container_image_manifest_is_not_a_component() {
        let image = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": Digest::of(b"{}").to_string(), "size": 2},
            "layers": [],
        });
        let error = component_layer(&serde_json::to_vec(&image).unwrap()).err();
        assert_eq!(
            error,
            Some(NotComponent::ConfigMediaType(
                "application/vnd.oci.image.config.v1+json".into()
            ))
        );
    }
}
