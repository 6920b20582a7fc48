//! The policy's state blob: whatever the policy wants to remember, as JSON bytes.
//!
//! JSON rather than a binary format so an operator can read a persisted state file when
//! a policy misbehaves; the blobs are small (per-job categories and counters).

use serde::{Serialize, de::DeserializeOwned};

/// Decodes the blob the host passed in; an empty blob (first call) gives the default.
pub fn decode<S: DeserializeOwned + Default>(blob: &[u8]) -> Result<S, String> {
    if blob.is_empty() {
        return Ok(S::default());
    }
    serde_json::from_slice(blob).map_err(|e| format!("cannot decode the policy state: {e}"))
}

/// Encodes the state for the host to keep until the next call.
pub fn encode<S: Serialize>(state: &S) -> Vec<u8> {
    serde_json::to_vec(state).expect("policy state types serialise to JSON")
}
