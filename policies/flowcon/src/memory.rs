//! What FlowCon keeps between the calls of an instance, and the blob it writes: each
//! job's list and limit, each worker's interval ([`State`]). Moving a job from list to
//! list is [`crate::policy`]'s; this module holds the values and writes them.
//!
//! The blob is the JSON of [`State`] (each job's list, each worker's interval, the
//! labels shown), so any reader sees the same state; it is written a part at a time:
//! a job's entry and a label's only when the job or its state changed ([`Entries`]), a
//! worker's only when its state did. Which jobs changed comes from the host's change
//! ([`Follow`]), so a round over a long queue reads the queue's jobs only where they
//! changed, and a job's state is kept with it rather than looked up by id.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use switchyard_policy_sdk::{
    Snapshot,
    changes::Follow,
    memcmp::same_bytes,
    progress::Scale,
    shown::{ShownLabels, id_hash},
    state::{self, Entries},
};

/// FlowCon's lists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum List {
    /// New: young and growing fast.
    #[default]
    NL,
    /// Watching: near convergence.
    WL,
    /// Completing: converging, growing slowly.
    CL,
}

impl List {
    /// The list's name, as its label shows it.
    pub fn name(self) -> &'static str {
        match self {
            List::NL => "NL",
            List::WL => "WL",
            List::CL => "CL",
        }
    }
}

/// Per job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobState {
    /// Current list.
    pub list: List,
    /// Divisor of E.
    pub scale: Scale,
    /// (t_{i-1}, normalised E(t_{i-1})).
    pub last: Option<(f64, f64)>,
    /// The limit L of lines 14-26, a fraction of the worker (none yet: unlimited, 1).
    #[serde(default)]
    pub limit: Option<f64>,
    /// The share of the worker the job used while unlimited, when that was less than an
    /// equal split: the most it can use (its own parallelism caps it).
    #[serde(default)]
    pub capped: Option<f64>,
}

/// Per worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerState {
    /// Current interval (doubles under back-off).
    pub itval: f64,
    /// When Algorithm 1 runs next.
    pub due: f64,
    /// Jobs seen on the worker at the last run (the listener's T(i-1)).
    pub members: Vec<String>,
}

/// The state blob.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    /// Per job.
    pub jobs: BTreeMap<String, JobState>,
    /// Per worker.
    pub workers: BTreeMap<String, WorkerState>,
    /// The `list` label each job was last shown: it goes out again only when it changes.
    #[serde(default)]
    pub shown: ShownLabels,
}

/// The values of the `list` label, numbered in this order in the blob written.
const LIST_VALUES: [&str; 3] = ["NL", "WL", "CL"];

/// What FlowCon keeps of one job of the snapshot.
#[derive(Clone, Debug, Default)]
pub struct Slot {
    /// The job's state, once it ran on a worker Algorithm 1 ran on.
    state: Option<JobState>,
    /// The position in `values` of the label last shown, if any.
    shown: Option<u32>,
}

/// FlowCon's memory.
#[derive(Debug, Default)]
pub struct Memory {
    /// The job states a blob held, until the first snapshot takes them by id.
    read: BTreeMap<String, JobState>,
    /// Per worker, in name order.
    pub workers: Vec<(String, WorkerState)>,
    /// Each job of the snapshot, in its order.
    slots: Follow<Slot>,
    /// The label values the blob numbers: [`LIST_VALUES`], then any other a blob read
    /// back held.
    values: Vec<String>,
    /// The `jobs` map's entries, in snapshot order.
    job_entries: Entries,
    /// The remembered labels' entries, in snapshot order.
    label_entries: Entries,
    /// Each worker's entry as last written, in name order.
    worker_entries: Vec<WorkerEntry>,
    /// The JSON of `values` as last written.
    values_json: Vec<u8>,
    /// The blob returned last.
    blob: Vec<u8>,
}

thread_local! {
    /// What this instance returned last.
    static KEPT: RefCell<Option<Memory>> = const { RefCell::new(None) };
}

impl Memory {
    /// The memory `blob` holds: the one this instance kept when `blob` is what it
    /// returned last, else decoded.
    pub fn read(blob: &[u8]) -> Result<Self, String> {
        if let Some(kept) = KEPT.with(|k| k.borrow_mut().take())
            && same_bytes(&kept.blob, blob)
        {
            return Ok(kept);
        }
        let st: State = state::decode(blob)?;
        let (values, positions) = st.shown.numbered_from(&LIST_VALUES);
        let slots = st
            .shown
            .remembered()
            .iter()
            .map(|&(hash, at)| {
                let slot = Slot {
                    shown: positions.get(at as usize).copied(),
                    ..Slot::default()
                };
                (hash, slot)
            })
            .collect();
        Ok(Self {
            read: st.jobs,
            workers: st.workers.into_iter().collect(),
            slots: Follow::unmatched(slots),
            values,
            job_entries: Entries::new(b","),
            label_entries: Entries::new(b""),
            worker_entries: Vec::new(),
            values_json: Vec::new(),
            blob: Vec::new(),
        })
    }

    /// Brings the memory to `snapshot`: the states of the jobs that left are dropped.
    pub fn follow(&mut self, snapshot: &Snapshot) {
        self.job_entries.follow(snapshot);
        self.label_entries.follow(snapshot);
        let read = &mut self.read;
        self.slots.follow(
            snapshot,
            |_, job, old| {
                let old = old.unwrap_or_default();
                Slot {
                    state: old.state.or_else(|| read.remove(&job.id)),
                    shown: old.shown,
                }
            },
            |_| {},
        );
        // A state read back for a job that is not in the snapshot goes.
        self.read.clear();
    }

    /// How many jobs have a state.
    pub fn states(&self) -> usize {
        self.slots
            .values()
            .iter()
            .filter(|s| s.state.is_some())
            .count()
    }

