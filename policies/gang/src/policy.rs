//! The gang policy as a plain function of (settings, snapshot): picks the mode, labels
//! the jobs. Stateless: both modes decide from the snapshot alone.

use switchyard_policy_sdk::{
    Decision, Description, JobLabel, Operation, Setting, Snapshot,
    cluster::pending_tasks,
    settings::{ParamSpec, Settings, parameters},
};

use crate::strict::{self, Outcome};
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
    }
}

/// Checks the settings and fills defaults.
pub fn configure(given: &[Setting]) -> Result<Vec<Setting>, String> {
    Params::parse(given)?;
    Ok(Settings::resolve(SPEC, given)?.to_settings())
}

/// One round. The state blob is passed through untouched (nothing to remember).
pub fn decide(given: &[Setting], snapshot: &Snapshot, blob: &[u8]) -> Result<Decision, String> {
    let params = Params::parse(given)?;
    let (actions, labels) = match params.mode {
        Mode::Strict => {
            let (actions, outcomes) = strict::decide(snapshot, params.starve_after);
            let labels = outcomes
                .into_iter()
                .map(|(job, o)| {
                    label(
                        &job,
                        match o {
                            Outcome::Placed => "placed",
                            Outcome::Waiting => "waiting",
                            Outcome::Blocking => "head-of-line",
                            Outcome::NeverFits => "never-fits",
                            Outcome::Incomplete => "incomplete",
                        },
                    )
                })
                .collect();
            (actions, labels)
        }
        Mode::Thesis => {
            let actions = thesis::decide(snapshot);
            let labels = snapshot
                .jobs
                .iter()
                .filter(|j| !pending_tasks(j).is_empty())
                .map(|j| {
                    let any = actions
                        .iter()
                        .any(|a| matches!(&a.op, Operation::Place(p) if p.job == j.id));
                    let value = if !thesis::all_roles_present(j) {
                        "roles-missing"
                    } else if any {
                        "placed"
                    } else {
                        "waiting"
                    };
                    label(&j.id, value)
                })
                .collect();
            (actions, labels)
        }
    };
    Ok(Decision {
        actions,
        labels,
        next_call_after: None,
        state: blob.to_vec(),
    })
}

fn label(job: &str, value: &str) -> JobLabel {
    JobLabel {
        job: job.into(),
        key: "gang".into(),
        value: value.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policy_sdk::testing::*;

    fn set(name: &str, value: &str) -> Setting {
        Setting {
            name: name.into(),
            value: value.into(),
        }
    }

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
        let d = decide(&[set("mode", "thesis")], &two_jobs_three_slots(), &[]).unwrap();
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
            configure(&[set("mode", "loose")])
                .unwrap_err()
                .contains("mode")
        );
    }
}
