//! The on-disk cache of pulled policies, keyed by digest: `DIR/manifests/sha256/HEX` holds
//! a manifest's bytes and `DIR/blobs/sha256/HEX` a component's, each under the SHA-256 of
//! its content. An entry is written whole or not at all (a temporary file renamed into
//! place), and read back only if its bytes still hash to its name, so a damaged entry is
//! dropped and pulled again rather than trusted. The cache knows nothing of tags: a tag
//! is resolved at the registry every time, and only what a digest names is kept.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::reference::Digest;

/// What a cache entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A manifest, under the digest a pinned reference names.
    Manifest,
    /// A component's bytes, under its layer digest.
    Blob,
}

impl Kind {
    fn folder(self) -> &'static str {
        match self {
            Kind::Manifest => "manifests",
            Kind::Blob => "blobs",
        }
    }
}

/// An on-disk cache of manifests and components, keyed by digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache in `dir` (created when something is first written to it).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file a component whose bytes hash to `digest` is kept in once it was pulled
    /// (a path; the file is there only after a pull that used this cache).
    pub fn component_path(&self, digest: Digest) -> PathBuf {
        self.path(Kind::Blob, digest)
    }

    /// Where the entry `digest` of `kind` lives.
    pub(crate) fn path(&self, kind: Kind, digest: Digest) -> PathBuf {
        self.dir
            .join(kind.folder())
            .join("sha256")
            .join(digest.to_hex())
    }

    /// The entry `digest` of `kind` if it is there, at most `limit` bytes, and still hashes
    /// to `digest`. A damaged entry is removed.
    pub(crate) fn read(&self, kind: Kind, digest: Digest, limit: u64) -> Option<Vec<u8>> {
        let path = self.path(kind, digest);
        let size = std::fs::metadata(&path).ok()?.len();
        if size > limit {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        if Digest::of(&bytes) == digest {
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "a cached entry does not match its digest; dropping it");
        if let Err(error) = std::fs::remove_file(&path) {
            tracing::warn!(path = %path.display(), %error, "cannot remove the damaged cache entry");
        }
        None
    }

    /// Keeps `bytes` as the entry `digest` of `kind`, atomically.
    pub(crate) fn write(&self, kind: Kind, digest: Digest, bytes: &[u8]) -> std::io::Result<()> {
        let path = self.path(kind, digest);
        let folder = path.parent().expect("an entry's path has a folder");
        std::fs::create_dir_all(folder)?;
        let mut file = tempfile::NamedTempFile::new_in(folder)?;
        file.write_all(bytes)?;
        file.as_file().sync_all()?;
        file.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_only_while_it_matches_its_digest_and_fits_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path());
        let bytes = b"a component".to_vec();
        let digest = Digest::of(&bytes);
        assert_eq!(cache.read(Kind::Blob, digest, 1 << 20), None);
        cache.write(Kind::Blob, digest, &bytes).unwrap();
        assert_eq!(cache.read(Kind::Blob, digest, 1 << 20), Some(bytes.clone()));
        assert_eq!(cache.read(Kind::Manifest, digest, 1 << 20), None);
        assert_eq!(cache.read(Kind::Blob, digest, 3), None, "over the limit");
        let path = cache.path(Kind::Blob, digest);
        assert_eq!(
            path,
            dir.path().join("blobs/sha256").join(digest.to_hex()),
            "the layout is DIR/blobs/sha256/HEX"
        );
        std::fs::write(&path, b"a damaged one").unwrap();
        assert_eq!(cache.read(Kind::Blob, digest, 1 << 20), None);
        assert!(!path.exists(), "the damaged entry is dropped");
    }
}
