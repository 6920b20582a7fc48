//! The state blob, written a job at a time: the JSON of [`State`], where each job's
//! entry is copied from the previous blob, and only the numbers that changed are
//! written over.
//!
//! Tiresias keeps a standing per job of the queue, and on a busy trace nearly every
//! standing changes every round: a running job's service grows, and so does the
//! waiting time of a job that ran before. Written anew each round, the entries would be
//! most of a round. So each number of an entry has a fixed width (right-aligned, the
//! spaces in front being JSON's whitespace): an entry keeps its place and length, the
//! blob is copied as it was, and a changed number is written over its own field. The
//! numbers are the ones serde writes (the shortest text that reads back exactly), so
//! any reader (a fresh instance, an operator with `jq`) reads the same state; a blob
//! of serde's compact form reads as well.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};
use switchyard_policy_sdk::{
    Job, Snapshot, changes::Follow, memcmp::same_bytes, shown::id_hash, state,
};

use crate::facts::Facts;
use crate::queues::Standing;

/// What survives between calls: the JSON of the blob.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    /// Each active job's standing, in snapshot order.
    pub(crate) jobs: Vec<(String, Standing)>,
    /// The next queue ticket.
    pub(crate) tickets: u64,
    /// The time of the round that wrote it, which every standing was brought to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) seen: Option<f64>,
}

/// Where one job's entry is in the last blob: `["<id>",{standing}]`, the standing
/// starting `id_len` bytes after `start` (the `[`, the id's JSON string and the comma).
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: usize,
    end: usize,
    id_len: usize,
}

/// What Tiresias keeps of one job of the snapshot.
#[derive(Clone, Debug, Default)]
pub struct Slot {
    id: String,
    /// Its standing; none for a job new to the policy, which gets one (and its ticket)
    /// when the round reaches it, in snapshot order.
    pub standing: Option<Standing>,
    /// What a round needs of the job, read from its tasks when it changed.
    pub facts: Facts,
    /// Its entry in the last blob.
    entry: Option<Entry>,
    /// The standing that entry holds.
    written: Option<Standing>,
}

impl Slot {
    /// The slot of `job`, keeping what `old` held when it is the same job's.
    fn of(job: &Job, old: Option<Slot>) -> Self {
        match old {
            Some(old) if old.id == job.id => Self {
                facts: Facts::of(job),
                ..old
            },
            _ => Self {
                id: job.id.clone(),
                facts: Facts::of(job),
                ..Self::default()
            },
        }
    }
}

/// Everything Tiresias keeps between the calls of an instance.
#[derive(Debug, Default)]
pub struct Memory {
    /// Each job of the snapshot, in its order.
    pub slots: Follow<Slot>,
    /// The next queue ticket.
    pub tickets: u64,
    /// The blob returned last.
    blob: Vec<u8>,
}

thread_local! {
    static KEPT: RefCell<Option<Memory>> = const { RefCell::new(None) };
}

/// The memory `blob` holds: the one this instance kept when `blob` is what it returned
/// last, else parsed (every entry is then written anew).
pub fn read(blob: &[u8]) -> Result<Memory, String> {
    if let Some(kept) = KEPT.with(|kept| kept.borrow_mut().take())
        && same_bytes(&kept.blob, blob)
    {
        return Ok(kept);
    }
    let st: State = state::decode(blob)?;
    let slots = st
        .jobs
        .into_iter()
        .map(|(id, mut standing)| {
            if let Some(seen) = st.seen {
                standing.seen = seen;
            }
            let slot = Slot {
                standing: Some(standing),
                ..Slot {
                    id,
                    ..Slot::default()
                }
            };
            (id_hash(&slot.id), slot)
        })
        .collect();
    Ok(Memory {
        slots: Follow::unmatched(slots),
        tickets: st.tickets,
        blob: Vec::new(),
    })
}

impl Memory {
    /// Brings the memory to `snapshot`: the jobs that left are forgotten, the facts of
    /// the new and changed ones are read.
    pub fn follow(&mut self, snapshot: &Snapshot) {
        self.slots
            .follow(snapshot, |_, job, old| Slot::of(job, old), |_| {});
    }

