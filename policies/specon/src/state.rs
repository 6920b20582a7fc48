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
    Job, incremental, placement::EvenSpread, progress::Scale, shown::id_hash, state::same_bytes,
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
        BASE64.encode(self.postcard().0).into_bytes()
    }

    /// The postcard bytes, and where `last_round` starts in them. postcard writes a
    /// struct as its fields one after the other, so these are the bytes of the whole.
    fn postcard(&self) -> (Vec<u8>, usize) {
        let fail = "the policy state serialises";
        let bytes = postcard::to_extend(&self.spread, Vec::new()).expect(fail);
        let at = bytes.len();
        let bytes = postcard::to_extend(&self.last_round, bytes).expect(fail);
        (postcard::to_extend(&self.jobs, bytes).expect(fail), at)
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
    /// The jobs' id hashes and states, in the call's snapshot order.
    hashes: Vec<u64>,
    jobs: Vec<JobState>,
    /// Set when the call was made on a held snapshot.
    unchanged: Option<Unchanged>,
}

/// What a timer round may take from the previous call: most rounds of a long trace are
/// ticks on the same jobs (SpeCon's monitor interval, whether or not any job reports a
/// loss sample), and encoding the blob of every queued job again was a third of them.
pub struct Unchanged {
    /// [`incremental::held_version`] at the call: the same nodes and jobs while equal.
    version: u64,
    /// The postcard bytes inside the blob, and where `last_round` starts in them.
    bytes: Vec<u8>,
    last_round_at: usize,
    /// The initial placement placed a job (and so could again, were it retried).
    pub placed: bool,
    /// Each job's state as the blob holds it, in snapshot order.
    before: Vec<JobState>,
}

/// What [`take_kept`] hands back.
pub struct Taken {
    /// The arrival counter.
    pub spread: EvenSpread,
    /// The last monitor round.
    pub last_round: Option<f64>,
    /// Each snapshot job's state, in its order.
    pub jobs: Vec<JobState>,
    /// The previous call's view, when it saw the same nodes and jobs as this one.
    pub unchanged: Option<Unchanged>,
    /// The snapshot jobs' id hashes, in its order.
    hashes: Vec<u64>,
    /// The blob it returned.
    blob: Vec<u8>,
}

