//! Policies in OCI registries: the references operators write
//! (`oci://REGISTRY/REPOSITORY:TAG`, `...@sha256:DIGEST`), and pushing and pulling policy
//! components in the layout wasm-pkg-tools (`wkg`) uses, so that `wkg oci pull` or `oras`
//! users get the same artifact.
//!
//! - `reference`: [`Reference`] and [`Digest`], parsed with errors that name what is wrong.
//! - `artifact`: the wasm-pkg-tools layout (media types, the config blob) and what counts
//!   as a component (the Wasm magic and the component layer in the header).
//! - `credentials`: [`Credentials`] from a docker config JSON, the user's or a Kubernetes
//!   `dockerconfigjson` Secret's.
//! - `cache`: [`Cache`], manifests and components on disk, keyed by digest.
//! - `client`: [`Client`], which resolves a tag to a digest once, pushes ([`Pushed`]) and
//!   pulls ([`Pulled`]) verified against every digest and a size limit; TLS unless a
//!   registry is named insecure.
//! - `error`: [`Error`], each naming the reference it concerns.
//!
//! This crate stands beside the runtime: it moves bytes and checks that they are a
//! component, and it must not compile or run one, nor know where a reference was written
//! (settings, the API, the command line).

mod artifact;
mod cache;
mod client;
mod credentials;
mod error;
mod pull;
mod push;
mod reference;

pub use artifact::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, NotComponent};
pub use cache::Cache;
pub use client::{Client, ClientOptions};
pub use credentials::{Credentials, CredentialsError, CredentialsProblem};
pub use error::{Error, Size};
pub use pull::Pulled;
pub use push::Pushed;
pub use reference::{BadDigest, Digest, Problem, Reference, ReferenceError, SCHEME};
