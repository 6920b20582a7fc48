//! A state blob written a job at a time: an entry per job of the snapshot, in its
//! order, between a head and a tail, where the entries of the jobs that did not change
//! are copied from the previous blob.
//!
//! A policy that remembers something per queued job hands the host a blob of the whole
//! queue every round. Serialising every entry again would make a queue of thousands cost
//! a round far more than the jobs that changed; an entry kept where it was written is a
//! copy, and a run of them one copy. Which jobs changed comes from
//! [`crate::changes::Follow`]; what an entry says, and the head and tail around the
//! entries, are the policy's.

use std::ops::Range;

use crate::Snapshot;
use crate::changes::{Follow, Followed};

/// Where one job's entry is in the last blob written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Entry {
    /// Not written since the job changed (or the job is new): written next time.
    #[default]
    Stale,
    /// The job had no entry, and has not changed since.
    Absent,
    /// Its bytes in the last blob.
    At(Range<usize>),
}

/// The last blob a policy wrote and where each job's entry lies in it.
#[derive(Clone, Debug, Default)]
pub struct Entries {
    jobs: Follow<Entry>,
    blob: Vec<u8>,
    /// Bytes between two entries (a comma in a JSON list or map; none when each entry
    /// ends itself).
    separator: &'static [u8],
}

impl Entries {
    /// No blob written yet; entries will be separated by `separator`.
    pub fn new(separator: &'static [u8]) -> Self {
        Self {
            separator,
            ..Self::default()
        }
    }

    /// Brings the entries to `snapshot` ([`Follow::follow`]): those of the jobs that
    /// left are dropped, those of new and changed jobs will be written anew.
    pub fn follow(&mut self, snapshot: &Snapshot) -> Followed {
        self.jobs.follow(snapshot, |_, _, _| Entry::Stale, |_| {})
    }

    /// The last blob written (empty before the first).
    pub fn blob(&self) -> &[u8] {
        &self.blob
    }

    /// The entry of the job at `at` changed, though the job did not: written anew.
    pub fn changed(&mut self, at: usize) {
        if let Some(entry) = self.jobs.values_mut().get_mut(at) {
            *entry = Entry::Stale;
        }
    }

    /// Every entry changed (a format or head that the entries depend on).
    pub fn all_changed(&mut self) {
        self.jobs.values_mut().fill(Entry::Stale);
    }

    /// The blob: `head`, each job's entry in snapshot order, `tail`. An unchanged entry
    /// is copied from the last blob; a stale one is written by `write(position, out)`,
    /// which appends it to `out` and returns false when the job has no entry (then it
    /// writes nothing).
    pub fn write(
        &mut self,
        head: &[u8],
        tail: &[u8],
        mut write: impl FnMut(usize, &mut Vec<u8>) -> bool,
    ) -> Vec<u8> {
        let previous = std::mem::take(&mut self.blob);
        let mut blob = Vec::with_capacity(previous.len() + head.len() + tail.len() + 64);
        blob.extend_from_slice(head);
        let separator = self.separator;
        let entries = self.jobs.values_mut();
        // Entries to copy, not copied yet: they follow one another in `previous`,
        // separators included, and go to `blob` as one piece.
        let mut run: Option<Run> = None;
        let mut any = false;
        for at in 0..entries.len() {
            match &entries[at] {
                Entry::Absent => {}
                Entry::At(range) => {
                    let range = range.clone();
                    match &mut run {
                        Some(r) if r.bytes.end + separator.len() == range.start => {
                            r.bytes.end = range.end;
                            r.last = at;
                        }
                        _ => {
                            if let Some(r) = run.take() {
                                r.copy(&mut blob, &previous, entries);
                            }
                            if any {
                                blob.extend_from_slice(separator);
                            }
                            run = Some(Run {
                                bytes: range,
                                first: at,
                                last: at,
                            });
                        }
                    }
                    any = true;
                }
                Entry::Stale => {
                    if let Some(r) = run.take() {
                        r.copy(&mut blob, &previous, entries);
                    }
                    let before = blob.len();
                    if any {
                        blob.extend_from_slice(separator);
                    }
                    let start = blob.len();
                    if write(at, &mut blob) {
                        entries[at] = Entry::At(start..blob.len());
                        any = true;
                    } else {
                        blob.truncate(before);
                        entries[at] = Entry::Absent;
                    }
                }
            }
        }
        if let Some(r) = run.take() {
            r.copy(&mut blob, &previous, entries);
        }
        blob.extend_from_slice(tail);
        self.blob = blob.clone();
        blob
    }
}

