//! What SpeCon remembers between calls, and the blob it travels in.
//!
//! The blob holds an entry per active job and is handed back every call, so its
//! encoding is chosen for that: `postcard` (compact, serde-based, floats exact) in
//! base64, so the blob stays UTF-8 text, which the host's fixture files (`policy test
//! --save-snapshots`) need to keep it. Each job's entry (its id, its arrival number and
//! its [`JobState`]) is armoured on its own, so an entry whose job did not change is
//! copied from the previous blob ([`Entries`]): a queue of thousands costs a round the
//! jobs that changed. The blob reads `2;<header>;<entry>,<entry>,...`; a blob of the
//! earlier form (the base64 of the whole [`State`]) still reads.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use switchyard_policy_sdk::{
    Snapshot,
    changes::{Follow, Followed},
    memcmp::same_bytes,
    progress::Scale,
    shown::id_hash,
    spread::EvenSpread,
    state::Entries,
};

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

/// Everything SpeCon remembered in a blob of the earlier form (and what its tests
/// still write, to check that such a blob reads).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State<'a> {
    /// Initial even placement's arrival counter.
    pub spread: EvenSpread,
    /// Time of the last monitor round.
    pub last_round: Option<f64>,
    /// Every active job of the last call, in that call's snapshot order.
    #[serde(borrow)]
    pub jobs: Vec<(&'a str, JobState)>,
}

impl<'a> State<'a> {
    /// The blob of the earlier form: base64 of the postcard of the whole state.
    pub fn encode(&self) -> Vec<u8> {
        let bytes = postcard::to_allocvec(self).expect("the policy state serialises");
        BASE64.encode(bytes).into_bytes()
    }

    /// A state whose monitor last ran at `at`, when job `id` had converged: nothing
    /// else remembered (tests).
    #[cfg(test)]
    pub(crate) fn converged(id: &'a str, at: f64) -> Self {
        State {
            last_round: Some(at),
            jobs: vec![(
                id,
                JobState {
                    converged_at: Some(at),
                    ..JobState::default()
                },
            )],
            ..State::default()
        }
    }
}

/// Everything SpeCon remembers, kept between the calls of an instance.
#[derive(Debug, Default)]
pub struct Memory {
    /// Initial even placement's arrival numbers.
    pub spread: EvenSpread,
    /// Time of the last monitor round.
    pub last_round: Option<f64>,
    /// Each job's state, in the snapshot's order.
    pub jobs: Follow<JobState>,
    /// Whether each job has a task on a node, read from its tasks when it changes.
    bound: Follow<bool>,
    /// The blob last written, and where each job's entry is in it.
    entries: Entries,
}

/// The mark of the blob's form; an earlier blob is base64, which has no `;`.
const FORM: &[u8] = b"2;";

thread_local! {
    /// What this instance returned last.
    static KEPT: std::cell::RefCell<Option<Memory>> = const { std::cell::RefCell::new(None) };
}

/// The memory `blob` holds: the one this instance kept when `blob` is what it returned
/// last, else decoded (either form; an empty blob is the first call).
pub fn read(blob: &[u8]) -> Result<Memory, String> {
    if let Some(kept) = KEPT.with(|k| k.borrow_mut().take())
        && same_bytes(kept.entries.blob(), blob)
    {
        return Ok(kept);
    }
    let bad = |e: &dyn std::fmt::Display| format!("cannot decode the policy state: {e}");
    let (spread, last_round, jobs) = match blob.strip_prefix(FORM) {
        Some(rest) => {
            let text = std::str::from_utf8(rest).map_err(|e| bad(&e))?;
            let (header, entries) = text.split_once(';').ok_or_else(|| bad(&"no header"))?;
            let (next, last_round): (u64, Option<f64>) = unpack(header.as_bytes())?;
            let jobs = entries
                .split(',')
                .filter(|e| !e.is_empty())
                .map(|entry| unpack::<(String, Option<u64>, JobState)>(entry.as_bytes()))
                .collect::<Result<Vec<_>, _>>()?;
            let numbered = jobs
                .iter()
                .filter_map(|(id, k, _)| k.map(|k| (id.clone(), k)))
                .collect();
            let jobs = jobs.into_iter().map(|(id, _, js)| (id, js)).collect();
            (EvenSpread::from_numbers(numbered, next), last_round, jobs)
        }
        None => {
            let bytes = BASE64
                .decode(blob)
                .map_err(|e| bad(&format!("not base64: {e}")))?;
            if bytes.is_empty() {
                (EvenSpread::default(), None, Vec::new())
            } else {
                let old: State = postcard::from_bytes(&bytes).map_err(|e| bad(&e))?;
                let jobs = old.jobs.into_iter().map(|(id, js)| (id.to_string(), js));
                (old.spread, old.last_round, jobs.collect())
            }
        }
    };
    let jobs: Vec<(String, JobState)> = jobs;
    Ok(Memory {
        spread,
        last_round,
        jobs: Follow::unmatched(
            jobs.into_iter()
                .map(|(id, js)| (id_hash(&id), js))
                .collect(),
        ),
        bound: Follow::default(),
        entries: Entries::new(b","),
    })
}

