//! What SpeCon remembers between calls, and the blob it travels in.
//!
//! The blob holds an entry per active job and is decoded and encoded on every call, so
//! its encoding is chosen for that: `postcard` (compact, serde-based, floats exact),
//! wrapped in base64 so the blob stays UTF-8 text, which the host's fixture files
//! (`policy test --save-snapshots`) need to keep it. The SDK's JSON was up to half of a
//! round on a 5,000-job cluster, spent writing and parsing field names and floats; the
//! price is that the blob is no longer readable as it stands.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use switchyard_policy_sdk::{
    Job, placement::EvenSpread, progress::Scale, shown::id_hash, state::same_bytes,
};

use std::collections::HashMap;
use std::hash::Hash;

use crate::monitor::Category;

/// What SpeCon remembers about one job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    /// Current category.
    pub category: Category,
    /// Divisor of its evaluation values.
    pub scale: Scale,
    /// Normalised E at the previous monitor round.
    pub last_value: Option<f64>,
    /// G at the previous monitor round.
    pub last_gain: Option<f64>,
    /// When it last entered CC.
    pub cc_since: Option<f64>,
    /// t_cj: when it was marked migrated (moved or stayed by Algorithm 2).
    pub converged_at: Option<f64>,
    /// Reallocated (or marked so) by this policy: at most once, even if the host's flag
    /// were lost.
    pub reallocated: bool,
    /// Rebalanced by this policy.
    pub rebalanced: bool,
    /// The `category` label last handed to the host, which keeps a job's labels until
    /// they are replaced: a label goes out only when this differs from `category`.
    pub shown: Option<Category>,
}

/// Everything SpeCon remembers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State<'a> {
    /// Initial even placement's arrival counter.
    pub spread: EvenSpread,
    /// Time of the last monitor round.
    pub last_round: Option<f64>,
    /// Every active job of the last call, in that call's snapshot order, so the next
    /// call finds most of them where it looks first (see [`align`]). Ids are borrowed
    /// from the decoded bytes, or from the snapshot when encoding.
    #[serde(borrow)]
    pub jobs: Vec<(&'a str, JobState)>,
}

/// The postcard bytes inside `blob` (none in the first call's empty blob), for
/// [`State::decode`] to borrow ids from.
pub fn unarmour(blob: &[u8]) -> Result<Vec<u8>, String> {
    BASE64
        .decode(blob)
        .map_err(|e| format!("cannot decode the policy state: not base64: {e}"))
}

impl<'a> State<'a> {
    /// Decodes the bytes [`unarmour`] took out of a blob; no bytes give the default.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.is_empty() {
            return Ok(Self::default());
        }
        postcard::from_bytes(bytes).map_err(|e| format!("cannot decode the policy state: {e}"))
    }

    /// The blob for the host to keep until the next call.
    pub fn encode(&self) -> Vec<u8> {
        let bytes = postcard::to_allocvec(self).expect("the policy state serialises");
        BASE64.encode(bytes).into_bytes()
    }
}

/// Each of `jobs`' remembered state, in their order (the default for a job not seen
/// before); saved jobs that are not in `jobs` any more are dropped.
///
/// `saved` is in the previous call's snapshot order, which the next snapshot mostly
/// keeps, so a job is first looked for just after the previous one found; only when
/// that misses (a job arrived, left or moved) is an index of the saved ids built, once.
pub fn align(saved: Vec<(&str, JobState)>, jobs: &[Job]) -> Vec<JobState> {
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    align_by(saved, &ids)
}

/// [`align`] by any key: `saved` under the previous call's keys, `now` this call's.
fn align_by<K: Copy + Eq + Hash>(saved: Vec<(K, JobState)>, now: &[K]) -> Vec<JobState> {
    let (ids, mut states): (Vec<K>, Vec<Option<JobState>>) =
        saved.into_iter().map(|(id, s)| (id, Some(s))).unzip();
    let mut index: Option<HashMap<K, usize>> = None;
    let mut next = 0;
    let mut find = |id: K| {
        let at = if ids.get(next) == Some(&id) {
            Some(next)
        } else {
            let index = index
                .get_or_insert_with(|| ids.iter().enumerate().map(|(i, id)| (*id, i)).collect());
            index.get(&id).copied()
        };
        if let Some(i) = at {
            next = i + 1;
        }
        at.and_then(|i| states[i].take()).unwrap_or_default()
    };
    now.iter().map(|&id| find(id)).collect()
}

