//! SpeCon's even spread (also the "DS" baseline): the k-th arriving job on worker
//! `k mod |W|`, kept as a value per job that follows the snapshot from call to call.
//!
//! A long queue behind a full cluster is the normal state of a trace, and a round
//! changes a few of its jobs. The spread remembers, per job, its arrival number and what
//! its pending tasks ask for (refreshed only when the job changes, see
//! [`crate::changes`]), and what room its last walk left: while no node offers more
//! than that, every job that did not fit then does not fit now, and only the new and
//! changed jobs are tried. The outcome is the walk over the whole queue, job by job.
//! Where one job goes is [`crate::placement`]'s to say; this module owns the walk and
//! what it keeps, and places nothing itself.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use std::cell::Cell;

use crate::changes::Follow;
use crate::cluster::{
    GangShape, Headroom, Ledger, has_pending_tasks, one_task_per_node, pending_tasks,
};
use crate::shown::id_hash;
use crate::{Action, Job, Snapshot};

/// The fixed, even initial placement of SpeCon's evaluation: the k-th arriving job goes
/// to worker `k mod |W|` (snapshot node order), or the next worker round the ring with
/// room.
///
/// In a state blob it is `{"arrivals": {job id: arrival number, ...}, "next": n}`, the
/// jobs in the last snapshot's order (the form it always had).
#[derive(Clone, Debug, Default)]
pub struct EvenSpread {
    /// Each job of the last snapshot, in its order.
    jobs: Follow<Spread>,
    /// Arrival numbers read from a blob, not matched to a snapshot yet.
    read: Vec<(String, u64)>,
    /// Arrival number the next new job gets.
    next: u64,
    /// What the last walk left, when it had workers to place on.
    walked: Option<Headroom>,
    /// Jobs whose pending tasks are not a gang of alike tasks that may share a node.
    others: usize,
    /// Jobs the last walk placed that have not changed since.
    placed: usize,
}

/// What one walk of the spread did.
#[derive(Debug, Default)]
pub struct Walk {
    /// One `place` action per job placed, in snapshot order.
    pub actions: Vec<Action>,
    /// The jobs numbered: `(snapshot position, arrival number)`.
    pub numbered: Vec<(usize, u64)>,
    /// The snapshot position of the job of each action.
    pub placed: Vec<usize>,
}

/// What the spread keeps of one job.
#[derive(Clone, Debug, Default)]
struct Spread {
    id: String,
    /// Its arrival number, once it was seen waiting.
    number: Option<u64>,
    need: Need,
    /// The last walk placed it; until the job changes, it is not known to have failed.
    placed: bool,
}

/// What a job's pending tasks ask of a walk.
#[derive(Clone, Copy, Debug, Default)]
enum Need {
    /// No pending task.
    #[default]
    Nothing,
    /// Alike tasks, none of the job's on a node yet, free to share one: a packing that
    /// only fills nodes, so whatever failed on some room fails on less.
    Gang(GangShape),
    /// Anything else (tasks already on a node, tasks unlike, one task to a node):
    /// tried on every walk.
    Other,
}

impl Need {
    fn of(job: &Job) -> Self {
        if !has_pending_tasks(job) {
            return Need::Nothing;
        }
        if one_task_per_node(job) || job.tasks.iter().any(|t| t.node.is_some()) {
            return Need::Other;
        }
        GangShape::of_pending(job).map_or(Need::Other, Need::Gang)
    }

    fn other(self) -> bool {
        matches!(self, Need::Other)
    }
}

impl EvenSpread {
    /// A spread that gave the jobs `numbers` (in the order of the snapshot they were
    /// seen in) and gives `next` to the next new job: what a policy that writes the
    /// numbers in its own blob read back.
    pub fn from_numbers(numbers: Vec<(String, u64)>, next: u64) -> Self {
        Self {
            read: numbers,
            next,
            ..Self::default()
        }
    }

    /// The arrival number given to `job`, if it has one (a scan: for tests and
    /// diagnostics; a round learns the new numbers from [`EvenSpread::place_numbering`]).
    pub fn arrival_of(&self, job: &str) -> Option<u64> {
        self.read
            .iter()
            .map(|(id, k)| (id.as_str(), Some(*k)))
            .chain(self.numbers())
            .find(|(id, _)| *id == job)
            .and_then(|(_, k)| k)
    }

    /// Each job of the last call's snapshot, in its order, with its arrival number if
    /// it has one.
    pub fn numbers(&self) -> impl Iterator<Item = (&str, Option<u64>)> + Clone {
        self.jobs.values().iter().map(|s| (s.id.as_str(), s.number))
    }

    /// The id and arrival number (if it has one) of the job at position `at` of the
    /// last call's snapshot.
    pub fn job_at(&self, at: usize) -> Option<(&str, Option<u64>)> {
        self.jobs
            .values()
            .get(at)
            .map(|s| (s.id.as_str(), s.number))
    }

    /// The arrival number the next new job gets.
    pub fn next_number(&self) -> u64 {
        self.next
    }

    /// One `place` action per job with pending tasks that fits: all its pending tasks on
    /// one worker, chosen as described on [`EvenSpread`]. A job whose tasks fit on no
    /// single worker is packed onto the fewest nodes instead (all or nothing); a job that
    /// fits nowhere waits for the next call. A job that already has tasks on a node gets
    /// its missing tasks there when they fit.
    pub fn place(&mut self, snapshot: &Snapshot, ledger: &mut Ledger) -> Vec<Action> {
        self.place_numbering(snapshot, ledger).0
    }

