//! Labels a policy has already shown, so it sends a job's label only when its value
//! changes.
//!
//! The host keeps every label until the policy sets it again (the simulator on its
//! job, Kubernetes on the `TrainingJob`), so sending the same value every round changes
//! nothing but costs a string per waiting job per round in the guest, across the
//! boundary, in the validator and in the decision trace: on a trace whose queue holds
//! thousands of jobs, most of a round. The memory lives in the policy's state blob and
//! holds the jobs of the last snapshot only, so it does not grow with jobs that left.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{Job, JobLabel, Snapshot};

/// The value of one label key last shown for each job of the previous call.
///
/// Jobs are kept by a 64-bit FNV-1a hash of their id and values by their position in a
/// list of the distinct values shown, so the blob decodes without an allocation per
/// job: a round's cost is a few integers per live job. Two live jobs whose ids hash
/// alike (odds of 2^-64 a pair) could share a memory; the worst that does is one label
/// sent again or late.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ShownLabels {
    /// The distinct values shown.
    values: Vec<String>,
    /// `(hash of the job id, position in values)` in the previous snapshot's order;
    /// in the blob, one string (`packed`): a queue of thousands is written every round.
    #[serde(with = "packed")]
    shown: Vec<(u64, u32)>,
}

/// The remembered jobs as one string, `<hash as 16 hex digits><position in hex>,` per
/// job: written with a table instead of a number formatter per field, and escaped by
/// the JSON writer in one pass (about half the bytes and a fraction of the time of a
/// list of pairs). A blob that still holds the list of pairs reads as well.
mod packed {
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    const HEX: &[u8; 16] = b"0123456789abcdef";

    pub fn serialize<S: Serializer>(shown: &[(u64, u32)], out: S) -> Result<S::Ok, S::Error> {
        let mut text = Vec::with_capacity(shown.len() * 20);
        for &(hash, position) in shown {
            entry(&mut text, hash, position);
        }
        out.serialize_str(std::str::from_utf8(&text).expect("hex digits and commas"))
    }

    /// One job's entry: its hash, the position of its value, a comma.
    pub fn entry(text: &mut Vec<u8>, hash: u64, position: u32) {
        for shift in (0..16).rev() {
            text.push(HEX[((hash >> (shift * 4)) & 0xf) as usize]);
        }
        let digits = (32 - position.leading_zeros()).div_ceil(4).max(1);
        for shift in (0..digits).rev() {
            text.push(HEX[((position >> (shift * 4)) & 0xf) as usize]);
        }
        text.push(b',');
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(input: D) -> Result<Vec<(u64, u32)>, D::Error> {
        input.deserialize_any(Packed)
    }

    struct Packed;

    impl<'de> Visitor<'de> for Packed {
        type Value = Vec<(u64, u32)>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string of `<16 hex digits><hex digits>,` entries, or a list of pairs")
        }

        fn visit_str<E: Error>(self, text: &str) -> Result<Self::Value, E> {
            text.split_terminator(',')
                .map(|entry| {
                    let bad = || E::custom(format!("shown labels: bad entry `{entry}`"));
                    if entry.len() < 17 || !entry.is_ascii() {
                        return Err(bad());
                    }
                    let (hash, position) = entry.split_at(16);
                    Ok((
                        u64::from_str_radix(hash, 16).map_err(|_| bad())?,
                        u32::from_str_radix(position, 16).map_err(|_| bad())?,
                    ))
                })
                .collect()
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut pairs = Vec::new();
            while let Some(pair) = seq.next_element::<(u64, u32)>()? {
                pairs.push(pair);
            }
            Ok(pairs)
        }
    }
}

/// For each of `now` (this call's keys, in the snapshot's order), the position of the
/// same key in `before` (the previous call's entries), if it is there; no entry is
/// given twice.
///
/// The snapshot keeps its order between calls (jobs that left are gone, new ones come
/// last), so each job is a few entries after the previous one's: a forward walk that
/// looks a little ahead and steps over the jobs that left. Only the keys it does not
/// find (new jobs, or an order that changed) are looked up among the entries it did
/// not take, which are the jobs that left: a round costs a comparison or two per job,
/// not an index of every job.
pub fn match_previous<'a, B, K>(
    before: &'a [B],
    now: &[&K],
    key: impl Fn(&'a B) -> &'a K,
) -> Vec<Option<usize>>
where
    K: Eq + std::hash::Hash + ?Sized + 'a,
{
    const LOOK_AHEAD: usize = 64;
    let mut found = vec![None; now.len()];
    let mut taken = vec![false; before.len()];
    let mut next = 0;
    let mut missed = false;
    for (at, &wanted) in now.iter().enumerate() {
        let end = before.len().min(next + LOOK_AHEAD);
        let ahead = before.get(next..end).unwrap_or_default();
        match ahead.iter().position(|e| key(e) == wanted) {
            Some(step) => {
                found[at] = Some(next + step);
                taken[next + step] = true;
                next += step + 1;
            }
            None => missed = true,
        }
    }
    if missed {
        let mut rest: HashMap<&K, usize> = before
            .iter()
            .enumerate()
            .filter(|(k, _)| !taken[*k])
            .map(|(k, e)| (key(e), k))
            .collect();
        if !rest.is_empty() {
            for (at, wanted) in now.iter().enumerate() {
                if found[at].is_none() {
                    found[at] = rest.remove(wanted);
                }
            }
        }
    }
    found
}

