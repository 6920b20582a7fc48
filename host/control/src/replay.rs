//! Decision replay: a recording's rounds decided again by other policies, offline, as
//! a shadow would decide them, and compared with what was recorded.
//!
//! Each policy sees each round's snapshot as the recorded policy saw it (rebuilt from
//! the recording, within the same queue window), with the round's recorded seed. It
//! keeps its own state blob and kept instance from round to round as the live loop
//! does, so a recording replayed under the policy that made it agrees round for round;
//! where a run restarts or segments are missing, every policy starts afresh, except that
//! the recorded policy resumes from the state the recording kept. Two decisions agree
//! when they ask for the same operations, ignoring order and reasons (as a shadow
//! experiment compares), placements counted task by task (a gang placed in one action
//! agrees with its tasks placed one action each). Rounds the recorded policy did not decide itself (its fallback
//! did) and rounds of a split experiment (arm A saw only its jobs) are counted but not
//! compared. Nothing is applied: a replayed decision does not change the next round's
//! snapshot, which is the recorded one.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::decider::DecidingPolicy;
use crate::recording::{CutShort, RecordedRound, Recording, RecordingError};
use crate::slot::PolicySlot;
use crate::window;
use switchyard_core::{Action, Operation, Snapshot};
use switchyard_runtime::Session;

/// Rounds with differences kept in full per policy; the rest are counted.
pub(crate) const DIFFERENCES_KEPT: usize = 50;

/// A policy to replay, under the name the report gives it.
#[derive(Clone, Debug)]
pub struct ReplayPolicy {
    /// The name in the report (the policy's own, or the alias it was given).
    pub label: String,
    /// The configured policy.
    pub slot: PolicySlot,
}

/// How each replayed policy compares with the recording.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    /// Rounds in the recording.
    pub rounds: u64,
    /// The policies that decided the recorded rounds, with the rounds each decided.
    pub recorded_policies: BTreeMap<String, u64>,
    /// The components the recording names as active (its `policy` records), with the
    /// rounds each was active for.
    pub recorded_components: Vec<RecordedComponent>,
    /// One entry per replayed policy, in the order given.
    pub policies: Vec<Agreement>,
    /// Segments that ended early (a killed recorder); their complete records were read.
    pub cut_short: Vec<CutShortNote>,
}

/// A component the recording names as the active policy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecordedComponent {
    /// Its name, version and digest as recorded.
    #[serde(flatten)]
    pub policy: DecidingPolicy,
    /// Rounds it was the active policy for.
    pub rounds: u64,
}

/// A segment that ended early.
#[derive(Clone, Debug, Serialize)]
pub struct CutShortNote {
    /// The segment file.
    pub segment: String,
    /// Complete records read from it.
    pub records: u64,
    /// Why it ended.
    pub reason: String,
}

/// One replayed policy against the recording.
#[derive(Clone, Debug, Serialize)]
pub struct Agreement {
    /// The policy, as named for the replay.
    pub policy: String,
    /// Its digest.
    pub digest: String,
    /// Components of the same name that the recording names as active with other bytes
    /// than this one's (another version or build): the replay then compares other
    /// code than the code that was recorded, even where it agrees.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_with_other_bytes: Vec<RecordedComponent>,
    /// Rounds compared.
    pub compared: u64,
    /// Compared rounds in which it asked for the same operations as the recording.
    pub agreed: u64,
    /// `agreed / compared`, in percent; none when nothing was compared (every round
    /// was decided by the fallback or a split), so no agreement is claimed over nothing.
    pub agreement_percent: Option<f64>,
    /// Rounds not compared because the recorded policy's fallback decided them.
    pub skipped_fallback: u64,
    /// Rounds not compared because a split experiment was running.
    pub skipped_split: u64,
    /// Rounds in which the replayed policy failed (each also a difference).
    pub failed: u64,
    /// The first rounds that differ, in order (a fixed number per policy; the rest are
    /// only counted).
    pub differences: Vec<RoundDifference>,
}

