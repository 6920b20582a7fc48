//! The policy's state blob: whatever the policy wants to remember, as JSON bytes.
//!
//! JSON rather than a binary format so an operator can read a persisted state file when
//! a policy misbehaves; the blobs are small (per-job categories and counters). A kept
//! instance need not parse its own blob back every round: [`decode_kept`] and
//! [`encode_kept`]; nor write every job's part again: [`Entries`].

use serde::{Serialize, de::DeserializeOwned};

pub use crate::entries::Entries;
use crate::memcmp::same_bytes;

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

/// A blob this instance returned and the value it encodes.
type Kept = (Vec<u8>, Box<dyn std::any::Any>);

thread_local! {
    /// The blob this instance last returned through [`encode_kept`], with its value.
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

/// [`decode`] for an instance the host keeps between calls: when `blob` is the blob
/// this instance returned last ([`encode_kept`]), the value it encoded is handed back
/// without parsing. A state of every live job parsed on every round of a long trace
/// would be much of the round; comparing the bytes is a fraction of parsing them. The value
/// is the one `decode` would give (JSON writes every `f64` so that it reads back
/// exactly), so a kept instance and a fresh one decide alike. Anything else (another
/// blob, a fresh instance, another type) is decoded.
pub fn decode_kept<S: DeserializeOwned + Default + 'static>(blob: &[u8]) -> Result<S, String> {
    let kept = KEPT.with(|kept| kept.borrow_mut().take());
    if let Some((bytes, value)) = kept
        && same_bytes(&bytes, blob)
        && let Ok(value) = value.downcast::<S>()
    {
        return Ok(*value);
    }
    decode(blob)
}

/// [`encode`], keeping the value and the bytes for the next [`decode_kept`].
pub fn encode_kept<S: Serialize + 'static>(state: S) -> Vec<u8> {
    let bytes = encode(&state);
    KEPT.with(|kept| *kept.borrow_mut() = Some((bytes.clone(), Box::new(state))));
    bytes
}

/// [`encode_kept`] for a state the caller knows to be the one `blob` (this call's blob)
/// holds: the blob comes back as it is, without encoding, and is kept with the value
/// for the next [`decode_kept`]. A round that changes nothing in a large state (a clock
/// per node, a label per job) then costs a copy of its bytes, not their encoding. A
/// fresh instance handed the same blob decodes the same value and, deciding alike,
/// hands the same bytes back.
pub fn keep_unchanged<S: 'static>(state: S, blob: &[u8]) -> Vec<u8> {
    let bytes = blob.to_vec();
    KEPT.with(|kept| *kept.borrow_mut() = Some((bytes.clone(), Box::new(state))));
    bytes
}

/// [`decode_kept`] for a state whose blob an [`Entries`] wrote (entries separated by
/// `separator`): the state and the entries as [`keep_with_entries`] left them when
/// `blob` is what this instance returned last; else the blob decoded, with entries
/// that will all be written anew.
pub fn decode_with_entries<S: DeserializeOwned + Default + 'static>(
    blob: &[u8],
    separator: &'static [u8],
) -> Result<(S, Entries), String> {
    let kept = KEPT.with(|kept| kept.borrow_mut().take());
    if let Some((bytes, value)) = kept
        && same_bytes(&bytes, blob)
        && let Ok(value) = value.downcast::<(S, Entries)>()
    {
        return Ok(*value);
    }
    Ok((decode(blob)?, Entries::new(separator)))
}

/// Keeps `state` and the `entries` that wrote `blob` for the next
/// [`decode_with_entries`].
pub fn keep_with_entries<S: 'static>(state: S, entries: Entries, blob: &[u8]) {
    KEPT.with(|kept| *kept.borrow_mut() = Some((blob.to_vec(), Box::new((state, entries)))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Counter {
        seen: Vec<(String, f64)>,
    }

    #[test]
    fn the_kept_value_comes_back_only_for_the_blob_it_was_encoded_as() {
        let first = Counter {
            seen: vec![("a".into(), 0.1 + 0.2)],
        };
        let blob = encode_kept(first);
        let back: Counter = decode_kept(&blob).unwrap();
        assert_eq!(back.seen, [("a".to_string(), 0.1 + 0.2)]);
        // Taken: a second read of the same blob parses it, to the same value.
        assert_eq!(decode_kept::<Counter>(&blob).unwrap(), back);
        encode_kept(Counter::default());
        let other = encode(&Counter {
            seen: vec![("b".into(), 1.0)],
        });
        assert_eq!(decode_kept::<Counter>(&other).unwrap().seen[0].0, "b");
    }
}
