//! The gang policy as a plain function of (settings, snapshot): picks the mode, labels
//! the jobs. Both modes decide from the snapshot alone; the state blob only remembers
//! which label each queued job was last shown.

use std::collections::HashSet;

use switchyard_policy_sdk::{
    Action, Decision, Description, JobLabel, Operation, Setting, Snapshot,
    cluster::pending_tasks,
    settings::{ParamSpec, Settings, parameters},
    shown::ShownLabels,
    state,
};

/// The label key gang sets on the jobs it queues.
const LABEL: &str = "gang";

use crate::memory::{Memory, STRICT_VALUES};
use crate::strict::{self, Facts, Outcome};
use crate::thesis;

/// The gang policy's parameters.
pub const SPEC: &[ParamSpec] = &[
    ParamSpec {
        name: "mode",
        default: "strict",
        doc: "strict: all-or-nothing gangs (Volcano/coscheduling); thesis: the gang-like plugins of the thesis, pod by pod",
    },
    ParamSpec {
        name: "starve-after",
        default: "300",
        doc: "strict mode: seconds the oldest waiting gang may be overtaken by later ones that fit before the queue stops behind it",
    },
];

/// Which algorithm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// All or nothing.
    Strict,
    /// The thesis's plugins.
    Thesis,
}

/// Typed, checked settings.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Algorithm.
    pub mode: Mode,
    /// Strict mode's starvation bound.
    pub starve_after: f64,
}

impl Params {
    /// Resolves and checks `given`.
    pub fn parse(given: &[Setting]) -> Result<Self, String> {
        let s = Settings::resolve(SPEC, given)?;
        Ok(Self {
            mode: match s.choice("mode", &["strict", "thesis"])? {
                "thesis" => Mode::Thesis,
                _ => Mode::Strict,
            },
            starve_after: s.f64_in("starve-after", 0.0, 1e9)?,
        })
    }
}

/// Name, version, summary and parameters.
pub fn describe() -> Description {
    Description {
        name: "gang".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        summary: "gang scheduling: strict all-or-nothing gangs, or the thesis's gang-like queue/filter/score plugins".into(),
        parameters: parameters(SPEC),
        reads_loss: false, // gangs are queued, filtered and scored without evaluations
    }
}

/// Checks the settings and fills defaults.
pub fn configure(given: &[Setting]) -> Result<Vec<Setting>, String> {
    Params::parse(given)?;
    Ok(Settings::resolve(SPEC, given)?.to_settings())
}

/// One round. The state blob remembers only the label each waiting job was last shown
/// ([`ShownLabels`]): a job's label, and the `wait` that explains it, go out when its
/// outcome changes, not again every round it keeps waiting (the host keeps labels, and
/// a queue of thousands would otherwise repeat thousands of each per round).
pub fn decide(given: &[Setting], snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    let params = Params::parse(given)?;
    if params.mode == Mode::Strict {
        return decide_strict(&params, snapshot, blob);
    }
    let mut shown: ShownLabels = state::decode_kept(blob)?;
    let (actions, labels) = match params.mode {
        Mode::Strict => unreachable!("decided above"),
        Mode::Thesis => {
            let actions = thesis::decide(snapshot);
            let placed: HashSet<&str> = actions
                .iter()
                .filter_map(|a| match &a.op {
                    Operation::Place(p) => Some(p.job.as_str()),
                    _ => None,
                })
                .collect();
            let labels = shown.changed(snapshot, LABEL, |j| {
                if pending_tasks(j).is_empty() {
                    return None;
                }
                Some(if !thesis::all_roles_present(j) {
                    "roles-missing"
                } else if placed.contains(j.id.as_str()) {
                    "placed"
                } else {
                    "waiting"
                })
            });
            (actions, labels)
        }
    };
    Ok(Decision {
        actions,
        labels,
        next_call_after: None,
        state: state::encode_kept(shown),
    })
}

/// Strict mode's round: the placements, then a label and a `wait` for each queued job
/// whose outcome differs from the label it was last shown. The memory of the labels
/// (and of what a round reads of each job) follows the jobs the host's change names, so
/// a queue of thousands that did not change costs a comparison per job.
fn decide_strict(params: &Params, snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    let mut memory = Memory::read(blob)?;
    memory.follow(snapshot);
    let facts: Vec<Facts> = memory.jobs.values().iter().map(|s| s.facts).collect();
    let strict::Round {
        mut actions,
        outcomes,
    } = strict::round_with(snapshot, params.starve_after, &facts);
    // Each queued job's outcome by snapshot position: no hashing per job.
    let mut outcome_at: Vec<Option<Outcome>> = vec![None; snapshot.jobs.len()];
    for (at, outcome, _) in &outcomes {
        outcome_at[*at] = Some(outcome.clone());
    }
    let mut labels = Vec::new();
    let mut told = vec![false; snapshot.jobs.len()];
    for (at, outcome) in outcome_at.iter().enumerate() {
        let Some(outcome) = outcome else {
            continue;
        };
        let value = match outcome {
            Outcome::Placed => 0,
            Outcome::Waiting => 1,
            Outcome::Blocking => 2,
            Outcome::NeverFits => 3,
            Outcome::Incomplete => 4,
        };
        if memory.jobs.values()[at].shown == Some(value) {
            continue;
        }
        memory.shown(at, value);
        told[at] = true;
        labels.push(JobLabel {
            job: snapshot.jobs[at].id.clone(),
            key: LABEL.into(),
            value: STRICT_VALUES[value as usize].into(),
        });
    }
    // A wait goes out with its job's label, when the outcome changed; in queue order.
    actions.extend(
        outcomes
            .iter()
            .filter(|(at, ..)| told[*at])
            .filter_map(|(at, _, why)| {
                why.map(|why| Action {
                    op: Operation::Wait(snapshot.jobs[*at].id.clone()),
                    reason: why.reason(params.starve_after),
                })
            }),
    );
    Ok(Decision {
        actions,
        labels,
        next_call_after: None,
        state: memory.write_and_keep(snapshot),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::*;

    /// The thesis's deadlock: two jobs, room for 3 of their 4 pods.
    fn two_jobs_three_slots() -> Snapshot {
        snapshot(
            0.0,
            vec![node("a", 3000)],
            vec![
                job("j1").distributed(1, 1, 1, 1),
                job("j2").submitted_at(1.0).distributed(1, 1, 1, 1),
            ],
        )
    }

    #[test]
    fn strict_mode_never_gives_a_job_part_of_its_gang() {
        let d = decide(&[], &two_jobs_three_slots(), &[]).unwrap();
        let places: Vec<(String, usize)> = d
            .actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Place(p) => Some((p.job.clone(), p.assignments.len())),
                _ => None,
            })
            .collect();
        assert_eq!(places, [("j1".to_string(), 2)]);
        assert!(
            d.labels
                .iter()
                .any(|l| l.job == "j2" && l.value == "waiting")
        );
    }

    #[test]
    fn thesis_mode_gives_the_older_job_its_pods_first() {
        let d = decide(&[setting("mode", "thesis")], &two_jobs_three_slots(), &[]).unwrap();
        let jobs: Vec<String> = d
            .actions
            .iter()
            .filter_map(|a| match &a.op {
                Operation::Place(p) => Some(p.job.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(jobs, ["j1", "j1", "j2"]);
    }

    #[test]
    fn an_unknown_mode_is_refused() {
        assert!(
            configure(&[setting("mode", "loose")])
                .unwrap_err()
                .contains("mode")
        );
    }
}