    /// Takes the state of the job at `at` (to give it back with [`Memory::put_state`]).
    pub fn take_state(&mut self, at: usize) -> Option<JobState> {
        self.slots.values_mut()[at].state.take()
    }

    /// Gives the job at `at` its state; `changed` when it differs from the blob's.
    pub fn put_state(&mut self, at: usize, state: JobState, changed: bool) {
        self.slots.values_mut()[at].state = Some(state);
        if changed {
            self.job_entries.changed(at);
        }
    }

    /// The `list` label of each job with a state whose list differs from the label it
    /// was last shown, in snapshot order; remembers them as shown.
    pub fn changed_labels(&mut self) -> Vec<(usize, List)> {
        let mut changed = Vec::new();
        for (at, slot) in self.slots.values_mut().iter_mut().enumerate() {
            let Some(list) = slot.state.as_ref().map(|s| s.list) else {
                continue;
            };
            let value = list_value(list);
            if slot.shown != Some(value) {
                slot.shown = Some(value);
                changed.push((at, list));
            }
        }
        for &(at, _) in &changed {
            self.label_entries.changed(at);
        }
        changed
    }

    /// The blob, the JSON of [`State`], for the host to keep; the memory is kept with
    /// it.
    pub fn write_and_keep(mut self, snapshot: &Snapshot) -> Vec<u8> {
        let slots = self.slots.values();
        let job_entries = self.job_entries.write(b"", b"", |at, out| {
            let id = &snapshot.jobs[at].id;
            let Some(state) = &slots[at].state else {
                return false;
            };
            out.extend_from_slice(&state::encode(id));
            out.push(b':');
            out.extend_from_slice(&state::encode(state));
            true
        });
        let label_entries = self.label_entries.write(b"", b"", |at, out| {
            let Some(position) = slots[at].shown else {
                return false;
            };
            ShownLabels::write_entry(out, id_hash(&snapshot.jobs[at].id), position);
            true
        });
        let mut blob = Vec::with_capacity(self.blob.len() + 64);
        blob.extend_from_slice(b"{\"jobs\":{");
        blob.extend_from_slice(&job_entries);
        blob.extend_from_slice(b"},\"workers\":{");
        // A worker's entry is written again only when its state changed; the workers
        // and the cache are both in name order.
        let mut cache = std::mem::take(&mut self.worker_entries)
            .into_iter()
            .peekable();
        for (i, (name, worker)) in self.workers.iter().enumerate() {
            if i > 0 {
                blob.push(b',');
            }
            while cache.next_if(|entry| entry.name < *name).is_some() {}
            let entry = match cache.next_if(|entry| entry.name == *name) {
                Some(entry) if entry.state == *worker => entry,
                // The interval and the time it is due move every run; the members,
                // rarely: their JSON is kept.
                Some(entry) if entry.state.members == worker.members => {
                    WorkerEntry::write(entry.name, worker.clone(), entry.members)
                }
                _ => {
                    let members = state::encode(&worker.members);
                    WorkerEntry::write(name.clone(), worker.clone(), members)
                }
            };
            blob.extend_from_slice(&entry.bytes);
            self.worker_entries.push(entry);
        }
        blob.extend_from_slice(b"},\"shown\":{\"values\":");
        if self.values_json.is_empty() {
            self.values_json = state::encode(&self.values);
        }
        blob.extend_from_slice(&self.values_json);
        blob.extend_from_slice(b",\"shown\":\"");
        blob.extend_from_slice(&label_entries);
        blob.extend_from_slice(b"\"}}");
        self.blob = blob.clone();
        KEPT.with(|k| *k.borrow_mut() = Some(self));
        blob
    }
}

/// A worker's entry in the blob's `workers` map.
#[derive(Debug)]
struct WorkerEntry {
    name: String,
    /// The state it holds.
    state: WorkerState,
    /// The JSON of the state's members.
    members: Vec<u8>,
    /// `"name":{...}`.
    bytes: Vec<u8>,
}

impl WorkerEntry {
    /// The entry of `state` under `name`, its members' JSON being `members`: serde's
    /// JSON of the state, its fields in their order.
    fn write(name: String, state: WorkerState, members: Vec<u8>) -> Self {
        let mut bytes = state::encode(&name);
        bytes.extend_from_slice(b":{\"itval\":");
        bytes.extend_from_slice(&state::encode(&state.itval));
        bytes.extend_from_slice(b",\"due\":");
        bytes.extend_from_slice(&state::encode(&state.due));
        bytes.extend_from_slice(b",\"members\":");
        bytes.extend_from_slice(&members);
        bytes.push(b'}');
        Self {
            name,
            state,
            members,
            bytes,
        }
    }
}

/// The position of `list`'s name in [`LIST_VALUES`].
fn list_value(list: List) -> u32 {
    match list {
        List::NL => 0,
        List::WL => 1,
        List::CL => 2,
    }
}

/// Where this instance keeps its memory (tests: a fresh instance's call in between).
#[cfg(test)]
pub(crate) fn kept() -> &'static std::thread::LocalKey<RefCell<Option<Memory>>> {
    &KEPT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_s_entry_is_the_json_serde_writes_for_it() {
        let state = WorkerState {
            itval: 60.0,
            due: 1.0 / 3.0,
            members: vec!["a".into(), "b\"q".into()],
        };
        let entry = WorkerEntry::write("w\"1".into(), state.clone(), state::encode(&state.members));
        let map = BTreeMap::from([("w\"1".to_string(), state)]);
        let serde = state::encode(&map);
        assert_eq!(
            String::from_utf8(entry.bytes),
            String::from_utf8(serde[1..serde.len() - 1].to_vec())
        );
    }
}