    /// The blob, the JSON of [`State`] with the round's time `seen`: the entries are
    /// copied from the previous blob (runs of them in one piece) and only the numbers
    /// that changed are written over; a new job's entry is written whole. Kept with the
    /// memory for the next [`read`].
    pub fn write_and_keep(mut self, seen: f64) -> Vec<u8> {
        let previous = std::mem::take(&mut self.blob);
        let mut blob = Vec::with_capacity(previous.len() + 64);
        blob.extend_from_slice(b"{\"jobs\":[");
        let slots = self.slots.values_mut();
        // Entries of the previous blob not copied yet: positions `first..=last`, which
        // follow one another there, commas included.
        let mut run: Option<(usize, usize)> = None;
        let copy = |blob: &mut Vec<u8>, slots: &mut [Slot], (first, last): (usize, usize)| {
            let from = slots[first].entry.expect("copied entries exist").start;
            let to = slots[last].entry.expect("copied entries exist").end;
            let start = blob.len();
            blob.extend_from_slice(&previous[from..to]);
            for slot in &mut slots[first..=last] {
                let e = slot.entry.as_mut().expect("copied entries exist");
                (e.start, e.end) = (e.start - from + start, e.end - from + start);
            }
        };
        for at in 0..slots.len() {
            if let Some(entry) = slots[at].entry {
                match &mut run {
                    Some((_, last))
                        if slots[*last].entry.is_some_and(|e| e.end + 1 == entry.start) =>
                    {
                        *last = at;
                    }
                    _ => {
                        if let Some(r) = run.take() {
                            copy(&mut blob, slots, r);
                        }
                        if at > 0 {
                            blob.push(b',');
                        }
                        run = Some((at, at));
                    }
                }
                continue;
            }
            if let Some(r) = run.take() {
                copy(&mut blob, slots, r);
            }
            if at > 0 {
                blob.push(b',');
            }
            let start = blob.len();
            let slot = &mut slots[at];
            blob.push(b'[');
            blob.extend_from_slice(&state::encode(&slot.id));
            blob.push(b',');
            let id_len = blob.len() - start;
            let standing = slot.standing.as_ref().expect("every job has a standing");
            write_standing(&mut blob, standing);
            blob.push(b']');
            slot.entry = Some(Entry {
                start,
                end: blob.len(),
                id_len,
            });
            slot.written = Some(standing.clone());
        }
        if let Some(r) = run.take() {
            copy(&mut blob, slots, r);
        }
        // The copied entries whose standing changed: their numbers written over.
        for slot in slots.iter_mut() {
            let (Some(entry), Some(now)) = (slot.entry, slot.standing.as_ref()) else {
                continue;
            };
            let at = entry.start + entry.id_len;
            let fields = &mut blob[at..entry.end - 1];
            match &slot.written {
                Some(was) if same_entry(was, now) => continue,
                Some(was) => overwrite(fields, was, now),
                None => overwrite_all(fields, now),
            }
            slot.written = Some(now.clone());
        }
        blob.extend_from_slice(b"],\"tickets\":");
        blob.extend_from_slice(&state::encode(&self.tickets));
        blob.extend_from_slice(b",\"seen\":");
        blob.extend_from_slice(&state::encode(&seen));
        blob.push(b'}');
        self.blob = blob.clone();
        KEPT.with(|kept| *kept.borrow_mut() = Some(self));
        blob
    }
}

/// Where this instance keeps its memory (tests: a fresh instance's call in between).
#[cfg(test)]
pub(crate) fn kept() -> &'static std::thread::LocalKey<RefCell<Option<Memory>>> {
    &KEPT
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

/// Width of an integer's field: any `u64`.
const INTEGER: usize = 20;
/// Width of a float's field: the longest shortest text of an `f64`
/// (`-2.2250738585072014e-308`).
const FLOAT: usize = 24;

/// The fields of a standing in an entry: the key before each, and the width of its
/// value. An entry's standing is `{` and these, then `}`.
const FIELDS: [(&[u8], usize); 6] = [
    (b"\"q\":", INTEGER),
    (b",\"n\":", INTEGER),
    (b",\"e\":", FLOAT),
    (b",\"t\":", FLOAT),
    (b",\"p\":", FLOAT),
    (b",\"s\":", INTEGER),
];

/// Where field `k`'s value starts in a standing's bytes (after its `{`).
fn field(k: usize) -> std::ops::Range<usize> {
    let start = 1
        + FIELDS[..k]
            .iter()
            .map(|(key, w)| key.len() + w)
            .sum::<usize>()
        + FIELDS[k].0.len();
    start..start + FIELDS[k].1
}