/// The postcard value in one base64 piece of a blob.
fn unpack<T: serde::de::DeserializeOwned>(piece: &[u8]) -> Result<T, String> {
    let bytes = BASE64
        .decode(piece)
        .map_err(|e| format!("cannot decode the policy state: not base64: {e}"))?;
    postcard::from_bytes(&bytes).map_err(|e| format!("cannot decode the policy state: {e}"))
}

/// `value`'s postcard in base64, appended to `out`.
fn pack<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    let bytes = postcard::to_allocvec(value).expect("the policy state serialises");
    let start = out.len();
    out.resize(
        start + base64::encoded_len(bytes.len(), true).expect("a small entry"),
        0,
    );
    let written = BASE64
        .encode_slice(&bytes, &mut out[start..])
        .expect("room for the encoding");
    out.truncate(start + written);
}

impl Memory {
    /// Brings each job's state to `snapshot`: the states of the jobs that left are
    /// dropped, a new job starts from the default.
    pub fn follow(&mut self, snapshot: &Snapshot) -> Followed {
        self.entries.follow(snapshot);
        self.bound.follow(
            snapshot,
            |_, job, _| job.tasks.iter().any(|t| t.node.is_some()),
            |_| {},
        );
        self.jobs
            .follow(snapshot, |_, _, old| old.unwrap_or_default(), |_| {})
    }

    /// Whether each job of the snapshot [`Memory::follow`] was given has a task on a
    /// node.
    pub fn bound(&self) -> &[bool] {
        self.bound.values()
    }

    /// The entry of the job at `at` changed (its state or its arrival number).
    pub fn changed(&mut self, at: usize) {
        self.entries.changed(at);
    }

