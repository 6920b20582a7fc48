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
    entries: Vec<Entry>,
}

/// Where one job's entry is in a blob: `["<id>",{standing}]`, the standing starting
/// `id_len` bytes after `start` (the `[`, the id's JSON string and the comma), so a
/// changed standing is written after the id copied from there.
#[derive(Clone, Copy)]
struct Entry {
    start: usize,
    end: usize,
    id_len: usize,
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
/// `reuse[i]` when there is one and `same[i]` (the caller checked [`same_entry`]
/// against the same id); with an entry but a changed standing, the id is copied and
/// the standing written; else the entry is written. Runs of entries copied whole are
/// copied in one piece. Keeps the state and the blob for the next [`read`].
pub fn write(
    st: State,
    reuse: &[Option<usize>],
    same: &[bool],
    previous: Option<&Written>,
) -> Vec<u8> {
    let size = previous.map_or(64 * st.jobs.len(), |p| p.blob.len()) + 64;
    let mut blob = Vec::with_capacity(size);
    let mut entries = Vec::with_capacity(st.jobs.len());
    blob.extend_from_slice(b"{\"jobs\":[");
    // Entries of the previous blob to copy whole, not copied yet: they follow one
    // another there, commas included, and go to `blob` as one piece.
    let mut pending: Option<Range<usize>> = None;
    let flush = |blob: &mut Vec<u8>, entries: &mut Vec<Entry>, run: Option<Range<usize>>| {
        let (Some(run), Some(p)) = (run, previous) else {
            return;
        };
        let (from, to) = (p.entries[run.start].start, p.entries[run.end - 1].end);
        let start = blob.len();
        blob.extend_from_slice(&p.blob[from..to]);
        entries.extend(p.entries[run].iter().map(|e| Entry {
            start: e.start - from + start,
            end: e.end - from + start,
            id_len: e.id_len,
        }));
    };
    for (i, (id, standing)) in st.jobs.iter().enumerate() {
        let at = previous.and(reuse.get(i).copied().flatten());
        let whole = at.filter(|_| same.get(i).copied().unwrap_or(false));
        if let Some(at) = whole {
            match &mut pending {
                Some(run) if run.end == at => run.end = at + 1,
                _ => {
                    flush(&mut blob, &mut entries, pending.take());
                    if i > 0 {
                        blob.push(b',');
                    }
                    pending = Some(at..at + 1);
                }
            }
            continue;
        }
        flush(&mut blob, &mut entries, pending.take());
        if i > 0 {
            blob.push(b',');
        }
        let start = blob.len();
        let id_len = match (previous, at) {
            (Some(p), Some(at)) => {
                let e = p.entries[at];
                blob.extend_from_slice(&p.blob[e.start..e.start + e.id_len]);
                e.id_len
            }
            _ => {
                blob.push(b'[');
                serde_json::to_writer(&mut blob, id).expect("an id serialises");
                blob.push(b',');
                blob.len() - start
            }
        };
        write_standing(&mut blob, standing);
        blob.push(b']');
        entries.push(Entry {
            start,
            end: blob.len(),
            id_len,
        });
    }
    flush(&mut blob, &mut entries, pending.take());
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

/// `standing` as serde writes it (the fields in their order, `c` skipped, `s` only
/// when set), without serde's machinery around each field: a round writes every job
/// that runs, or waits after having run. A job's two clocks mostly hold the same
/// value, written once and copied.
fn write_standing(out: &mut Vec<u8>, standing: &Standing) {
    use serde_json::ser::{CompactFormatter, Formatter};
    let number = |out: &mut Vec<u8>, value: f64| {
        if value.fract() == 0.0 && value.abs() < 1e15 && !(value == 0.0 && value.is_sign_negative())
        {
            // A whole number of seconds (a trace's times are): written as the integer
            // and `.0`, as the float writer writes it, at a fraction of its cost.
            CompactFormatter
                .write_i64(out, value as i64)
                .expect("writing to a Vec");
            out.extend_from_slice(b".0");
        } else if value.is_finite() {
            CompactFormatter
                .write_f64(out, value)
                .expect("writing to a Vec");
        } else {
            out.extend_from_slice(b"null");
        }
    };
    let integer = |out: &mut Vec<u8>, value: u64| {
        CompactFormatter
            .write_u64(out, value)
            .expect("writing to a Vec");
    };
    out.extend_from_slice(b"{\"q\":");
    integer(out, standing.queue as u64);
    out.extend_from_slice(b",\"n\":");
    integer(out, standing.ticket);
    out.extend_from_slice(b",\"e\":");
    let executed = out.len();
    number(out, standing.executed);
    out.extend_from_slice(b",\"t\":");
    if standing.total.to_bits() == standing.executed.to_bits() {
        let end = out.len() - b",\"t\":".len();
        out.extend_from_within(executed..end);
    } else {
        number(out, standing.total);
    }
    out.extend_from_slice(b",\"p\":");
    number(out, standing.waited);
    if let Some(shown) = standing.shown {
        out.extend_from_slice(b",\"s\":");
        integer(out, shown as u64);
    }
    out.push(b'}');
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
        let blob = write(first, &[None, None], &[false, false], None);
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
        let blob = write(
            second,
            &[Some(1), None, None],
            &[true, false, false],
            Some(&written),
        );
        assert_eq!(String::from_utf8(blob.clone()), String::from_utf8(whole));
        // `b"q` ran (its id, quote escaped, is copied, its standing written), `c` and
        // `d` are copied in one piece, `e` is new.
        let (_, written) = read(&blob).unwrap();
        let third = state(
            &[
                ("b\"q", standing(1, 0.75)),
                ("c", standing(2, 0.0)),
                ("d", standing(3, 1.0 / 3.0)),
                ("e", standing(4, 0.0)),
            ],
            30.0,
        );
        let whole = serde_json::to_vec(&third).unwrap();
        let blob = write(
            third,
            &[Some(0), Some(1), Some(2), None],
            &[false, true, true, false],
            written.as_ref(),
        );
        assert_eq!(String::from_utf8(blob.clone()), String::from_utf8(whole));
        // Another instance parses it; the time is given back to every standing.
        KEPT.with(|kept| *kept.borrow_mut() = None);
        let (fresh, written) = read(&blob).unwrap();
        assert!(written.is_none());
        assert!(fresh.jobs.iter().all(|(_, s)| s.seen == 30.0));
        assert_eq!(fresh.jobs[2].1.executed, 1.0 / 3.0);
    }

    #[test]
    fn a_standing_is_written_as_serde_writes_it() {
        let cases = [
            Standing::default(),
            Standing {
                queue: 3,
                ticket: u64::MAX,
                executed: 1.0 / 3.0,
                total: 1e300,
                waited: f64::NAN,
                seen: 7.0,
                shown: Some(2),
            },
            Standing {
                executed: 60.5,
                total: 60.5,
                waited: -0.0,
                shown: Some(0),
                ..Standing::default()
            },
            Standing {
                executed: f64::INFINITY,
                total: f64::INFINITY,
                ..Standing::default()
            },
        ];
        for standing in cases {
            let mut mine = Vec::new();
            write_standing(&mut mine, &standing);
            let serde = serde_json::to_vec(&standing).unwrap();
            assert_eq!(String::from_utf8(mine), String::from_utf8(serde));
        }
    }

    #[test]
    fn whole_numbers_are_written_as_the_float_writer_writes_them() {
        let mut seed: u64 = 0x7135;
        let mut draw = || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            seed >> 11
        };
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            9.0,
            10.0,
            99_999.0,
            1e14,
            1e15 - 1.0,
            1e15,
        ];
        values.extend((0..16).map(|e| 10f64.powi(e) + 0.5));
        for _ in 0..2000 {
            let digits = draw() % 16;
            let value = (draw() % 10u64.pow(digits as u32 + 1)) as f64;
            values.extend([value, -value, value / 8.0]);
        }
        for value in values {
            let standing = Standing {
                executed: value,
                total: value + 60.0,
                waited: -value,
                ..Standing::default()
            };
            let mut mine = Vec::new();
            write_standing(&mut mine, &standing);
            let serde = serde_json::to_vec(&standing).unwrap();
            assert_eq!(String::from_utf8(mine), String::from_utf8(serde), "{value}");
        }
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