/// The text of field `k` of `standing`: what serde writes for it (`null` for a float
/// that is not finite, or no label shown).
fn text<W: std::io::Write>(standing: &Standing, k: usize, out: &mut W) {
    use serde_json::ser::{CompactFormatter, Formatter};
    let fits = "a field holds any number";
    let integer = |out: &mut W, value: u64| CompactFormatter.write_u64(out, value).expect(fits);
    let number = |out: &mut W, value: f64| {
        if value.fract() == 0.0 && value.abs() < 1e15 && !(value == 0.0 && value.is_sign_negative())
        {
            // A whole number of seconds (a trace's times are): written as the integer
            // and `.0`, as the float writer writes it, at a fraction of its cost.
            CompactFormatter.write_i64(out, value as i64).expect(fits);
            out.write_all(b".0").expect(fits);
        } else if value.is_finite() {
            CompactFormatter.write_f64(out, value).expect(fits);
        } else {
            out.write_all(b"null").expect(fits);
        }
    };
    match k {
        0 => integer(out, standing.queue as u64),
        1 => integer(out, standing.ticket),
        2 => number(out, standing.executed),
        3 => number(out, standing.total),
        4 => number(out, standing.waited),
        _ => match standing.shown {
            Some(shown) => integer(out, shown as u64),
            None => out.write_all(b"null").expect(fits),
        },
    }
}

/// Writes field `k` of `standing` over its place in `fields` (a standing's bytes),
/// right-aligned after spaces.
fn put(fields: &mut [u8], standing: &Standing, k: usize) {
    let mut value = [0u8; FLOAT];
    let mut rest: &mut [u8] = &mut value;
    text(standing, k, &mut rest);
    let len = FLOAT - rest.len();
    let place = &mut fields[field(k)];
    let pad = place.len() - len;
    place[..pad].fill(b' ');
    place[pad..].copy_from_slice(&value[..len]);
}

/// Appends `standing` with every number in its field.
fn write_standing(out: &mut Vec<u8>, standing: &Standing) {
    let start = out.len();
    out.push(b'{');
    for (key, width) in FIELDS {
        out.extend_from_slice(key);
        out.resize(out.len() + width, b' ');
    }
    out.push(b'}');
    overwrite_all(&mut out[start..], standing);
}

/// Writes every field of `now` over `fields`.
fn overwrite_all(fields: &mut [u8], now: &Standing) {
    for k in 0..FIELDS.len() {
        put(fields, now, k);
    }
}

