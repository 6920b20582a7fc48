//! Policy references (`oci://REGISTRY/REPOSITORY:TAG`, `...@sha256:DIGEST`) and the
//! SHA-256 digests that pin them. Parsing only: this module never speaks to a registry,
//! and it names no default registry (a reference always says where it points).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};
use thiserror::Error;

/// What every policy reference starts with.
pub const SCHEME: &str = "oci://";

/// The longest tag the OCI distribution specification allows.
const MAX_TAG_LEN: usize = 128;

/// The longest repository name the OCI distribution specification allows.
const MAX_REPOSITORY_LEN: usize = 255;

/// A SHA-256 content digest, written `sha256:` and 64 lowercase hex digits: what a
/// registry names a manifest or a blob by.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The digest a finished SHA-256 hasher holds.
    pub(crate) fn from_hasher(hasher: Sha256) -> Self {
        Self(hasher.finalize().into())
    }

    /// Reads `sha256:` and 64 lowercase hex digits.
    pub fn parse(text: &str) -> Result<Self, BadDigest> {
        let Some((algorithm, hex_digits)) = text.split_once(':') else {
            return Err(BadDigest::Hex(text.to_string()));
        };
        if algorithm != "sha256" {
            return Err(BadDigest::Algorithm(algorithm.to_string()));
        }
        let lowercase = hex_digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let mut bytes = [0u8; 32];
        match hex::decode_to_slice(hex_digits, &mut bytes) {
            Ok(()) if lowercase => Ok(Self(bytes)),
            _ => Err(BadDigest::Hex(hex_digits.to_string())),
        }
    }

    /// The 64 hex digits, without `sha256:`.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = BadDigest;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Why a digest was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BadDigest {
    /// An algorithm other than SHA-256.
    #[error("has digest algorithm `{0}`: only sha256 is accepted")]
    Algorithm(String),
    /// Not 64 lowercase hex digits.
    #[error("has digest `{0}`: a digest is sha256: and 64 lowercase hex digits")]
    Hex(String),
}

/// A policy in an OCI registry: `oci://REGISTRY/REPOSITORY` with a `:TAG`, an
/// `@sha256:DIGEST`, or both. A reference with a digest is pinned: it names exactly one
/// manifest, whatever the tag points at now.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

