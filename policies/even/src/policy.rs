//! The even baseline as a plain function of (settings, snapshot, state); no WIT glue.

use serde::{Deserialize, Serialize};
use switchyard_policy_sdk::{
    Decision, Description, JobLabel, Setting, Snapshot,
    cluster::Ledger,
    settings::{ParamSpec, Settings, parameters},
    spread::EvenSpread,
    state::{self, Entries},
};

/// The baseline takes no parameters.
pub const SPEC: &[ParamSpec] = &[];

/// What survives between calls: the arrival counter.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    spread: EvenSpread,
}

/// Name, version, summary.
pub fn describe() -> Description {
    Description {
        name: "even".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        summary: "SpeCon's DS baseline: job k on worker k mod |W|, then nothing ever again".into(),
        parameters: parameters(SPEC),
        reads_loss: false, // jobs go round the workers whatever their progress
    }
}

/// Refuses any setting (there are none to set).
pub fn configure(settings: &[Setting]) -> Result<Vec<Setting>, String> {
    Ok(Settings::resolve(SPEC, settings)?.to_settings())
}

/// Places the waiting jobs evenly; never anything else.
pub fn decide(settings: &[Setting], snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    Settings::resolve(SPEC, settings)?;
    let (mut st, mut entries): (State, _) = state::decode_with_entries(blob, b",")?;
    let mut ledger = Ledger::new(snapshot);
    // A job's arrival number never changes, so its label goes out once, when the job
    // is numbered (the host keeps it); not again every round the job is alive.
    let (actions, numbered) = st.spread.place_numbering(snapshot, &mut ledger);
    entries.follow(snapshot);
    for &(at, _) in &numbered {
        entries.changed(at);
    }
    let labels = numbered
        .into_iter()
        .map(|(at, k)| JobLabel {
            job: snapshot.jobs[at].id.clone(),
            key: "arrival".into(),
            value: k.to_string(),
        })
        .collect();
    let blob = write(&st, &mut entries);
    state::keep_with_entries(st, entries, &blob);
    Ok(Decision {
        actions,
        labels,
        next_call_after: None,
        state: blob,
    })
}