/// A round in which the replayed policy decided otherwise.
#[derive(Clone, Debug, Serialize)]
pub struct RoundDifference {
    /// The round's number in its run.
    pub round: u64,
    /// Cluster time.
    pub time: f64,
    /// The policy that decided the recorded round.
    pub recorded_policy: String,
    /// The replayed policy's failure, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The jobs whose operations differ, each with both sides' actions and reasons.
    pub jobs: Vec<JobDifference>,
}

/// One job's actions on both sides of a differing round.
#[derive(Clone, Debug, Serialize)]
pub struct JobDifference {
    /// The job.
    pub job: String,
    /// What the recorded policy asked for (accepted, failed or rejected alike).
    pub recorded: Vec<Action>,
    /// What the replayed policy asked for.
    pub replayed: Vec<Action>,
}

/// A failure to replay: the recording cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The recording could not be read.
    #[error(transparent)]
    Recording(#[from] RecordingError),
}

/// One replayed policy's running account.
struct Replayed {
    policy: ReplayPolicy,
    state: Vec<u8>,
    agreement: Agreement,
}

/// Replays every round of `recording` under each of `policies`.
pub fn replay(
    recording: &Recording,
    policies: &[ReplayPolicy],
) -> Result<ReplayReport, ReplayError> {
    let mut replayed: Vec<Replayed> = policies
        .iter()
        .map(|p| Replayed {
            policy: p.clone(),
            state: Vec::new(),
            agreement: Agreement {
                policy: p.label.clone(),
                digest: p.slot.module.digest().to_hex(),
                recorded_with_other_bytes: Vec::new(),
                compared: 0,
                agreed: 0,
                agreement_percent: None,
                skipped_fallback: 0,
                skipped_split: 0,
                failed: 0,
                differences: Vec::new(),
            },
        })
        .collect();
    let mut report = ReplayReport {
        rounds: 0,
        recorded_policies: BTreeMap::new(),
        recorded_components: Vec::new(),
        policies: Vec::new(),
        cut_short: Vec::new(),
    };
    let mut components: BTreeMap<(String, String), RecordedComponent> = BTreeMap::new();
    let mut rounds = recording.rounds();
    for round in rounds.by_ref() {
        let round = round?;
        report.rounds += 1;
        let active = &round.policy.active;
        components
            .entry((active.name.clone(), active.digest.clone()))
            .or_insert_with(|| RecordedComponent {
                policy: DecidingPolicy {
                    name: active.name.clone(),
                    version: active.version.clone(),
                    digest: active.digest.clone(),
                    reference: None,
                },
                rounds: 0,
            })
            .rounds += 1;
        *report
            .recorded_policies
            .entry(round.record.decision.arm_a.policy.clone())
            .or_default() += 1;
        for one in &mut replayed {
            one.round(&round);
        }
    }
    report.cut_short = rounds.cut_short().iter().map(note).collect();
    report.recorded_components = components.into_values().collect();
    report.policies = replayed
        .into_iter()
        .map(|mut r| {
            let a = &mut r.agreement;
            a.recorded_with_other_bytes = report
                .recorded_components
                .iter()
                .filter(|c| c.policy.name == r.policy.slot.name() && c.policy.digest != a.digest)
                .cloned()
                .collect();
            if a.compared > 0 {
                a.agreement_percent = Some(100.0 * a.agreed as f64 / a.compared as f64);
            }
            r.agreement
        })
        .collect();
    Ok(report)
}

fn note(cut: &CutShort) -> CutShortNote {
    CutShortNote {
        segment: cut.path.display().to_string(),
        records: cut.records,
        reason: cut.reason.clone(),
    }
}