/// Writes over `fields` (holding `was`) the fields in which `now` differs.
fn overwrite(fields: &mut [u8], was: &Standing, now: &Standing) {
    let differs = [
        was.queue != now.queue,
        was.ticket != now.ticket,
        was.executed.to_bits() != now.executed.to_bits(),
        was.total.to_bits() != now.total.to_bits(),
        was.waited.to_bits() != now.waited.to_bits(),
        was.shown != now.shown,
    ];
    for (k, differs) in differs.into_iter().enumerate() {
        if differs {
            put(fields, now, k);
        }
    }
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

    /// Follows `jobs` (ids) through a kept instance's call with the change from
    /// `before`, gives them `standings` as a round would, and writes the blob.
    fn round(
        memory: Memory,
        before: Option<&Snapshot>,
        jobs: &[(&str, Standing)],
        seen: f64,
    ) -> (Vec<u8>, Snapshot) {
        use switchyard_policy_sdk::changes::with_applied;
        use switchyard_policy_sdk::testing::{change_between, job, node, snapshot, tick_delta};
        let now = snapshot(
            seen,
            vec![node("n", 1000)],
            jobs.iter().map(|(id, _)| job(id)).collect(),
        );
        let delta = match before {
            None => tick_delta(seen, true, &now.nodes, &now.jobs),
            Some(b) => change_between(b, &now),
        };
        let mut memory = memory;
        let blob = with_applied(delta, |s| {
            memory.follow(s);
            for (slot, (_, standing)) in memory.slots.values_mut().iter_mut().zip(jobs) {
                slot.standing = Some(standing.clone());
            }
            memory.tickets = 9;
            memory.write_and_keep(seen)
        })
        .unwrap();
        (blob, now)
    }

    /// `blob` without the padding of its numbers and without the `"s":null` of a job
    /// shown no label: serde's compact JSON of the same state.
    fn compact(blob: &[u8]) -> String {
        let text = String::from_utf8(blob.to_vec()).unwrap();
        let mut out = String::new();
        let mut in_string = false;
        let mut escaped = false;
        for c in text.chars() {
            match (in_string, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (_, false, '"') => in_string = !in_string,
                (false, _, ' ') => continue,
                _ => {}
            }
            out.push(c);
        }
        out.replace(",\"s\":null", "")
    }

    #[test]
    fn entries_copied_or_written_give_serde_s_own_bytes_and_read_back() {
        let first = [("a", standing(0, 0.0)), ("b\"q", standing(1, 0.5))];
        let (blob, s1) = round(Memory::default(), None, &first, 10.0);
        let whole = serde_json::to_vec(&state(&first, 10.0)).unwrap();
        assert_eq!(compact(&blob), String::from_utf8(whole).unwrap());
        // `a` left, `b"q` is unchanged, `c` is new and `d` changed.
        let second = [
            ("b\"q", standing(1, 0.5)),
            ("c", standing(2, 0.0)),
            ("d", standing(3, 1.0 / 3.0)),
        ];
        let (blob, s2) = round(read(&blob).unwrap(), Some(&s1), &second, 20.0);
        let whole = serde_json::to_vec(&state(&second, 20.0)).unwrap();
        assert_eq!(compact(&blob), String::from_utf8(whole).unwrap());
        // `b"q` ran (its numbers are written over its entry), `c` and `d` are copied.
        let third = [
            ("b\"q", standing(1, 0.75)),
            ("c", standing(2, 0.0)),
            ("d", standing(3, 1.0 / 3.0)),
        ];
        let before = blob.clone();
        let (blob, s3) = round(read(&blob).unwrap(), Some(&s2), &third, 20.0);
        let whole = serde_json::to_vec(&state(&third, 20.0)).unwrap();
        assert_eq!(compact(&blob), String::from_utf8(whole).unwrap());
        assert_eq!(blob.len(), before.len(), "every entry kept its place");
        let differ = blob.iter().zip(&before).filter(|(a, b)| a != b).count();
        assert!(
            differ <= 2 * FLOAT,
            "only b\"q's clocks were written: {differ} bytes"
        );
        // `e` is new.
        let fourth = [
            ("b\"q", standing(1, 0.75)),
            ("c", standing(2, 0.0)),
            ("d", standing(3, 1.0 / 3.0)),
            ("e", standing(4, 0.0)),
        ];
        let (blob, _) = round(read(&blob).unwrap(), Some(&s3), &fourth, 30.0);
        let whole = serde_json::to_vec(&state(&fourth, 30.0)).unwrap();
        assert_eq!(compact(&blob), String::from_utf8(whole).unwrap());
        // Another instance parses it; the time is given back to every standing.
        KEPT.with(|kept| *kept.borrow_mut() = None);
        let fresh = read(&blob).unwrap();
        let standings: Vec<&Standing> = fresh
            .slots
            .values()
            .iter()
            .map(|s| s.standing.as_ref().unwrap())
            .collect();
        assert!(standings.iter().all(|s| s.seen == 30.0));
        assert_eq!(standings[2].executed, 1.0 / 3.0);
    }

    #[test]
    fn a_standing_holds_the_numbers_serde_writes_each_in_its_field() {
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
            assert_eq!(compact(&mine), String::from_utf8(serde).unwrap());
            let width: usize = FIELDS.iter().map(|(key, w)| key.len() + w).sum();
            assert_eq!(mine.len(), width + 2, "a standing has a fixed length");
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
            assert_eq!(compact(&mine), String::from_utf8(serde).unwrap(), "{value}");
        }
    }

    #[test]
    fn a_blob_with_the_time_per_job_still_reads() {
        let old = br#"{"jobs":[["a",{"q":1,"n":4,"e":2.0,"t":3.0,"p":0.0,"c":50.0}]],"tickets":5}"#;
        KEPT.with(|kept| *kept.borrow_mut() = None);
        let memory = read(old).unwrap();
        let slot = &memory.slots.values()[0];
        let standing = slot.standing.as_ref().unwrap();
        assert_eq!((standing.queue, standing.seen), (1, 50.0));
        assert_eq!(memory.tickets, 5);
    }

    #[test]
    fn the_round_s_time_is_not_part_of_an_entry() {
        let mut later = standing(1, 2.0);
        later.seen = 99.0;
        assert!(same_entry(&standing(1, 2.0), &later));
        assert!(!same_entry(&standing(1, 2.0), &standing(1, 2.5)));
    }
}