    /// [`EvenSpread::place`], and the jobs numbered in this call: `(snapshot position,
    /// arrival number)`.
    ///
    /// Jobs are walked in snapshot order; a job is numbered the first time a walk sees
    /// it with pending tasks. When no node offers more room than the last walk left,
    /// the jobs that did not change since did not fit then and do not fit now, and the
    /// walk takes only the new and changed ones (unless a job of the queue is one whose
    /// packing is not monotone in the room, or a placement of the last walk was not
    /// seen through): the same placements and numbers as a walk over every job.
    pub fn place_numbering(
        &mut self,
        snapshot: &Snapshot,
        ledger: &mut Ledger,
    ) -> (Vec<Action>, Vec<(usize, u64)>) {
        let walk = self.walk(snapshot, ledger);
        (walk.actions, walk.numbered)
    }

    /// [`EvenSpread::place_numbering`], with the position of each placed job.
    pub fn walk(&mut self, snapshot: &Snapshot, ledger: &mut Ledger) -> Walk {
        let read = std::mem::take(&mut self.read);
        if !read.is_empty() {
            self.jobs = Follow::unmatched(
                read.into_iter()
                    .map(|(id, k)| {
                        let spread = Spread {
                            number: Some(k),
                            ..Spread::default()
                        };
                        (id_hash(&id), Spread { id, ..spread })
                    })
                    .collect(),
            );
        }
        // Counted as values come and go, so a walk knows without a pass over the queue.
        let others = Cell::new(self.others);
        let placed = Cell::new(self.placed);
        let forget = |spread: &Spread| {
            others.set(others.get() - usize::from(spread.need.other()));
            placed.set(placed.get() - usize::from(spread.placed));
        };
        let followed = self.jobs.follow(
            snapshot,
            |_, job, old| {
                let (id, number) = match old {
                    Some(old) if old.id == job.id => {
                        forget(&old);
                        (old.id, old.number)
                    }
                    Some(old) => {
                        forget(&old);
                        (job.id.clone(), None)
                    }
                    None => (job.id.clone(), None),
                };
                let need = Need::of(job);
                others.set(others.get() + usize::from(need.other()));
                Spread {
                    id,
                    number,
                    need,
                    placed: false,
                }
            },
            |gone| forget(&gone),
        );
        (self.others, self.placed) = (others.get(), placed.get());
        let workers: Vec<&str> = snapshot.nodes.iter().map(|n| n.name.as_str()).collect();
        let walked = self.walked.take();
        let only_changed = !followed.whole
            && self.others == 0
            && self.placed == 0
            && walked.is_some_and(|room| ledger.offers_no_more_than(&room));
        let walk: Box<dyn Iterator<Item = usize>> = match (only_changed, workers.is_empty()) {
            (_, true) => Box::new(std::iter::empty()),
            (true, false) => Box::new(followed.touched.into_iter()),
            (false, false) => Box::new(0..snapshot.jobs.len()),
        };
        let mut actions = Vec::new();
        let mut numbered = Vec::new();
        let mut positions = Vec::new();
        let spreads = self.jobs.values_mut();
        for at in walk {
            let spread = &mut spreads[at];
            if let Need::Nothing = spread.need {
                // Still active: it keeps its number.
                continue;
            }
            let k = *spread.number.get_or_insert_with(|| {
                self.next += 1;
                numbered.push((at, self.next - 1));
                self.next - 1
            });
            let placed = match spread.need {
                Need::Gang(shape) if ledger.known_not_to_fit_shape(&shape) => None,
                _ => {
                    let job = &snapshot.jobs[at];
                    crate::placement::place_even(job, &pending_tasks(job), k, &workers, ledger)
                }
            };
            if spread.placed != placed.is_some() {
                spread.placed = placed.is_some();
                match spread.placed {
                    true => self.placed += 1,
                    false => self.placed -= 1,
                }
            }
            if let Some(action) = placed {
                positions.push(at);
                actions.push(action);
            }
        }
        if !workers.is_empty() {
            self.walked = Some(ledger.headroom());
        }
        Walk {
            actions,
            numbered,
            placed: positions,
        }
    }
}

impl Serialize for EvenSpread {
    fn serialize<S: Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        let mut spread = out.serialize_struct("EvenSpread", 2)?;
        spread.serialize_field("arrivals", &Arrivals(self))?;
        spread.serialize_field("next", &self.next)?;
        spread.end()
    }
}

/// The numbered jobs of a spread, as a map from job id to number.
struct Arrivals<'a>(&'a EvenSpread);

impl Serialize for Arrivals<'_> {
    fn serialize<S: Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        let read = self.0.read.iter().map(|(id, k)| (id.as_str(), *k));
        let numbered = self.0.numbers().filter_map(|(id, k)| k.map(|k| (id, k)));
        let count = read.clone().count() + numbered.clone().count();
        let mut map = out.serialize_map(Some(count))?;
        for (id, k) in read.chain(numbered) {
            map.serialize_entry(id, &k)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for EvenSpread {
    fn deserialize<D: Deserializer<'de>>(input: D) -> Result<Self, D::Error> {
        /// The stored form.
        #[derive(Deserialize)]
        struct Stored {
            #[serde(deserialize_with = "in_order")]
            arrivals: Vec<(String, u64)>,
            next: u64,
        }
        let Stored { arrivals, next } = Stored::deserialize(input)?;
        Ok(Self {
            read: arrivals,
            next,
            ..Self::default()
        })
    }
}

/// The arrivals map, read back in the blob's order.
fn in_order<'de, D: Deserializer<'de>>(input: D) -> Result<Vec<(String, u64)>, D::Error> {
    struct Entries;

    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<(String, u64)>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map from job id to arrival number")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
            while let Some(entry) = map.next_entry::<String, u64>()? {
                entries.push(entry);
            }
            Ok(entries)
        }
    }

    input.deserialize_map(Entries)
}
