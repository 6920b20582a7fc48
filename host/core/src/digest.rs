//! The content digest that names a policy component: what the runtime caches compiled
//! code by and what the backends store a component under. It hashes bytes and knows
//! nothing of what they hold; it must not parse or compile them.

use sha2::{Digest as _, Sha256};

/// The content digest that identifies a component (SHA-256 of its bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComponentDigest([u8; 32]);

impl ComponentDigest {
    /// Digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// `sha256:` and the full hex digest.
    pub fn to_hex(&self) -> String {
        format!("sha256:{}", hex::encode(self.0))
    }

    /// The first 12 hex digits, for logs and error messages.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..6])
    }
}

impl std::fmt::Display for ComponentDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}
