//! Taking the cluster as deltas: the snapshot an `incremental-policy` instance holds.
//!
//! The host may keep a policy's instance between calls and send only what changed
//! (`snapshot-delta` in the WIT). [`crate::policy_binding!`] exports that world and
//! applies each change here before calling the policy's `decide` on the whole snapshot,
//! so a policy is written against [`Snapshot`] alone and cannot tell the two apart.

use std::cell::{Cell, RefCell};

use crate::{Job, LossSeries, LossUpdates, Snapshot, SnapshotDelta};

/// Bindings of the `switchyard:policy/incremental-policy` world; its types and the
/// `host` import are those of [`crate::bindings`].
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "switchyard:policy/incremental-policy@0.3.0",
        with: {
            "switchyard:policy/types@0.3.0": crate::bindings::switchyard::policy::types,
            "switchyard:policy/host@0.3.0": crate::bindings::switchyard::policy::host,
        },
        default_bindings_module: "switchyard_policy_sdk::incremental::bindings",
        pub_export_macro: true,
        export_macro_name: "export_incremental",
    });
}

pub use bindings::exports::switchyard::policy::incremental_scheduler::Guest as IncrementalGuest;

thread_local! {
    /// The snapshot this instance reached on its last call.
    static HELD: RefCell<Option<Snapshot>> = const { RefCell::new(None) };
    /// Counts the changes to the held nodes and jobs ([`held_version`]).
    static VERSION: Cell<u64> = const { Cell::new(0) };
    /// True while `decide` runs on the held snapshot.
    static DECIDING: Cell<bool> = const { Cell::new(false) };
}

/// While a kept instance decides: a number that changes whenever the nodes or jobs it
/// holds change (a reset included), and stays the same when the host's change only
/// moved the clock and the triggers (a timer round). A policy that keeps what it
/// computed from the nodes and jobs alone (with the state it returned, see
/// [`crate::state::decode_kept`]) and the number it was computed at may use it again
/// while the number is the same: on a long trace most rounds are such ticks, and the
/// queue need not be walked again. `None` outside such a call (a policy handed a whole
/// snapshot), where nothing is known.
pub fn held_version() -> Option<u64> {
    DECIDING.with(Cell::get).then(|| VERSION.with(Cell::get))
}

/// True when `change` leaves the held nodes and jobs as they were.
fn leaves_cluster_alone(change: &SnapshotDelta) -> bool {
    !change.reset
        && change.nodes.is_empty()
        && change.removed_nodes.is_empty()
        && change.jobs.is_empty()
        && change.removed_jobs.is_empty()
        && change.loss_updates.jobs.is_empty()
        && change.node_sets.is_none()
}

/// Applies `change` to the snapshot this instance holds and runs `decide` on the
/// result. A change that does not fit what is held is an error, and the instance then
/// holds nothing (the host starts a fresh one).
pub fn with_applied<R>(
    change: SnapshotDelta,
    decide: impl FnOnce(&Snapshot) -> R,
) -> Result<R, String> {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.is_none() || !leaves_cluster_alone(&change) {
            VERSION.with(|v| v.set(v.get().wrapping_add(1)));
        }
        if let Err(message) = apply(&mut held, change) {
            *held = None;
            return Err(message);
        }
        DECIDING.with(|flag| flag.set(true));
        let decided = decide(held.as_ref().expect("applied"));
        DECIDING.with(|flag| flag.set(false));
        Ok(decided)
    })
}

/// Brings `held` to the snapshot `change` describes.
pub fn apply(held: &mut Option<Snapshot>, change: SnapshotDelta) -> Result<(), String> {
    let SnapshotDelta {
        reset,
        time,
        triggers,
        nodes,
        removed_nodes,
        jobs,
        removed_jobs,
        loss_updates,
        node_sets,
    } = change;
    if reset {
        *held = Some(Snapshot {
            time,
            triggers,
            nodes,
            jobs,
            node_sets: node_sets.unwrap_or_default(),
        });
        return Ok(());
    }
    let snapshot = held
        .as_mut()
        .ok_or("the host sent a change, but this instance holds no snapshot to apply it to")?;
    snapshot.time = time;
    snapshot.triggers = triggers;
    if let Some(sets) = node_sets {
        snapshot.node_sets = sets;
    }
    merge(&mut snapshot.nodes, nodes, &removed_nodes, |n| &n.name)
        .map_err(|e| format!("node {e}"))?;
    merge(&mut snapshot.jobs, jobs, &removed_jobs, |j| &j.id).map_err(|e| format!("job {e}"))?;
    apply_loss(&mut snapshot.jobs, loss_updates)
}