/// The blob of `st`, the JSON serde writes for it, with the arrival of each job that
/// did not change copied from the previous blob: a numbered job's entry never changes.
fn write(st: &State, entries: &mut Entries) -> Vec<u8> {
    let tail = format!("}},\"next\":{}}}}}", st.spread.next_number());
    entries.write(
        b"{\"spread\":{\"arrivals\":{",
        tail.as_bytes(),
        |at, out| {
            let Some((id, Some(number))) = st.spread.job_at(at) else {
                return false;
            };
            serde_json::to_writer(&mut *out, id).expect("an id serialises");
            out.push(b':');
            serde_json::to_writer(&mut *out, &number).expect("a number serialises");
            true
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::{Operation, testing::*};

    fn placements(d: &Decision) -> Vec<(String, Vec<(String, String)>)> {
        d.actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Place(p) => Some((
                    p.job.clone(),
                    p.assignments
                        .iter()
                        .map(|x| (x.task.clone(), x.node.clone()))
                        .collect(),
                )),
                _ => None,
            })
            .collect()
    }

    fn four_workers() -> Vec<switchyard_policy_sdk::Node> {
        (1..=4).map(|i| node(&format!("w{i}"), 4000)).collect()
    }

    #[test]
    fn the_kth_arriving_job_goes_to_worker_k_mod_w() {
        let jobs: Vec<_> = (0..6).map(|i| job(&format!("j{i}"))).collect();
        let d = decide(&[], &snapshot(0.0, four_workers(), jobs), &[]).unwrap();
        let nodes: Vec<String> = placements(&d)
            .into_iter()
            .map(|(_, a)| a[0].1.clone())
            .collect();
        assert_eq!(nodes, ["w1", "w2", "w3", "w4", "w1", "w2"]);
    }

    #[test]
    fn the_arrival_count_survives_between_calls_and_departures() {
        let d = decide(
            &[],
            &snapshot(0.0, four_workers(), vec![job("a"), job("b")]),
            &[],
        )
        .unwrap();
        // `a` finished; `b` runs on w2; `c` is the third arrival and goes to w3.
        let snap = snapshot(
            10.0,
            four_workers(),
            vec![job("b").running_on("w2"), job("c")],
        );
        let d = decide(&[], &snap, &d.state).unwrap();
        assert_eq!(
            placements(&d),
            [(
                "c".to_string(),
                vec![("main".to_string(), "w3".to_string())]
            )]
        );
    }

    #[test]
    fn a_full_worker_is_skipped_for_the_next_one_with_room() {
        let nodes = vec![
            node("w1", 4000),
            node("w2", 4000).requested(res(4000, 0)),
            node("w3", 4000),
        ];
        let d = decide(&[], &snapshot(0.0, nodes, vec![job("a"), job("b")]), &[]).unwrap();
        let p = placements(&d);
        assert_eq!(p[1].1[0].1, "w3");
        assert!(
            d.actions[1].reason.contains("no room"),
            "{}",
            d.actions[1].reason
        );
    }

    #[test]
    fn all_tasks_of_a_distributed_job_go_onto_its_worker() {
        let big = job("d").distributed(1, 2, 1, 2);
        let d = decide(
            &[],
            &snapshot(0.0, four_workers(), vec![job("a"), big]),
            &[],
        )
        .unwrap();
        let p = placements(&d);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].1.len(), 3);
        assert!(p[1].1.iter().all(|(_, n)| n == "w2"), "{p:?}");
    }

    #[test]
    fn a_job_that_fits_nowhere_waits_and_nothing_else_ever_happens() {
        let d = decide(
            &[],
            &snapshot(0.0, four_workers(), vec![job("huge").requests(9000, 0)]),
            &[],
        )
        .unwrap();
        assert!(d.actions.is_empty());
        assert_eq!(d.next_call_after, None);
        let running = job("r").running_on("w1").loss(&[(0.0, 1.0), (30.0, 1.0)]);
        let d = decide(
            &[],
            &snapshot(60.0, four_workers(), vec![running]),
            &d.state,
        )
        .unwrap();
        assert!(d.actions.is_empty());
    }

    /// `s` after the host applied the placements of `d`.
    fn applied(s: &Snapshot, d: &Decision) -> Snapshot {
        use switchyard_policy_sdk::{JobPhase, TaskPhase, cluster::ResourcesExt};
        let mut s = s.clone();
        for action in &d.actions {
            let Operation::Place(p) = &action.op else {
                continue;
            };
            let job = s.jobs.iter_mut().find(|j| j.id == p.job).unwrap();
            job.phase = JobPhase::Running;
            for a in &p.assignments {
                let task = job.tasks.iter_mut().find(|t| t.name == a.task).unwrap();
                task.node = Some(a.node.clone());
                task.phase = TaskPhase::Running;
                let node = s.nodes.iter_mut().find(|n| n.name == a.node).unwrap();
                node.requested = node.requested.plus(&task.requests);
            }
        }
        s
    }

    /// A kept instance, given only what changed each round, against a fresh instance
    /// given the same snapshot and blob: the same decisions, and a blob that is the
    /// JSON of the state it holds.
    #[test]
    fn a_kept_instance_decides_and_writes_as_a_fresh_instance_would() {
        use switchyard_policy_sdk::Resources;
        use switchyard_policy_sdk::cluster::ResourcesExt;
        // A job asking nothing, whose placement the host then refuses: it stays as it
        // was, and a walk must try it again though no node has more room.
        let mut weightless = job("weightless");
        weightless.tasks[0].requests = Resources::zero();
        let refused = |s: &mut Snapshot| {
            let job = s.jobs.iter_mut().find(|j| j.id == "weightless").unwrap();
            *job = self::job("weightless");
            job.tasks[0].requests = Resources::zero();
        };
        let changes: [&dyn Fn(&mut Snapshot); 8] = [
            &|s| s.jobs.push(weightless.clone()),
            &refused,
            &|s| s.jobs.push(job("late").requests(3000, 0)),
            &|s| s.jobs.push(job("small").requests(500, 0)),
            &|s| finish(s, "j0"),
            &|s| s.jobs.push(job("tiny").requests(200, 0)),
            &|s| s.time += 30.0,
            &|s| {
                finish(s, "j1");
                finish(s, "j2");
            },
        ];
        let round = snapshot(
            0.0,
            four_workers(),
            (0..6)
                .map(|i| job(&format!("j{i}")).requests(3000, 0))
                .collect(),
        );
        kept_against_fresh(
            round,
            Vec::new(),
            &changes,
            |s, blob| decide(&[], s, blob).unwrap(),
            |s, blob, kept| {
                let mine = state::decode_with_entries::<State>(&kept.state, b",").ok();
                let fresh = decide(&[], s, blob).unwrap();
                // Put the kept instance's memory back for its next call.
                if let Some((st, entries)) = mine {
                    state::keep_with_entries(st, entries, &kept.state);
                }
                fresh
            },
            applied,
            |_, kept| {
                let read: State = state::decode(&kept.state).unwrap();
                assert_eq!(state::encode(&read), kept.state, "serde's own JSON");
            },
        );
    }

    #[test]
    fn any_setting_is_refused() {
        let err = configure(&[setting("alpha", "1")]).unwrap_err();
        assert!(err.contains("alpha"), "{err}");
    }
}