/// Entries `first..=last` (those present), lying at `bytes` of the previous blob.
struct Run {
    bytes: Range<usize>,
    first: usize,
    last: usize,
}

impl Run {
    /// Appends the run's bytes to `blob` and moves its entries' ranges there.
    fn copy(self, blob: &mut Vec<u8>, previous: &[u8], entries: &mut [Entry]) {
        let start = blob.len();
        blob.extend_from_slice(&previous[self.bytes.clone()]);
        for entry in &mut entries[self.first..=self.last] {
            if let Entry::At(range) = entry {
                *range =
                    range.start - self.bytes.start + start..range.end - self.bytes.start + start;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Job;
    use crate::changes::with_applied;
    use crate::testing::{JobBuilder, change_between, job, node, snapshot, tick_delta};

    /// A job's entry: `"id":<its priority>`, none for a negative priority.
    fn entry(s: &Snapshot, at: usize, out: &mut Vec<u8>) -> bool {
        let job = &s.jobs[at];
        if job.priority < 0 {
            return false;
        }
        out.extend_from_slice(format!("\"{}\":{}", job.id, job.priority).as_bytes());
        true
    }

    /// The blob written whole, as a policy without [`Entries`] would.
    fn whole(s: &Snapshot) -> String {
        let entries: Vec<String> = s
            .jobs
            .iter()
            .filter(|j| j.priority >= 0)
            .map(|j| format!("\"{}\":{}", j.id, j.priority))
            .collect();
        ["{", &entries.join(","), "}"].concat()
    }

    fn prioritised(id: &str, priority: i32) -> Job {
        let mut j = job(id);
        j.priority = priority;
        j
    }

    #[test]
    fn entries_copied_or_written_give_the_blob_written_whole() {
        let mut entries = Entries::new(b",");
        let first = snapshot(
            0.0,
            vec![node("n", 1000)],
            (0..8)
                .map(|i| prioritised(&format!("j{i}"), i - 1))
                .collect(),
        );
        let blob = with_applied(tick_delta(0.0, true, &first.nodes, &first.jobs), |s| {
            entries.follow(s);
            entries.write(b"{", b"}", |at, out| entry(s, at, out))
        })
        .unwrap();
        assert_eq!(String::from_utf8(blob).unwrap(), whole(&first));
        let mut rounds = vec![first];
        type Change<'a> = &'a dyn Fn(&mut Vec<Job>);
        let changes: [Change; 5] = [
            &|jobs| {
                jobs.remove(3);
                jobs.remove(0);
                jobs.push(prioritised("new", 7));
            },
            &|jobs| jobs[2].priority = -1,
            &|jobs| jobs[0].priority = 5,
            &|jobs| {
                jobs[4] = jobs[4].clone().running_on("n");
                jobs.push(prioritised("absent", -3));
            },
            &|jobs| jobs.truncate(1),
        ];
        // Only the entries of the jobs a change names are written.
        for (change, writes) in changes.into_iter().zip([1, 1, 1, 2, 0]) {
            let before = rounds.last().unwrap().clone();
            let mut after = before.clone();
            change(&mut after.jobs);
            let mut written = 0;
            let blob = with_applied(change_between(&before, &after), |s| {
                entries.follow(s);
                entries.write(b"{", b"}", |at, out| {
                    written += 1;
                    entry(s, at, out)
                })
            })
            .unwrap();
            assert_eq!(String::from_utf8(blob).unwrap(), whole(&after));
            assert_eq!(written, writes);
            rounds.push(after);
        }
    }
}