impl Reference {
    /// Reads a reference, refusing anything but `oci://REGISTRY/REPOSITORY:TAG`,
    /// `oci://REGISTRY/REPOSITORY@sha256:DIGEST` and `...:TAG@sha256:DIGEST`.
    pub fn parse(text: &str) -> Result<Self, ReferenceError> {
        let fail = |problem| ReferenceError {
            text: text.to_string(),
            problem,
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| fail(Problem::NotOci))?;
        let (registry, path) = rest
            .split_once('/')
            .filter(|(_, path)| !path.is_empty())
            .ok_or_else(|| fail(Problem::NoRepository))?;
        if !is_registry(registry) {
            return Err(fail(Problem::Registry(registry.to_string())));
        }
        let (name, digest) = match path.split_once('@') {
            Some((name, digest)) => (
                name,
                Some(Digest::parse(digest).map_err(|bad| fail(Problem::Digest(bad)))?),
            ),
            None => (path, None),
        };
        // A tag follows the last `:` of the last path component (a registry's port is
        // already split off).
        let last_slash = name.rfind('/').map_or(0, |at| at + 1);
        let (repository, tag) = match name[last_slash..].rfind(':') {
            Some(at) => (&name[..last_slash + at], Some(&name[last_slash + at + 1..])),
            None => (name, None),
        };
        if repository.is_empty() {
            return Err(fail(Problem::NoRepository));
        }
        if repository.len() > MAX_REPOSITORY_LEN {
            return Err(fail(Problem::RepositoryLength(repository.len())));
        }
        if let Some(component) = repository.split('/').find(|c| !is_path_component(c)) {
            return Err(fail(Problem::RepositoryComponent(component.to_string())));
        }
        if let Some(tag) = tag.filter(|t| !is_tag(t)) {
            return Err(fail(Problem::Tag(tag.to_string())));
        }
        if tag.is_none() && digest.is_none() {
            return Err(fail(Problem::NoTagOrDigest));
        }
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// Whether `text` is written as a policy reference (starts with `oci://`) rather than
    /// as a file or a built-in policy's name; [`Reference::parse`] says whether it is a
    /// good one.
    pub fn is_reference(text: &str) -> bool {
        text.starts_with(SCHEME)
    }

    /// The registry: a host name or address, with an optional `:PORT`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository inside the registry (`team/fair`).
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if the reference names one.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The manifest's digest, if the reference is pinned.
    pub fn digest(&self) -> Option<Digest> {
        self.digest
    }

    /// The same reference pinned to `digest` (its tag, if any, kept for people to read).
    pub fn pinned(&self, digest: Digest) -> Self {
        Self {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// The reference in `oci-client`'s terms.
    pub(crate) fn to_oci(&self) -> oci_client::Reference {
        let (registry, repository) = (self.registry.clone(), self.repository.clone());
        match (&self.tag, self.digest) {
            (Some(tag), Some(digest)) => oci_client::Reference::with_tag_and_digest(
                registry,
                repository,
                tag.clone(),
                digest.to_string(),
            ),
            (None, Some(digest)) => {
                oci_client::Reference::with_digest(registry, repository, digest.to_string())
            }
            (Some(tag), None) => oci_client::Reference::with_tag(registry, repository, tag.clone()),
            (None, None) => unreachable!("a parsed reference names a tag or a digest"),
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Reference {
    type Err = ReferenceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Serialize for Reference {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Reference {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A reference that could not be read: the text and what is wrong with it.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "policy reference `{text}` {problem}; a reference reads oci://REGISTRY/REPOSITORY:TAG, \
     oci://REGISTRY/REPOSITORY@sha256:DIGEST or oci://REGISTRY/REPOSITORY:TAG@sha256:DIGEST"
)]
pub struct ReferenceError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a reference.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Problem {
    /// It does not start with `oci://`.
    #[error("does not start with {SCHEME}")]
    NotOci,
    /// Nothing follows the registry.
    #[error("names no repository after the registry")]
    NoRepository,
    /// The registry is not a host name or address with an optional port.
    #[error(
        "has registry `{0}`, which is not a host name or address with an optional :PORT \
         (a registry is always named: there is no default one)"
    )]
    Registry(String),
    /// A repository path component breaks the distribution specification's grammar.
    #[error(
        "has repository path component `{0}`: a component is lowercase letters and digits, \
         joined by single `.`, `_` or `__`, or by dashes"
    )]
    RepositoryComponent(String),
    /// The repository name is longer than the specification allows.
    #[error("has a repository name of {0} characters; at most {MAX_REPOSITORY_LEN} are accepted")]
    RepositoryLength(usize),
    /// The tag breaks the specification's grammar.
    #[error(
        "has tag `{0}`: a tag is 1 to {MAX_TAG_LEN} letters, digits, `_`, `.` and `-`, not \
         starting with `.` or `-`"
    )]
    Tag(String),
    /// The digest is not a SHA-256 digest.
    #[error("{0}")]
    Digest(BadDigest),
    /// Neither a tag nor a digest.
    #[error("names neither a tag nor a digest (there is no implicit `latest`)")]
    NoTagOrDigest,
}

/// `host[:port]`: a host name (dot-separated labels of letters, digits and dashes, not
/// at a label's ends) or a bracketed IPv6 address, and an optional port.
fn is_registry(text: &str) -> bool {
    let (host_ok, port) = match text.strip_prefix('[') {
        Some(v6) => {
            let Some((address, rest)) = v6.split_once(']') else {
                return false;
            };
            let port = match rest {
                "" => None,
                _ => match rest.strip_prefix(':') {
                    Some(port) => Some(port),
                    None => return false,
                },
            };
            (address.parse::<std::net::Ipv6Addr>().is_ok(), port)
        }
        None => match text.split_once(':') {
            Some((host, port)) => (is_host_name(host), Some(port)),
            None => (is_host_name(text), None),
        },
    };
    host_ok && port.is_none_or(is_port)
}

/// Dot-separated labels of letters, digits and dashes, no label empty or starting or
/// ending with a dash.
fn is_host_name(host: &str) -> bool {
    !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A TCP port: 1 to 65535, in decimal digits.
fn is_port(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && text.parse::<u16>().is_ok_and(|n| n > 0)
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`, the distribution specification's path component.
fn is_path_component(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &text[start..i];
        let ok = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`, the distribution specification's tag.
fn is_tag(text: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_TAG_LEN
        && word(bytes[0])
        && bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn problem(text: &str) -> Problem {
        Reference::parse(text).unwrap_err().problem
    }

    #[test]
    fn a_tagged_reference_keeps_its_registry_port_repository_and_tag() {
        let r = Reference::parse("oci://127.0.0.1:5000/team/fair:1.4").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "team/fair");
        assert_eq!(r.tag(), Some("1.4"));
        assert_eq!(r.digest(), None);
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/team/fair:1.4");
    }

    #[test]
    fn a_pinned_reference_reads_back_as_written_with_or_without_its_tag() {
        for text in [
            format!("oci://reg.example.com/team/fair@sha256:{HEX}"),
            format!("oci://reg.example.com/team/fair:1.4@sha256:{HEX}"),
            format!("oci://[::1]:5000/fair:v1@sha256:{HEX}"),
        ] {
            let r = Reference::parse(&text).unwrap();
            assert_eq!(r.digest().unwrap().to_hex(), HEX);
            assert_eq!(r.to_string(), text);
            assert_eq!(r.to_oci().digest(), Some(format!("sha256:{HEX}").as_str()));
        }
    }

    #[test]
    fn pinning_keeps_the_tag_and_adds_the_digest() {
        let r = Reference::parse("oci://localhost:5000/fair:1.4").unwrap();
        let digest = Digest::of(b"manifest");
        let pinned = r.pinned(digest);
        assert_eq!(pinned.tag(), Some("1.4"));
        assert_eq!(pinned.digest(), Some(digest));
        assert_eq!(Reference::parse(&pinned.to_string()).unwrap(), pinned);
    }

    #[test]
    fn each_malformed_reference_is_refused_with_what_is_wrong() {
        assert_eq!(problem("registry.example.com/fair:1"), Problem::NotOci);
        assert_eq!(problem("oci://registry.example.com"), Problem::NoRepository);
        assert_eq!(
            problem("oci://registry.example.com/"),
            Problem::NoRepository
        );
        assert_eq!(
            problem("oci://registry.example.com/:1"),
            Problem::NoRepository
        );
        assert_eq!(
            problem("oci://reg_istry/fair:1"),
            Problem::Registry("reg_istry".into())
        );
        assert_eq!(
            problem("oci://registry:99999/fair:1"),
            Problem::Registry("registry:99999".into())
        );
        assert_eq!(
            problem("oci://registry/Team/fair:1"),
            Problem::RepositoryComponent("Team".into())
        );
        assert_eq!(
            problem("oci://registry/team//fair:1"),
            Problem::RepositoryComponent("".into())
        );
        assert_eq!(
            problem("oci://registry/team/fair..x:1"),
            Problem::RepositoryComponent("fair..x".into())
        );
        assert_eq!(problem("oci://registry/fair:.1"), Problem::Tag(".1".into()));
        assert_eq!(problem("oci://registry/fair:"), Problem::Tag("".into()));
        assert_eq!(
            problem("oci://registry/fair:1@sha512:abc"),
            Problem::Digest(BadDigest::Algorithm("sha512".into()))
        );
        assert_eq!(
            problem("oci://registry/fair@sha256:ABC"),
            Problem::Digest(BadDigest::Hex("ABC".into()))
        );
        assert_eq!(problem("oci://registry/fair"), Problem::NoTagOrDigest);
        let long = format!("oci://registry/{}:1", "a".repeat(256));
        assert_eq!(problem(&long), Problem::RepositoryLength(256));
    }

    #[test]
    fn the_message_names_the_reference_and_what_a_reference_looks_like() {
        let message = Reference::parse("oci://registry/fair")
            .unwrap_err()
            .to_string();
        assert!(message.contains("`oci://registry/fair`"), "{message}");
        assert!(message.contains("neither a tag nor a digest"), "{message}");
        assert!(
            message.contains("oci://REGISTRY/REPOSITORY:TAG"),
            "{message}"
        );
    }

    #[test]
    fn a_registry_is_a_host_name_or_address_with_an_optional_port() {
        for good in [
            "localhost",
            "localhost:5000",
            "reg.example.com",
            "127.0.0.1:5000",
            "[::1]",
            "[::1]:5000",
            "my-reg.example:443",
        ] {
            assert!(is_registry(good), "{good}");
        }
        for bad in [
            "",
            ":5000",
            "reg:",
            "reg:0",
            "reg:65536",
            "reg:5x",
            "-reg",
            "reg-.com",
            "a..b",
            "[::1",
            "[not-v6]:5",
            "[::1]x",
            "reg_1",
        ] {
            assert!(!is_registry(bad), "{bad}");
        }
    }

    #[test]
    fn path_components_follow_the_distribution_grammar() {
        for good in ["a", "a1", "a.b", "a_b", "a__b", "a-b", "a---b", "a.b-c_d"] {
            assert!(is_path_component(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a___b", "a._b", "A", "a..b", ".a"] {
            assert!(!is_path_component(bad), "{bad}");
        }
    }

    #[test]
    fn digests_round_trip_through_text_and_serde() {
        let digest = Digest::of(b"x");
        assert_eq!(Digest::parse(&digest.to_string()).unwrap(), digest);
        let json = serde_json::to_string(&digest).unwrap();
        assert_eq!(serde_json::from_str::<Digest>(&json).unwrap(), digest);
        let r = Reference::parse("oci://reg:5000/a/b:c").unwrap();
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, "\"oci://reg:5000/a/b:c\"");
        assert_eq!(serde_json::from_str::<Reference>(&json).unwrap(), r);
        assert!(serde_json::from_str::<Reference>("\"oci://reg/a\"").is_err());
    }
}
