//! The state blob, written a job at a time: the JSON of [`State`], where each job's
//! entry is copied from the previous blob when its standing did not change.
//!
//! Tiresias keeps a standing per job of the queue, and the host hands the blob back
//! every round. Written by serde, it was two thirds of a round on the Philly trace (a
//! few floats formatted and an id escaped per queued job, every round). A job that waits
//! without having run keeps the same standing from round to round (the round's time is
//! written once, not per job), so its entry is the same bytes: only the jobs that run,
//! or wait after running, are written anew. The bytes are exactly serde's, so any reader
//! (a fresh instance, an operator with `jq`) sees the same JSON.

use std::cell::RefCell;
use std::ops::Range;

use switchyard_policy_sdk::state::{self, same_bytes};

use crate::policy::State;
use crate::queues::Standing;

/// A blob this instance wrote, and where each job's entry is in it.
pub struct Written {
    blob: Vec<u8>,
    entries: Vec<Range<usize>>,
}

/// What this instance last returned: the blob, its entries and the state it encodes.
struct Kept {
    written: Written,
    state: State,
}

thread_local! {
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// The state `blob` holds, and the blob's entries when this instance wrote it (its
/// entries may then be copied into the next blob; a fresh instance, or a blob from
/// elsewhere, is parsed and written whole).
pub fn read(blob: &[u8]) -> Result<(State, Option<Written>), String> {
    let kept = KEPT.with(|kept| kept.borrow_mut().take());
    if let Some(kept) = kept
        && same_bytes(&kept.written.blob, blob)
    {
        return Ok((kept.state, Some(kept.written)));
    }
    let mut st: State = state::decode(blob)?;
    if let Some(seen) = st.seen {
        for (_, standing) in &mut st.jobs {
            standing.seen = seen;
        }
    }
    Ok((st, None))
}

/// True when `before` and `after` write the same entry (the round's time is not part
/// of it). Compared bit for bit, as the writer would tell them apart.
pub fn same_entry(before: &Standing, after: &Standing) -> bool {
    before.queue == after.queue
        && before.ticket == after.ticket
        && before.executed.to_bits() == after.executed.to_bits()
        && before.total.to_bits() == after.total.to_bits()
        && before.waited.to_bits() == after.waited.to_bits()
        && before.shown == after.shown
}

/// The blob of `st`: the entry of job `i` is copied from `previous`'s entry
/// `reuse[i]` when there is one (the caller checked [`same_entry`] against the same
/// id), else written. Keeps the state and the blob for the next [`read`].
pub fn write(st: State, reuse: &[Option<usize>], previous: Option<&Written>) -> Vec<u8> {
    let size = previous.map_or(64 * st.jobs.len(), |p| p.blob.len()) + 64;
    let mut blob = Vec::with_capacity(size);
    let mut entries = Vec::with_capacity(st.jobs.len());
    blob.extend_from_slice(b"{\"jobs\":[");
    for (i, entry) in st.jobs.iter().enumerate() {
        if i > 0 {
            blob.push(b',');
        }
        let start = blob.len();
        match (previous, reuse.get(i).copied().flatten()) {
            (Some(p), Some(at)) => blob.extend_from_slice(&p.blob[p.entries[at].clone()]),
            _ => serde_json::to_writer(&mut blob, entry).expect("a standing serialises"),
        }
        entries.push(start..blob.len());
    }
    blob.extend_from_slice(b"],\"tickets\":");
    serde_json::to_writer(&mut blob, &st.tickets).expect("a number serialises");
    if let Some(seen) = st.seen {
        blob.extend_from_slice(b",\"seen\":");
        serde_json::to_writer(&mut blob, &seen).expect("a number serialises");
    }
    blob.push(b'}');
    let written = Written {
        blob: blob.clone(),
        entries,
    };
    KEPT.with(|kept| *kept.borrow_mut() = Some(Kept { written, state: st }));
    blob
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing(ticket: u64, executed: f64) -> Standing {
        Standing {
            ticket,
            executed,
            total: executed,
            ..Standing::default()
        }
    }

    fn state(jobs: &[(&str, Standing)], seen: f64) -> State {
        State {
            jobs: jobs
                .iter()
                .map(|(id, s)| (id.to_string(), s.clone()))
                .collect(),
            tickets: 9,
            seen: Some(seen),
        }
    }

    #[test]
    fn entries_copied_or_written_give_serde_s_own_bytes_and_read_back() {
        let first = state(&[("a", standing(0, 0.0)), ("b\"q", standing(1, 0.5))], 10.0);
        let whole = serde_json::to_vec(&first).unwrap();
        let blob = write(first, &[None, None], None);
        assert_eq!(blob, whole);
        let (back, written) = read(&blob).unwrap();
        let written = written.expect("this instance wrote it");
        assert_eq!(back.jobs[1].0, "b\"q");
        // `a` left, `b"q` is unchanged, `c` is new and `d` changed.
        let second = state(
            &[
                ("b\"q", standing(1, 0.5)),
                ("c", standing(2, 0.0)),
                ("d", standing(3, 1.0 / 3.0)),
            ],
            20.0,
        );
        let whole = serde_json::to_vec(&second).unwrap();
        let blob = write(second, &[Some(1), None, None], Some(&written));
        assert_eq!(String::from_utf8(blob.clone()), String::from_utf8(whole));
        // Another instance parses it; the time is given back to every standing.
        KEPT.with(|kept| *kept.borrow_mut() = None);
        let (fresh, written) = read(&blob).unwrap();
        assert!(written.is_none());
        assert!(fresh.jobs.iter().all(|(_, s)| s.seen == 20.0));
        assert_eq!(fresh.jobs[2].1.executed, 1.0 / 3.0);
    }

    #[test]
    fn a_blob_with_the_time_per_job_still_reads() {
        let old = br#"{"jobs":[["a",{"q":1,"n":4,"e":2.0,"t":3.0,"p":0.0,"c":50.0}]],"tickets":5}"#;
        KEPT.with(|kept| *kept.borrow_mut() = None);
        let (st, _) = read(old).unwrap();
        assert_eq!((st.jobs[0].1.queue, st.jobs[0].1.seen), (1, 50.0));
        assert_eq!(st.seen, None);
    }

    #[test]
    fn the_round_s_time_is_not_part_of_an_entry() {
        let mut later = standing(1, 2.0);
        later.seen = 99.0;
        assert!(same_entry(&standing(1, 2.0), &later));
        assert!(!same_entry(&standing(1, 2.0), &standing(1, 2.5)));
    }
}