impl Replayed {
    fn round(&mut self, round: &RecordedRound) {
        if !round.continues {
            self.start_afresh(round);
        }
        let decision = &round.record.decision;
        let view = match decision.queue_window {
            Some(w) => window::windowed(&round.snapshot, w.shown).map(|(view, _)| view),
            None => None,
        };
        let view: &Snapshot = view.as_ref().unwrap_or(&round.snapshot);
        let slot = &self.policy.slot;
        let result = slot.module.decide_in(
            &slot.session,
            &slot.settings,
            view,
            &self.state,
            round.record.seed,
        );
        let a = &mut self.agreement;
        if decision.arm_b.is_some() {
            a.skipped_split += 1;
            if let Ok(d) = result {
                self.state = d.state;
            }
            return;
        }
        let recorded_by_active = decision.arm_a.failure.is_none();
        if !recorded_by_active {
            a.skipped_fallback += 1;
            if let Ok(d) = result {
                self.state = d.state;
            }
            return;
        }
        a.compared += 1;
        let recorded: Vec<&Action> = decision
            .arm_a
            .accepted
            .iter()
            .chain(decision.arm_a.failed.iter().map(|f| &f.action))
            .chain(decision.arm_a.rejected.iter().map(|r| &r.action))
            .collect();
        let (jobs, failure) = match result {
            Ok(d) => {
                let replayed: Vec<&Action> = d.actions.iter().collect();
                let jobs = differing_jobs(&recorded, &replayed);
                self.state = d.state;
                (jobs, None)
            }
            Err(error) => {
                a.failed += 1;
                let jobs = differing_jobs(&recorded, &[]);
                (jobs, Some(error.to_string()))
            }
        };
        if jobs.is_empty() && failure.is_none() {
            a.agreed += 1;
            return;
        }
        if a.differences.len() < DIFFERENCES_KEPT {
            a.differences.push(RoundDifference {
                round: decision.round,
                time: decision.time,
                recorded_policy: decision.arm_a.policy.clone(),
                failure,
                jobs,
            });
        }
    }

    /// A new run, or rounds missing before this one: the policy starts afresh, or, when
    /// it is the recorded active policy, from the state the recording kept.
    fn start_afresh(&mut self, round: &RecordedRound) {
        self.policy.slot.session = Session::default();
        self.state = Vec::new();
        let active = &round.policy.active;
        if round.policy_written
            && active.name == self.policy.slot.name()
            && active.digest == self.policy.slot.module.digest().to_hex()
            && let Ok(state) = hex::decode(&round.policy.active_state)
        {
            self.state = state;
        }
    }
}

/// What an operation asks for, as comparable keys. A placement counts per task (where
/// each task goes), so a gang placed in one action and the same tasks placed one action
/// each agree; every other operation is its whole content.
fn operation_keys(op: &Operation) -> Vec<String> {
    match op {
        Operation::Place { assignments, .. } => assignments
            .iter()
            .map(|a| format!("place {} {}", a.task, a.node))
            .collect(),
        other => vec![serde_json::to_string(other).unwrap_or_default()],
    }
}

/// The jobs whose requested operations differ between the two sides (ignoring order and
/// reasons), each with both sides' actions.
fn differing_jobs(recorded: &[&Action], replayed: &[&Action]) -> Vec<JobDifference> {
    type Side = (Vec<String>, Vec<Action>);
    let mut by_job: BTreeMap<&str, (Side, Side)> = BTreeMap::new();
    for (side, actions) in [(0, recorded), (1, replayed)] {
        for action in actions {
            let entry = by_job.entry(action.op.job()).or_default();
            let (keys, kept) = if side == 0 {
                (&mut entry.0.0, &mut entry.0.1)
            } else {
                (&mut entry.1.0, &mut entry.1.1)
            };
            keys.extend(operation_keys(&action.op));
            kept.push((*action).clone());
        }
    }
    by_job
        .into_iter()
        .filter_map(|(job, ((mut a, recorded), (mut b, replayed)))| {
            a.sort();
            b.sort();
            (a != b).then(|| JobDifference {
                job: job.to_string(),
                recorded,
                replayed,
            })
        })
        .collect()
}