/// Drops each updated job's oldest samples and appends its new ones, in the order the
/// updates come.
fn apply_loss(jobs: &mut [Job], updates: LossUpdates) -> Result<(), String> {
    let LossUpdates {
        jobs: positions,
        dropped,
        appended,
        samples,
    } = updates;
    if dropped.len() != positions.len() || appended.len() != positions.len() {
        return Err(format!(
            "loss updates name {} jobs but give {} drop counts and {} append counts",
            positions.len(),
            dropped.len(),
            appended.len()
        ));
    }
    let sent = series_len(&samples).map_err(|e| format!("appended loss samples: {e}"))?;
    let mut at: usize = 0;
    let mut previous: Option<u32> = None;
    for ((&position, &dropped), &count) in positions.iter().zip(&dropped).zip(&appended) {
        if let Some(before) = previous.filter(|&before| before >= position) {
            return Err(format!(
                "loss update for job #{position} follows one for job #{before}: positions must increase"
            ));
        }
        previous = Some(position);
        let held = jobs.len();
        let Some(job) = jobs.get_mut(position as usize) else {
            return Err(format!(
                "loss update for job #{position}, but {held} jobs are held"
            ));
        };
        let has = series_len(&job.loss).map_err(|e| format!("job `{}`: {e}", job.id))?;
        let dropped = dropped as usize;
        if dropped > has {
            return Err(format!(
                "loss update drops {dropped} samples of job `{}`, which has {has}",
                job.id
            ));
        }
        let Some(end) = at.checked_add(count as usize).filter(|&end| end <= sent) else {
            return Err(format!(
                "loss update appends {count} samples to job `{}`, more than were sent",
                job.id
            ));
        };
        let loss = &mut job.loss;
        shift(&mut loss.times, dropped, &samples.times[at..end]);
        shift(&mut loss.steps, dropped, &samples.steps[at..end]);
        shift(&mut loss.values, dropped, &samples.values[at..end]);
        at = end;
    }
    if at != sent {
        return Err("more appended loss samples were sent than the loss updates use".into());
    }
    Ok(())
}

/// The number of samples in `series`, whose three columns must be as long as each other.
fn series_len(series: &LossSeries) -> Result<usize, String> {
    let count = series.times.len();
    if series.steps.len() != count || series.values.len() != count {
        return Err(format!(
            "a loss series has {count} times, {} steps and {} values",
            series.steps.len(),
            series.values.len()
        ));
    }
    Ok(count)
}

/// One column of a loss update: the oldest `dropped` leave, `new` follows the rest.
fn shift<T: Copy>(column: &mut Vec<T>, dropped: usize, new: &[T]) {
    column.drain(..dropped);
    column.extend_from_slice(new);
}

/// Removes the `removed` keys (given in held order), replaces changed items in place
/// and appends new ones. Both lists come in held order, so one forward walk finds each
/// without hashing every key.
fn merge<T>(
    held: &mut Vec<T>,
    upserts: Vec<T>,
    removed: &[String],
    key: impl Fn(&T) -> &str,
) -> Result<(), String> {
    if !removed.is_empty() {
        let mut gone = removed.iter().peekable();
        held.retain(|item| {
            let leaves = gone.peek().is_some_and(|k| same_key(k, key(item)));
            if leaves {
                gone.next();
            }
            !leaves
        });
        if let Some(missing) = gone.next() {
            return Err(format!(
                "`{missing}` to remove is not held (or out of order)"
            ));
        }
    }
    let mut cursor = 0;
    for item in upserts {
        while cursor < held.len() && !same_key(key(&held[cursor]), key(&item)) {
            cursor += 1;
        }
        if cursor < held.len() {
            held[cursor] = item;
            cursor += 1;
        } else {
            held.push(item);
            cursor = held.len();
        }
    }
    Ok(())
}