/// How many distinct values are found by a scan before the rest are hashed.
const SCANNED: usize = 8;

/// FNV-1a over the id's bytes: a job id as a number, for memories that need no string
/// per job (two ids alike in 2^-64).
pub fn id_hash(id: &str) -> u64 {
    id.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

thread_local! {
    /// The last [`id_hashes`] of the snapshot a kept instance holds, with the
    /// [`crate::incremental::held_version`] and the job list they were taken of.
    static HELD_HASHES: std::cell::RefCell<Option<HeldHashes>> =
        const { std::cell::RefCell::new(None) };
}

/// [`id_hash`] of each job of a held snapshot, and what identifies that job list.
struct HeldHashes {
    version: u64,
    jobs: *const Job,
    len: usize,
    hashes: std::rc::Rc<[u64]>,
}

/// [`id_hash`] of every job of `snapshot`, in its order. On a kept instance's held
/// snapshot they are worked out again only when its nodes or jobs changed
/// ([`crate::incremental::held_version`]): a round that only moved the clock (or, for
/// a policy that reads no loss, only moved loss series on) hashes no id, where each
/// label memory of a long queue would otherwise hash every id each round.
pub fn id_hashes(snapshot: &Snapshot) -> std::rc::Rc<[u64]> {
    let of = |snapshot: &Snapshot| snapshot.jobs.iter().map(|j| id_hash(&j.id)).collect();
    let Some(version) = crate::incremental::held_version() else {
        return of(snapshot);
    };
    HELD_HASHES.with(|held| {
        let mut held = held.borrow_mut();
        // The version says the held jobs did not change; the list's address and length
        // say this is that list (a policy may hash another snapshot while deciding).
        if let Some(kept) = held.as_ref()
            && kept.version == version
            && kept.jobs == snapshot.jobs.as_ptr()
            && kept.len == snapshot.jobs.len()
        {
            return kept.hashes.clone();
        }
        let hashes: std::rc::Rc<[u64]> = of(snapshot);
        *held = Some(HeldHashes {
            version,
            jobs: snapshot.jobs.as_ptr(),
            len: snapshot.jobs.len(),
            hashes: hashes.clone(),
        });
        hashes
    })
}

impl ShownLabels {
    /// The labels `key=value_of(job)` whose value differs from the one last shown (a
    /// job whose `value_of` is `None` gets none, and keeps what it was shown), in
    /// snapshot order; remembers the new values and forgets the jobs that left.
    pub fn changed<V: AsRef<str>>(
        &mut self,
        snapshot: &Snapshot,
        key: &str,
        mut value_of: impl FnMut(&Job) -> Option<V>,
    ) -> Vec<JobLabel> {
        self.changed_at(snapshot, key, |_, job| value_of(job))
            .into_iter()
            .map(|(_, label)| label)
            .collect()
    }

    /// [`ShownLabels::changed`] for a policy that keeps what it decided by the job's
    /// position in the snapshot: `value_of` gets the position too, and each label comes
    /// with its job's position.
    pub fn changed_at<V: AsRef<str>>(
        &mut self,
        snapshot: &Snapshot,
        key: &str,
        mut value_of: impl FnMut(usize, &Job) -> Option<V>,
    ) -> Vec<(usize, JobLabel)> {
        let before = std::mem::take(&mut self.shown);
        let old_values = std::mem::take(&mut self.values);
        let hashes = id_hashes(snapshot);
        let keys: Vec<&u64> = hashes.iter().collect();
        let previous = match_previous(&before, &keys, |e| &e.0);
        let mut hashed: HashMap<String, u32> = HashMap::new();
        // Where each old value went in the new numbering, once a job kept it: most jobs
        // keep their value, and then one comparison (with the value they had) numbers it.
        let mut renumbered: Vec<Option<u32>> = vec![None; old_values.len()];
        let mut labels = Vec::new();
        for (at, job) in snapshot.jobs.iter().enumerate() {
            let hash = hashes[at];
            let old = previous[at].and_then(|found| {
                let position = before[found].1 as usize;
                old_values.get(position).map(|v| (position, v.as_str()))
            });
            let value = value_of(at, job);
            let (keep, kept_old) = match (&value, old) {
                (Some(value), old) => {
                    let value = value.as_ref();
                    let same = old.is_some_and(|(_, old)| old == value);
                    if !same {
                        labels.push((
                            at,
                            JobLabel {
                                job: job.id.clone(),
                                key: key.to_string(),
                                value: value.to_string(),
                            },
                        ));
                    }
                    (value, old.filter(|_| same).map(|(position, _)| position))
                }
                (None, Some((position, old))) => (old, Some(position)),
                (None, None) => continue,
            };
            let position = match kept_old.and_then(|old| renumbered[old]) {
                Some(position) => position,
                None => {
                    let position = self.number(keep, &mut hashed);
                    if let Some(old) = kept_old {
                        renumbered[old] = Some(position);
                    }
                    position
                }
            };
            self.shown.push((hash, position));
        }
        labels
    }

    /// The number of `value` in the memory being rebuilt, added if it is new. A label
    /// mostly takes a handful of values: scanning the first few beats hashing every
    /// job's; the values past them (a label with many) are hashed.
    fn number(&mut self, value: &str, hashed: &mut HashMap<String, u32>) -> u32 {
        let scanned = self.values.iter().take(SCANNED).position(|v| v == value);
        if let Some(position) = scanned
            .map(|p| p as u32)
            .or_else(|| hashed.get(value).copied())
        {
            return position;
        }
        let position = self.values.len() as u32;
        self.values.push(value.to_string());
        if position as usize >= SCANNED {
            hashed.insert(value.to_string(), position);
        }
        position
    }

    /// The distinct values shown, in the order the memory numbers them.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// The values shown, numbered from `first` (a policy's own values in its order, then
    /// any other value this memory holds), and the number of each of
    /// [`ShownLabels::values`]: what a policy that keeps its own memory of the labels
    /// shown needs to read this one.
    pub fn numbered_from(&self, first: &[&str]) -> (Vec<String>, Vec<u32>) {
        let mut values: Vec<String> = first.iter().map(|v| v.to_string()).collect();
        let numbers = self
            .values
            .iter()
            .map(|value| match values.iter().position(|v| v == value) {
                Some(at) => at as u32,
                None => {
                    values.push(value.clone());
                    values.len() as u32 - 1
                }
            })
            .collect();
        (values, numbers)
    }

    /// Each remembered job, in the last snapshot's order: the [`id_hash`] of its id and
    /// the position of its value in [`ShownLabels::values`].
    pub fn remembered(&self) -> &[(u64, u32)] {
        &self.shown
    }

    /// Appends to `text` a job's entry in the string that holds the remembered jobs in
    /// the blob: a policy that keeps its own memory of the labels shown (and writes it
    /// a job at a time) writes the blob this type reads.
    pub fn write_entry(text: &mut Vec<u8>, hash: u64, position: u32) {
        packed::entry(text, hash, position);
    }

    /// How many jobs are remembered (the jobs of the last snapshot with a label).
    pub fn len(&self) -> usize {
        self.shown.len()
    }

    /// True when no job is remembered.
    pub fn is_empty(&self) -> bool {
        self.shown.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    /// A kept instance hashes the held ids again only when its jobs changed; the hashes
    /// are those of the jobs it holds either way, and outside a kept call every call
    /// hashes the snapshot it is given.
    #[test]
    fn held_ids_are_hashed_again_only_when_the_jobs_change() {
        let nodes = vec![node("n1", 4000)];
        let first = snapshot(0.0, nodes.clone(), vec![job("a"), job("b")]);
        let expected = |s: &Snapshot| s.jobs.iter().map(|j| id_hash(&j.id)).collect::<Vec<_>>();
        let reset = tick_delta(0.0, true, &first.nodes, &first.jobs);
        let one = crate::incremental::with_applied(reset, id_hashes).unwrap();
        assert_eq!(*one, expected(&first));
        let tick = tick_delta(30.0, false, &[], &[]);
        let two = crate::incremental::with_applied(tick, id_hashes).unwrap();
        assert!(std::rc::Rc::ptr_eq(&one, &two), "a tick hashes nothing");
        let later = snapshot(60.0, nodes, vec![job("b"), job("c")]);
        let three =
            crate::incremental::with_applied(change_between(&first, &later), id_hashes).unwrap();
        assert_eq!(*three, expected(&later));
        // Another snapshot handed in while a kept instance decides is hashed itself.
        let other = crate::incremental::with_applied(tick_delta(90.0, false, &[], &[]), |_| {
            id_hashes(&first)
        })
        .unwrap();
        assert_eq!(*other, expected(&first));
        assert_eq!(*id_hashes(&later), expected(&later));
    }

    fn values(labels: &[JobLabel]) -> Vec<(String, String)> {
        labels
            .iter()
            .map(|l| (l.job.clone(), l.value.clone()))
            .collect()
    }

    #[test]
    fn a_label_is_sent_when_its_value_changes_and_not_again() {
        let mut shown = ShownLabels::default();
        let s = snapshot(0.0, vec![], vec![job("a"), job("b")]);
        let first = shown.changed(&s, "k", |j| Some(format!("v-{}", j.id)));
        assert_eq!(first.len(), 2);
        assert!(
            shown
                .changed(&s, "k", |j| Some(format!("v-{}", j.id)))
                .is_empty()
        );
        let third = shown.changed(&s, "k", |j| Some(if j.id == "a" { "w" } else { "v-b" }));
        assert_eq!(values(&third), [("a".to_string(), "w".to_string())]);
    }

    #[test]
    fn jobs_that_left_are_forgotten_and_a_returning_id_is_shown_again() {
        let mut shown = ShownLabels::default();
        let both = snapshot(0.0, vec![], vec![job("a"), job("b")]);
        shown.changed(&both, "k", |_| Some("v"));
        let only_b = snapshot(1.0, vec![], vec![job("b")]);
        assert!(shown.changed(&only_b, "k", |_| Some("v")).is_empty());
        assert_eq!(shown.len(), 1, "a left and is forgotten");
        let a_again = shown.changed(&both, "k", |_| Some("v"));
        assert_eq!(values(&a_again), [("a".to_string(), "v".to_string())]);
    }

    #[test]
    fn a_label_with_more_values_than_are_scanned_is_remembered_all_the_same() {
        let mut shown = ShownLabels::default();
        let jobs = (0..3 * SCANNED).map(|i| job(&format!("j{i}"))).collect();
        let s = snapshot(0.0, vec![], jobs);
        let each_its_own = |j: &Job| Some(format!("v-{}", j.id));
        assert_eq!(shown.changed(&s, "k", each_its_own).len(), 3 * SCANNED);
        assert!(shown.changed(&s, "k", each_its_own).is_empty());
        assert_eq!(shown.values.len(), 3 * SCANNED);
    }

    #[test]
    fn the_memory_reads_back_from_its_blob_and_from_the_older_list_of_pairs() {
        let mut shown = ShownLabels::default();
        let jobs = (0..20).map(|i| job(&format!("j{i}"))).collect();
        let s = snapshot(0.0, vec![], jobs);
        shown.changed(&s, "k", |j| Some(format!("v{}", j.id.len() * 7)));
        let blob = crate::state::encode(&shown);
        assert_eq!(crate::state::decode::<ShownLabels>(&blob).unwrap(), shown);
        let older = br#"{"values":["a"],"shown":[[18446744073709551615,0],[7,0]]}"#;
        let read: ShownLabels = crate::state::decode(older).unwrap();
        assert_eq!(read.shown, [(u64::MAX, 0), (7, 0)]);
        let bad = crate::state::decode::<ShownLabels>(br#"{"values":[],"shown":"xyz,"}"#);
        assert!(bad.unwrap_err().contains("bad entry `xyz`"));
    }

    #[test]
    fn jobs_that_left_in_the_middle_and_new_ones_keep_what_each_was_shown() {
        let mut shown = ShownLabels::default();
        let ids = |range: std::ops::Range<usize>| range.map(|i| job(&format!("j{i}")));
        let first = snapshot(0.0, vec![], ids(0..200).collect());
        shown.changed(&first, "k", |j| Some(j.id.clone()));
        // 100 jobs left from the middle (more than the walk looks ahead), 3 arrived.
        let later = snapshot(1.0, vec![], ids(0..50).chain(ids(150..203)).collect());
        let sent = shown.changed(&later, "k", |j| Some(j.id.clone()));
        let jobs: Vec<&str> = sent.iter().map(|l| l.job.as_str()).collect();
        assert_eq!(jobs, ["j200", "j201", "j202"]);
    }

    #[test]
    fn a_job_without_a_value_keeps_what_it_was_shown() {
        let mut shown = ShownLabels::default();
        let s = snapshot(0.0, vec![], vec![job("a")]);
        shown.changed(&s, "k", |_| Some("v"));
        assert!(shown.changed(&s, "k", |_| None::<&str>).is_empty());
        assert!(shown.changed(&s, "k", |_| Some("v")).is_empty());
    }
}