thread_local! {
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

#[cfg(test)]
thread_local! {
    /// Blobs written by patching the previous one.
    static PATCHED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The arrival counter, the last monitor round and each of `jobs`' state, from the
/// state this instance kept when `blob` is the blob it returned last; `None` otherwise
/// (decode the blob then).
pub fn take_kept(blob: &[u8], jobs: &[Job]) -> Option<Taken> {
    let kept = KEPT.with(|k| k.borrow_mut().take())?;
    if !same_bytes(&kept.blob, blob) {
        return None;
    }
    let same_jobs = kept.unchanged.as_ref().is_some_and(|u| {
        incremental::held_version() == Some(u.version) && kept.jobs.len() == jobs.len()
    });
    if same_jobs {
        // The same jobs in the same order: the kept states are theirs as they stand.
        let unchanged = kept.unchanged.map(|u| Unchanged {
            before: kept.jobs.clone(),
            ..u
        });
        return Some(Taken {
            spread: kept.spread,
            last_round: kept.last_round,
            jobs: kept.jobs,
            unchanged,
            hashes: kept.hashes,
            blob: kept.blob,
        });
    }
    let hashes: Vec<u64> = jobs.iter().map(|j| id_hash(&j.id)).collect();
    let saved = kept.hashes.into_iter().zip(kept.jobs).collect();
    Some(Taken {
        spread: kept.spread,
        last_round: kept.last_round,
        jobs: align_by(saved, &hashes),
        unchanged: None,
        hashes,
        blob: kept.blob,
    })
}

/// The blob of `state`, kept with it for the next [`take_kept`]. `spread_same` says the
/// arrival numbers are those of the call `taken` came from; `placed`, that this call's
/// initial placement placed a job. When the nodes, the jobs, their states and the
/// arrival numbers are as the previous call left them, only the monitor round's time
/// can differ: the previous blob is patched where it holds that time (base64 writes
/// each 3 bytes as 4 characters, so the patch stays local) instead of encoding every
/// job again.
pub fn encode_and_keep(
    state: State<'_>,
    taken: Option<Taken>,
    spread_same: bool,
    placed: bool,
) -> Vec<u8> {
    let version = incremental::held_version();
    let (hashes, patched) = match taken {
        Some(t) => {
            let patched = t
                .unchanged
                .filter(|u| spread_same && same_states(&u.before, &state.jobs))
                .and_then(|u| patch_last_round(t.blob, u.bytes, u.last_round_at, state.last_round));
            (t.hashes, patched)
        }
        None => (state.jobs.iter().map(|(id, _)| id_hash(id)).collect(), None),
    };
    let (blob, bytes, last_round_at) = match patched {
        Some(done) => {
            #[cfg(test)]
            PATCHED.with(|n| n.set(n.get() + 1));
            done
        }
        None => {
            let (bytes, last_round_at) = state.postcard();
            (BASE64.encode(&bytes).into_bytes(), bytes, last_round_at)
        }
    };
    let unchanged = version.map(|version| Unchanged {
        version,
        bytes,
        last_round_at,
        placed,
        before: Vec::new(),
    });
    let kept = Kept {
        blob: blob.clone(),
        spread: state.spread,
        last_round: state.last_round,
        hashes,
        jobs: state.jobs.into_iter().map(|(_, s)| s).collect(),
        unchanged,
    };
    KEPT.with(|k| *k.borrow_mut() = Some(kept));
    blob
}

/// The states `before` as the blob holds them are those of `now`, job by job.
fn same_states(before: &[JobState], now: &[(&str, JobState)]) -> bool {
    before.len() == now.len() && before.iter().zip(now).all(|(a, (_, b))| a == b)
}

/// `blob` (base64 of `bytes`) with the monitor round's time at `at` in `bytes` set to
/// `last_round`; `None` when the encoding would change length (no round before).
fn patch_last_round(
    mut blob: Vec<u8>,
    mut bytes: Vec<u8>,
    at: usize,
    last_round: Option<f64>,
) -> Option<(Vec<u8>, Vec<u8>, usize)> {
    let time = last_round?;
    // postcard writes `Some(x)` as a 1 and the 8 bytes of x, little-endian.
    if bytes.get(at) != Some(&1) || bytes.len() < at + 9 {
        return None;
    }
    bytes[at + 1..at + 9].copy_from_slice(&time.to_le_bytes());
    let first = (at + 1) / 3;
    let end = ((at + 9).div_ceil(3) * 3).min(bytes.len());
    let text = BASE64.encode(&bytes[3 * first..end]);
    blob.get_mut(4 * first..4 * first + text.len())?
        .copy_from_slice(text.as_bytes());
    Some((blob, bytes, at))
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

    /// A kept instance on a held snapshot, ticked with changes that move the clock only,
    /// against a fresh instance given the same snapshot and blob every round.
    #[test]
    fn ticks_on_a_kept_instance_decide_and_write_as_a_fresh_instance_would() {
        use switchyard_policy_sdk::testing::{JobBuilder, node, tick_delta};
        use switchyard_policy_sdk::{Decision, incremental};
        const CONVERGING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.995), (60.0, 0.992)];
        let nodes = vec![node("w1", 8000), node("w2", 8000)];
        let jobs = vec![
            job("c").running_on("w1").loss(CONVERGING),
            job("still").running_on("w2").requests(7000, 0),
            job("big").requests(16_000, 0),
            job("bigger").requests(20_000, 0),
        ];
        let delta = |t: f64, reset: bool| tick_delta(t, reset, &nodes, &jobs);
        let same = |a: &Decision, b: &Decision| {
            assert_eq!(format!("{:?}", a.actions), format!("{:?}", b.actions));
            assert_eq!(format!("{:?}", a.labels), format!("{:?}", b.labels));
            assert_eq!(a.next_call_after, b.next_call_after);
            assert_eq!(a.state, b.state);
        };
        PATCHED.with(|n| n.set(0));
        let mut blob = Vec::new();
        for round in 0..12 {
            let t = 30.0 * round as f64;
            let (kept, held) = incremental::with_applied(delta(t, round == 0), |s| {
                (crate::policy::decide(&[], s, &blob).unwrap(), s.clone())
            })
            .unwrap();
            // A fresh instance: nothing kept (the kept instance's memory is put back).
            let mine = KEPT.with(|k| k.borrow_mut().take());
            let fresh = crate::policy::decide(&[], &held, &blob).unwrap();
            KEPT.with(|k| *k.borrow_mut() = mine);
            same(&kept, &fresh);
            blob = kept.state;
        }
        assert!(
            PATCHED.with(|n| n.get()) >= 6,
            "the quiet rounds patched the blob"
        );
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
