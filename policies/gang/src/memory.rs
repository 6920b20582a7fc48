//! Strict mode's memory between calls: per job, what a round needs of it ([`Facts`])
//! and the label it was last shown, kept in the snapshot's order and brought to each
//! call's snapshot by the jobs the host's change names ([`Follow`]).
//!
//! The blob is the one [`ShownLabels`] writes and reads (`{"values": [...], "shown":
//! "<hash><position>,..."}`), so either mode reads the other's, and a blob written
//! before this memory existed reads too. It is written a job at a time ([`Entries`]):
//! a queue of thousands whose labels did not change costs a copy.

use std::cell::RefCell;

use switchyard_policy_sdk::{
    Snapshot,
    changes::Follow,
    memcmp::same_bytes,
    shown::{ShownLabels, id_hash},
    state::{self, Entries},
};

use crate::strict::Facts;

/// The values strict mode shows, numbered in this order in the blob it writes.
pub const STRICT_VALUES: [&str; 5] = [
    "placed",
    "waiting",
    "head-of-line",
    "never-fits",
    "incomplete",
];

/// What strict mode keeps of one job.
#[derive(Clone, Debug, Default)]
pub struct Slot {
    /// What a round needs of the job.
    pub facts: Facts,
    /// The position in [`Memory::values`] of the label last shown, if any.
    pub shown: Option<u32>,
}

/// Strict mode's memory.
#[derive(Debug, Default)]
pub struct Memory {
    /// Each job of the snapshot.
    pub jobs: Follow<Slot>,
    /// The label values the blob numbers: [`STRICT_VALUES`], then any other a blob
    /// read back held.
    pub values: Vec<String>,
    entries: Entries,
}

thread_local! {
    /// What this instance returned last.
    static KEPT: RefCell<Option<Memory>> = const { RefCell::new(None) };
}

impl Memory {
    /// The memory `blob` holds: the one this instance kept when `blob` is what it
    /// returned last, else read from the blob (of either mode).
    pub fn read(blob: &[u8]) -> Result<Self, String> {
        if let Some(kept) = KEPT.with(|k| k.borrow_mut().take())
            && same_bytes(kept.entries.blob(), blob)
        {
            return Ok(kept);
        }
        let shown: ShownLabels = state::decode(blob)?;
        let (values, positions) = shown.numbered_from(&STRICT_VALUES);
        let jobs = shown
            .remembered()
            .iter()
            .map(|&(hash, at)| {
                let slot = Slot {
                    facts: Facts::default(),
                    shown: positions.get(at as usize).copied(),
                };
                (hash, slot)
            })
            .collect();
        Ok(Self {
            jobs: Follow::unmatched(jobs),
            values,
            entries: Entries::new(b""),
        })
    }

    /// Brings the memory to `snapshot`: the jobs that left are forgotten, the facts of
    /// new and changed ones are read.
    pub fn follow(&mut self, snapshot: &Snapshot) {
        self.entries.follow(snapshot);
        self.jobs.follow(
            snapshot,
            |_, job, old| Slot {
                facts: Facts::of(job),
                shown: old.and_then(|o| o.shown),
            },
            |_| {},
        );
    }

    /// The job at `at` was shown the value at `value` of [`Memory::values`].
    pub fn shown(&mut self, at: usize, value: u32) {
        self.jobs.values_mut()[at].shown = Some(value);
        self.entries.changed(at);
    }

    /// The blob for the host to keep until the next call; the memory is kept with it.
    pub fn write_and_keep(mut self, snapshot: &Snapshot) -> Vec<u8> {
        let mut head = b"{\"values\":".to_vec();
        head.extend_from_slice(&state::encode(&self.values));
        head.extend_from_slice(b",\"shown\":\"");
        let slots = self.jobs.values();
        let blob = self.entries.write(&head, b"\"}", |at, out| {
            let Some(position) = slots[at].shown else {
                return false;
            };
            ShownLabels::write_entry(out, id_hash(&snapshot.jobs[at].id), position);
            true
        });
        KEPT.with(|k| *k.borrow_mut() = Some(self));
        blob
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::*;

    fn gpu_nodes() -> Vec<switchyard_policy_sdk::Node> {
        vec![node("a", 64_000).gpus(4), node("b", 64_000).gpus(4)]
    }

    #[test]
    fn a_kept_instance_decides_and_writes_as_a_fresh_instance_would() {
        let first = snapshot(
            0.0,
            gpu_nodes(),
            vec![
                job("big").requests(1000, 4).distributed(0, 2, 2, 2),
                job("small").requests(1000, 1).submitted_at(1.0),
            ],
        );
        let changes: [Change; 7] = [
            &|s| {
                s.time = 10.0;
                s.jobs.push(
                    job("wide")
                        .requests(1000, 3)
                        .distributed(0, 2, 2, 2)
                        .submitted_at(10.0),
                );
            },
            &|s| {
                s.time = 20.0;
                s.jobs.push(
                    job("part")
                        .distributed(0, 2, 2, 2)
                        .label("tasks", "4")
                        .submitted_at(20.0),
                );
                s.jobs
                    .push(job("huge").requests(1000, 9).submitted_at(20.0));
            },
            // The oldest waiting gang starves: the queue stops behind it.
            &|s| {
                s.time = 400.0;
                s.jobs
                    .push(job("late").requests(1000, 1).submitted_at(400.0));
            },
            &|s| {
                s.time = 500.0;
                finish(s, "small");
            },
            &|s| {
                s.time = 600.0;
                finish(s, "big");
            },
            &|s| s.time = 700.0,
            &|s| {
                s.time = 800.0;
                let at = s.jobs.iter().position(|j| j.id == "part").unwrap();
                s.jobs[at] = job("part")
                    .distributed(0, 4, 4, 4)
                    .label("tasks", "4")
                    .submitted_at(20.0);
            },
        ];
        kept_decides_as_fresh(&KEPT, first, Vec::new(), &changes, |s, blob| {
            crate::policy::decide(&[], s, blob).unwrap()
        });
    }

    #[test]
    fn a_blob_of_either_mode_or_of_the_earlier_memory_reads() {
        let s = snapshot(
            0.0,
            gpu_nodes(),
            vec![job("x").requests(1000, 9), job("y").requests(1000, 1)],
        );
        // Thesis mode's values, numbered otherwise, and the earlier list of pairs.
        let x = id_hash("x");
        let earlier = format!(r#"{{"values":["roles-missing","never-fits"],"shown":[[{x},1]]}}"#);
        let d = crate::policy::decide(&[], &s, earlier.as_bytes()).unwrap();
        let told: Vec<(&str, &str)> = d
            .labels
            .iter()
            .map(|l| (l.job.as_str(), l.value.as_str()))
            .collect();
        assert_eq!(told, [("y", "placed")], "x was shown never-fits already");
        let back: ShownLabels = state::decode(&d.state).unwrap();
        assert_eq!(back.remembered().len(), 2);
        KEPT.with(|k| k.borrow_mut().take());
        let again = crate::policy::decide(&[], &s, &d.state).unwrap();
        assert!(again.labels.is_empty(), "both were shown what they get");
        let roles = format!(r#"{{"values":["roles-missing"],"shown":"{x:016x}0,"}}"#);
        let memory = Memory::read(roles.as_bytes()).unwrap();
        assert_eq!(memory.values[5], "roles-missing");
        assert_eq!(memory.jobs.len(), 1);
    }
}