/// The state as this instance returned it last, for a host that keeps the instance
/// and hands the same blob back: decoding a blob of every live job (an ordered walk of
/// the arrival numbers, a string per job) was a sixth of a round on a long trace.
/// Job ids are kept as their hashes ([`id_hash`]), so keeping costs no string per job.
struct Kept {
    blob: Vec<u8>,
    spread: EvenSpread,
    last_round: Option<f64>,
    jobs: Vec<(u64, JobState)>,
}

thread_local! {
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

/// The arrival counter, the last monitor round and each of `jobs`' state, from the
/// state this instance kept when `blob` is the blob it returned last; `None` otherwise
/// (decode the blob then).
pub fn take_kept(blob: &[u8], jobs: &[Job]) -> Option<(EvenSpread, Option<f64>, Vec<JobState>)> {
    let kept = KEPT.with(|k| k.borrow_mut().take())?;
    if !same_bytes(&kept.blob, blob) {
        return None;
    }
    let hashes: Vec<u64> = jobs.iter().map(|j| id_hash(&j.id)).collect();
    Some((kept.spread, kept.last_round, align_by(kept.jobs, &hashes)))
}

/// Keeps `state`, which was encoded as `blob`, for the next [`take_kept`].
pub fn keep(blob: &[u8], state: State<'_>) {
    let kept = Kept {
        blob: blob.to_vec(),
        spread: state.spread,
        last_round: state.last_round,
        jobs: state
            .jobs
            .into_iter()
            .map(|(id, s)| (id_hash(id), s))
            .collect(),
    };
    KEPT.with(|k| *k.borrow_mut() = Some(kept));
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::job;

    fn remembered(category: Category) -> JobState {
        JobState {
            category,
            last_value: Some(0.123_456_789_012_345_67),
            ..JobState::default()
        }
    }

    #[test]
    fn a_state_round_trips_exactly_through_utf8_text() {
        let st = State {
            last_round: Some(600.0),
            jobs: vec![("a", remembered(Category::CC)), ("b", JobState::default())],
            ..State::default()
        };
        let blob = st.encode();
        assert!(std::str::from_utf8(&blob).is_ok());
        let bytes = unarmour(&blob).unwrap();
        let back = State::decode(&bytes).unwrap();
        assert_eq!(back.last_round, st.last_round);
        assert_eq!(back.jobs, st.jobs);
        assert_eq!(back.encode(), blob);
    }

    #[test]
    fn an_empty_blob_is_the_first_call_and_garbage_is_an_error() {
        let bytes = unarmour(&[]).unwrap();
        assert!(State::decode(&bytes).unwrap().jobs.is_empty());
        assert!(unarmour(b"{not base64}").is_err());
        assert!(State::decode(&[0xff; 3]).is_err());
    }

    #[test]
    fn saved_jobs_follow_their_ids_whatever_the_order_and_leavers_are_dropped() {
        let saved = vec![
            ("a", remembered(Category::PC)),
            ("b", remembered(Category::WC)),
            ("c", remembered(Category::CC)),
            ("d", remembered(Category::WC)),
        ];
        // b left, e arrived, d and c swapped.
        let jobs = [job("a"), job("e"), job("d"), job("c")];
        let got: Vec<Category> = align(saved, &jobs).iter().map(|s| s.category).collect();
        assert_eq!(
            got,
            [Category::PC, Category::PC, Category::WC, Category::CC]
        );
        assert_eq!(
            align(vec![("a", remembered(Category::CC))], &[job("e")])[0],
            JobState::default()
        );
    }
}
