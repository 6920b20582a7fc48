//! Taking the cluster as deltas: the snapshot an `incremental-policy` instance holds.
//!
//! The host may keep a policy's instance between calls and send only what changed
//! (`snapshot-delta` in the WIT). [`crate::policy_binding!`] exports that world and
//! applies each change here before calling the policy's `decide` on the whole snapshot,
//! so a policy is written against [`Snapshot`] alone and cannot tell the two apart.

use std::cell::{Cell, RefCell};

use crate::{Snapshot, SnapshotDelta};

/// Bindings of the `switchyard:policy/incremental-policy` world; its types and the
/// `host` import are those of [`crate::bindings`].
#[allow(missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "switchyard:policy/incremental-policy@0.2.0",
        with: {
            "switchyard:policy/types@0.2.0": crate::bindings::switchyard::policy::types,
            "switchyard:policy/host@0.2.0": crate::bindings::switchyard::policy::host,
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
        && change.loss_updates.is_empty()
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
        appended_loss,
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
    let mut appended = appended_loss.into_iter();
    for update in loss_updates {
        let Some(job) = snapshot.jobs.get_mut(update.job as usize) else {
            return Err(format!(
                "loss update for job #{}, but {} jobs are held",
                update.job,
                snapshot.jobs.len()
            ));
        };
        let dropped = update.dropped as usize;
        if dropped > job.loss.len() {
            return Err(format!(
                "loss update drops {dropped} samples of job `{}`, which has {}",
                job.id,
                job.loss.len()
            ));
        }
        job.loss.drain(..dropped);
        let before = job.loss.len();
        job.loss
            .extend(appended.by_ref().take(update.appended as usize));
        if job.loss.len() - before != update.appended as usize {
            return Err(format!(
                "loss update appends {} samples to job `{}`, more than were sent",
                update.appended, job.id
            ));
        }
    }
    if appended.next().is_some() {
        return Err("more appended loss samples were sent than the loss updates use".into());
    }
    Ok(())
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
            let leaves = gone.peek().is_some_and(|k| k.as_str() == key(item));
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
        while cursor < held.len() && key(&held[cursor]) != key(&item) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LossUpdate;
    use crate::testing::{job, node};

    fn change() -> SnapshotDelta {
        SnapshotDelta {
            reset: false,
            time: 1.0,
            triggers: vec![],
            nodes: vec![],
            removed_nodes: vec![],
            jobs: vec![],
            removed_jobs: vec![],
            loss_updates: vec![],
            appended_loss: vec![],
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
        let mut held = held_with_jobs(&["a"]);
        let sample = |step| crate::LossSample {
            time: step as f64,
            step,
            value: 1.0,
        };
        held.as_mut().unwrap().jobs[0].loss = vec![sample(1), sample(2), sample(3)];
        let delta = SnapshotDelta {
            loss_updates: vec![LossUpdate {
                job: 0,
                dropped: 2,
                appended: 1,
            }],
            appended_loss: vec![sample(4)],
            ..change()
        };
        apply(&mut held, delta).unwrap();
        let steps: Vec<u64> = held.unwrap().jobs[0].loss.iter().map(|s| s.step).collect();
        assert_eq!(steps, [3, 4]);
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
            loss_updates: vec![LossUpdate {
                job: 0,
                dropped: 0,
                appended: 1,
            }],
            appended_loss: vec![crate::LossSample {
                time: 1.0,
                step: 1,
                value: 1.0,
            }],
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
            loss_updates: vec![LossUpdate {
                job: 0,
                dropped: 5,
                appended: 0,
            }],
            ..change()
        };
        let refused = with_applied(too_many, |_| ()).unwrap_err();
        assert!(refused.contains("drops 5 samples of job `a`"), "{refused}");
    }
}