    /// The blob for the host to keep until the next call, the memory kept with it.
    pub fn write_and_keep(mut self, snapshot: &Snapshot) -> Vec<u8> {
        let mut head = FORM.to_vec();
        pack(&(self.spread.next_number(), self.last_round), &mut head);
        head.push(b';');
        let (spread, jobs) = (&self.spread, self.jobs.values());
        let blob = self.entries.write(&head, b"", |at, out| {
            let number = spread.job_at(at).and_then(|(_, k)| k);
            pack(&(snapshot.jobs[at].id.as_str(), number, &jobs[at]), out);
            true
        });
        KEPT.with(|k| *k.borrow_mut() = Some(self));
        blob
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::{
        Change, JobBuilder, finish, job, kept_decides_as_fresh, node, snapshot,
    };

    fn remembered(category: Category) -> JobState {
        JobState {
            category,
            last_value: Some(0.123_456_789_012_345_67),
            ..JobState::default()
        }
    }

    fn states(memory: &Memory) -> Vec<Category> {
        memory.jobs.values().iter().map(|s| s.category).collect()
    }

    #[test]
    fn a_blob_of_the_earlier_form_reads_and_the_new_form_reads_back_the_same() {
        let jobs = [job("a"), job("b"), job("c")];
        let s = snapshot(0.0, vec![node("w1", 8000)], jobs.to_vec());
        let mut spread = EvenSpread::from_numbers(vec![("a".into(), 4), ("c".into(), 6)], 7);
        spread.place(&s, &mut switchyard_policy_sdk::cluster::Ledger::new(&s));
        let old = State {
            spread,
            last_round: Some(600.0),
            jobs: vec![
                ("a", remembered(Category::CC)),
                ("b", JobState::default()),
                ("c", remembered(Category::WC)),
            ],
        };
        let mut memory = read(&old.encode()).unwrap();
        memory.follow(&s);
        let mut ledger = switchyard_policy_sdk::cluster::Ledger::new(&s);
        memory.spread.place(&s, &mut ledger);
        assert_eq!(states(&memory), [Category::CC, Category::PC, Category::WC]);
        assert_eq!(memory.last_round, Some(600.0));
        let blob = memory.write_and_keep(&s);
        assert!(blob.starts_with(FORM) && std::str::from_utf8(&blob).is_ok());
        KEPT.with(|k| k.borrow_mut().take());
        let mut back = read(&blob).unwrap();
        back.follow(&s);
        assert_eq!(states(&back), [Category::CC, Category::PC, Category::WC]);
        assert_eq!(back.jobs.values()[0], remembered(Category::CC));
        // `b` was numbered by the spread that wrote the earlier blob.
        let numbers = ["a", "b", "c"].map(|id| back.spread.arrival_of(id));
        assert_eq!(numbers, [Some(4), Some(7), Some(6)]);
        assert_eq!(back.spread.next_number(), 8);
        // The first new job gets the next number.
        let more = snapshot(
            1.0,
            vec![node("w1", 8000)],
            [jobs.to_vec(), vec![job("d")]].concat(),
        );
        back.spread.place(
            &more,
            &mut switchyard_policy_sdk::cluster::Ledger::new(&more),
        );
        assert_eq!(back.spread.arrival_of("d"), Some(8));
    }

    #[test]
    fn an_empty_blob_is_the_first_call_and_garbage_is_an_error() {
        assert!(read(&[]).unwrap().jobs.is_empty());
        assert!(read(b"{not base64}").is_err());
        assert!(read(b"2;AAA").is_err(), "no header end");
        assert!(read(b"2;AA==;%%%").is_err());
    }

    const CONVERGING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.995), (60.0, 0.992), (90.0, 0.991)];
    const PROGRESSING: &[(f64, f64)] = &[(0.0, 1.0), (30.0, 0.8), (60.0, 0.6), (90.0, 0.4)];

    #[test]
    fn a_kept_instance_monitors_places_and_reallocates_as_a_fresh_instance_would() {
        let nodes = vec![node("w1", 8000), node("w2", 8000), node("w3", 8000)];
        let round = snapshot(
            0.0,
            nodes,
            vec![
                job("c").running_on("w1").loss(CONVERGING),
                job("p1").running_on("w1").loss(PROGRESSING),
                job("p2").running_on("w1").loss(PROGRESSING),
                job("p3").running_on("w2").loss(PROGRESSING),
                job("big").requests(9000, 0),
            ],
        );
        let changes: [Change; 7] = [
            &|s| s.time = 30.0,
            &|s| {
                s.time = 45.0;
                s.jobs.push(job("new").requests(2000, 0));
            },
            &|s| s.time = 60.0,
            &|s| {
                s.time = 75.0;
                s.jobs.push(job("other").requests(9000, 0));
                s.jobs.push(job("more").requests(1000, 0));
            },
            &|s| s.time = 90.0,
            &|s| {
                s.time = 100.0;
                finish(s, "p3");
            },
            &|s| s.time = 120.0,
        ];
        kept_decides_as_fresh(&KEPT, round, Vec::new(), &changes, |s, blob| {
            crate::policy::decide(&[], s, blob).unwrap()
        });
    }

    #[test]
    fn a_kept_instance_labels_a_job_placed_after_waiting_as_a_fresh_instance_would() {
        let nodes = vec![node("w1", 4000), node("w2", 4000)];
        let round = snapshot(
            0.0,
            nodes,
            vec![
                job("a")
                    .running_on("w1")
                    .requests(4000, 0)
                    .loss(PROGRESSING),
                job("b")
                    .running_on("w2")
                    .requests(4000, 0)
                    .loss(PROGRESSING),
                job("w").requests(4000, 0),
            ],
        );
        let changes: [Change; 3] = [
            &|s| s.time = 10.0,
            &|s| {
                s.time = 20.0;
                finish(s, "a");
            },
            &|s| s.time = 30.0,
        ];
        kept_decides_as_fresh(&KEPT, round, Vec::new(), &changes, |s, blob| {
            crate::policy::decide(&[], s, blob).unwrap()
        });
    }

    #[test]
    fn a_kept_instance_rebalances_as_a_fresh_instance_would() {
        use switchyard_policy_sdk::MoveKind;
        let nodes = vec![node("w1", 8000), node("w2", 8000)];
        let round = snapshot(
            0.0,
            nodes,
            vec![
                job("a").running_on("w1").loss(PROGRESSING),
                job("b").running_on("w1").loss(PROGRESSING),
                job("m")
                    .running_on("w1")
                    .moved(0.0, MoveKind::Migrated, crate::policy::REALLOCATE),
                job("gone").running_on("w2"),
            ],
        );
        // `m` converged at t=0 and the monitor ran then; the last job on w2 finishes.
        let st = State::converged("m", 0.0);
        let changes: [Change; 2] = [
            &|s| {
                s.time = 10.0;
                finish(s, "gone");
            },
            &|s| s.time = 20.0,
        ];
        kept_decides_as_fresh(&KEPT, round, st.encode(), &changes, |s, blob| {
            crate::policy::decide(&[], s, blob).unwrap()
        });
    }
}