/// Key equality for [`merge`]'s walks, which compare a key with every held item it
/// passes: one cluster's ids and names mostly have the same length and a long common
/// prefix (`application_1506638472019_10238`), and Wasm's `memcmp` (wasi-libc) walks
/// them a byte at a time from the front. The last byte first, then eight at a time.
fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.last() == b.last() && crate::memcmp::same_bytes(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{job, node};

    fn no_loss() -> LossSeries {
        crate::testing::loss_series(&[])
    }

    /// Samples at times and steps `steps`, each of value 1.
    fn series(steps: &[u64]) -> LossSeries {
        LossSeries {
            times: steps.iter().map(|&s| s as f64).collect(),
            steps: steps.to_vec(),
            values: vec![1.0; steps.len()],
        }
    }

    fn updates(positions: &[(u32, u32, u32)], samples: LossSeries) -> LossUpdates {
        LossUpdates {
            jobs: positions.iter().map(|u| u.0).collect(),
            dropped: positions.iter().map(|u| u.1).collect(),
            appended: positions.iter().map(|u| u.2).collect(),
            samples,
        }
    }

    fn change() -> SnapshotDelta {
        SnapshotDelta {
            reset: false,
            time: 1.0,
            triggers: vec![],
            nodes: vec![],
            removed_nodes: vec![],
            jobs: vec![],
            removed_jobs: vec![],
            loss_updates: updates(&[], no_loss()),
            node_sets: None,
        }
    }

    fn held_with_jobs(ids: &[&str]) -> Option<Snapshot> {
        let mut held = None;
        let reset = SnapshotDelta {
            reset: true,
            nodes: vec![node("n1", 1000)],
            jobs: ids.iter().map(|id| job(id)).collect(),
            ..change()
        };
        apply(&mut held, reset).unwrap();
        held
    }

    fn ids(held: &Option<Snapshot>) -> Vec<&str> {
        held.as_ref()
            .unwrap()
            .jobs
            .iter()
            .map(|j| j.id.as_str())
            .collect()
    }

    #[test]
    fn keys_are_equal_exactly_when_their_bytes_are() {
        for (a, b) in [
            ("", ""),
            ("a", "a"),
            (
                "application_1506638472019_10238",
                "application_1506638472019_10238",
            ),
        ] {
            assert!(same_key(a, b), "{a} {b}");
        }
        for (a, b) in [
            ("", "a"),
            ("a", "b"),
            (
                "application_1506638472019_10238",
                "application_1506638472019_10239",
            ),
            (
                "application_1506638472019_10238",
                "bpplication_1506638472019_10238",
            ),
            (
                "application_1506638472019_10238",
                "application_1506638472019_1023",
            ),
            ("job-12345678", "job-12345679"),
            ("job-1x345678", "job-12345678"),
        ] {
            assert!(!same_key(a, b) && !same_key(b, a), "{a} {b}");
        }
    }

    #[test]
    fn removed_jobs_leave_changed_ones_keep_their_place_and_new_ones_follow() {
        let mut held = held_with_jobs(&["a", "b", "c", "d"]);
        let mut changed_c = job("c");
        changed_c.priority = 7;
        let delta = SnapshotDelta {
            jobs: vec![changed_c, job("e")],
            removed_jobs: vec!["b".into(), "d".into()],
            ..change()
        };
        apply(&mut held, delta).unwrap();
        assert_eq!(ids(&held), ["a", "c", "e"]);
        assert_eq!(held.as_ref().unwrap().jobs[1].priority, 7);
        assert_eq!(held.as_ref().unwrap().time, 1.0);
    }

    #[test]
    fn node_sets_are_kept_until_the_host_sends_new_ones() {
        let set = |id, nodes: &[u32]| crate::NodeSet {
            id,
            nodes: nodes.to_vec(),
        };
        let held_sets = |held: &Option<Snapshot>| -> Vec<(u32, Vec<u32>)> {
            let sets = &held.as_ref().unwrap().node_sets;
            sets.iter().map(|s| (s.id, s.nodes.clone())).collect()
        };
        let mut held = None;
        let reset = SnapshotDelta {
            reset: true,
            nodes: vec![node("n1", 1000), node("n2", 1000)],
            node_sets: Some(vec![set(0, &[1])]),
            ..change()
        };
        apply(&mut held, reset).unwrap();
        apply(&mut held, change()).unwrap();
        assert_eq!(held_sets(&held), [(0, vec![1])]);
        let replaced = SnapshotDelta {
            node_sets: Some(vec![set(3, &[0, 1])]),
            ..change()
        };
        apply(&mut held, replaced).unwrap();
        assert_eq!(held_sets(&held), [(3, vec![0, 1])]);
    }

    #[test]
    fn a_loss_update_drops_the_oldest_samples_and_appends_the_new_ones() {
        let mut held = held_with_jobs(&["a", "b"]);
        held.as_mut().unwrap().jobs[0].loss = series(&[1, 2, 3]);
        held.as_mut().unwrap().jobs[1].loss = series(&[7]);
        let delta = SnapshotDelta {
            loss_updates: updates(&[(0, 2, 1), (1, 0, 2)], series(&[4, 8, 9])),
            ..change()
        };
        apply(&mut held, delta).unwrap();
        let jobs = &held.as_ref().unwrap().jobs;
        assert_eq!(jobs[0].loss.steps, [3, 4]);
        assert_eq!(jobs[0].loss.times, [3.0, 4.0]);
        assert_eq!(jobs[1].loss.steps, [7, 8, 9]);
        assert_eq!(jobs[1].loss.values, [1.0; 3]);
    }

    #[test]
    fn loss_updates_that_do_not_add_up_are_refused() {
        let refused = |loss_updates| {
            let mut held = held_with_jobs(&["a", "b"]);
            held.as_mut().unwrap().jobs[0].loss = series(&[1, 2]);
            apply(
                &mut held,
                SnapshotDelta {
                    loss_updates,
                    ..change()
                },
            )
            .unwrap_err()
        };
        let cases = [
            (
                updates(&[(2, 0, 1)], series(&[3])),
                "job #2, but 2 jobs are held",
            ),
            (
                updates(&[(0, 3, 0)], no_loss()),
                "drops 3 samples of job `a`, which has 2",
            ),
            (
                updates(&[(0, 0, 2)], series(&[3])),
                "appends 2 samples to job `a`, more than were sent",
            ),
            (
                updates(&[(0, 0, u32::MAX)], series(&[3])),
                "more than were sent",
            ),
            (
                updates(&[(0, 0, 1)], series(&[3, 4])),
                "more appended loss samples were sent",
            ),
            (
                updates(&[(1, 0, 0), (0, 0, 0)], no_loss()),
                "job #0 follows one for job #1",
            ),
            (
                updates(&[(0, 0, 0), (0, 0, 0)], no_loss()),
                "positions must increase",
            ),
        ];
        for (loss_updates, expected) in cases {
            let message = refused(loss_updates);
            assert!(message.contains(expected), "{expected}: {message}");
        }
        let mut ragged = updates(&[(0, 0, 1)], series(&[3]));
        ragged.samples.steps.clear();
        assert!(refused(ragged).contains("1 times, 0 steps and 1 values"));
        let mut short = updates(&[(0, 0, 0)], no_loss());
        short.dropped.clear();
        assert!(refused(short).contains("name 1 jobs but give 0 drop counts"));
    }

    #[test]
    fn the_held_version_moves_with_every_change_but_the_clock_and_triggers() {
        HELD.with(|h| *h.borrow_mut() = None);
        assert_eq!(held_version(), None, "only while deciding");
        let reset = SnapshotDelta {
            reset: true,
            jobs: vec![job("a")],
            ..change()
        };
        let first = with_applied(reset, |_| held_version()).unwrap().unwrap();
        let tick = SnapshotDelta {
            triggers: vec![crate::Trigger::Tick],
            ..change()
        };
        assert_eq!(with_applied(tick, |_| held_version()).unwrap(), Some(first));
        let arrival = SnapshotDelta {
            jobs: vec![job("b")],
            ..change()
        };
        let second = with_applied(arrival, |_| held_version()).unwrap().unwrap();
        assert_ne!(second, first);
        let samples = SnapshotDelta {
            loss_updates: updates(&[(0, 0, 1)], series(&[1])),
            ..change()
        };
        let third = with_applied(samples, |_| held_version()).unwrap().unwrap();
        assert_ne!(third, second);
        assert_eq!(held_version(), None);
    }

    #[test]
    fn a_change_that_does_not_fit_what_is_held_is_refused_and_forgets_everything() {
        let refused = with_applied(change(), |_| ()).unwrap_err();
        assert!(refused.contains("holds no snapshot"), "{refused}");

        HELD.with(|h| *h.borrow_mut() = held_with_jobs(&["a"]));
        let unknown = SnapshotDelta {
            removed_jobs: vec!["zz".into()],
            ..change()
        };
        let refused = with_applied(unknown, |_| ()).unwrap_err();
        assert!(
            refused.contains("job `zz` to remove is not held"),
            "{refused}"
        );
        assert!(HELD.with(|h| h.borrow().is_none()));

        HELD.with(|h| *h.borrow_mut() = held_with_jobs(&["a"]));
        let too_many = SnapshotDelta {
            loss_updates: updates(&[(0, 5, 0)], no_loss()),
            ..change()
        };
        let refused = with_applied(too_many, |_| ()).unwrap_err();
        assert!(refused.contains("drops 5 samples of job `a`"), "{refused}");
    }
}
