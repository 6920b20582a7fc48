//! Running a policy the way its author tests it: on a workload in the simulator (every
//! round recorded) or on one fixture snapshot (one decision), optionally with a second
//! policy shown the very same snapshots, and optionally saving every round's snapshot as
//! a fixture. It judges nothing; [`crate::verdict`] and [`crate::trace`] do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use switchyard_control::{
    ActionOutcome, Advance, ArmRecord, Cluster, ControlLoop, DecisionRecord, Experiment,
    ExperimentMode, PolicySlot, StateError, StateStore,
};
use switchyard_core::{
    Action, DisruptionBudget, JobLabel, Settings, Snapshot, Trigger, check_decision,
};
use switchyard_runtime::Runtime;
use switchyard_sim::{InputLimits, OfflineError, Simulator, Workload, WorkloadError, load_slot};

use crate::fixture::{Fixture, FixtureError};
use crate::trace::operation_text;

/// Why a test run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The input file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The input is a workload with an error.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The input is a fixture with an error, or a fixture could not be saved.
    #[error(transparent)]
    Fixture(#[from] FixtureError),
    /// A policy could not be loaded or configured.
    #[error(transparent)]
    Policy(#[from] OfflineError),
    /// `--save-snapshots` was given for a fixture, which is already a snapshot.
    #[error("saving snapshots needs a workload; {path} is already a fixture snapshot")]
    SnapshotsOfFixture {
        /// The fixture.
        path: PathBuf,
    },
}

/// What to run.
pub struct TestSpec<'a> {
    /// The policy under test: a built-in name or a `.wasm` file.
    pub policy: &'a str,
    /// Its settings.
    pub settings: &'a Settings,
    /// A policy shown the same snapshots, whose decisions are compared, never applied.
    pub against: Option<&'a str>,
    /// The workload or fixture file.
    pub input: &'a Path,
    /// Seed, overriding the workload's.
    pub seed: Option<u64>,
    /// Where to write every round's snapshot as a fixture (`round-N.yaml`).
    pub save_snapshots: Option<&'a Path>,
    /// How often the policy may disrupt running jobs (a workload's run only).
    pub disruption: DisruptionBudget,
    /// The bounds the input is read within (its size: `yaml_bytes`).
    pub limits: InputLimits,
}

/// A finished test run.
#[derive(Debug)]
pub struct TestRun {
    /// Lines describing the run, for the head of a trace.
    pub header: Vec<String>,
    /// Every round of the policy under test.
    pub records: Vec<DecisionRecord>,
    /// Finish time of each job; `None` for a fixture, where nothing runs.
    pub finished: Option<BTreeMap<String, Option<f64>>>,
    /// The comparison with the `against` policy, when one was given.
    pub comparison: Option<Comparison>,
}

/// How two policies decided on the same snapshots.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The policy compared against.
    pub against: String,
    /// Rounds compared (a round in which either failed is not).
    pub compared: usize,
    /// Rounds in which both asked for the same operations.
    pub agreed: usize,
    /// The rounds in which they did not.
    pub differing: Vec<RoundDifference>,
}

/// One round in which two policies asked for different operations.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundDifference {
    /// Round number.
    pub round: u64,
    /// Cluster time.
    pub time: f64,
    /// Operations only the policy under test asked for.
    pub only_tested: Vec<String>,
    /// Operations only the other policy asked for.
    pub only_other: Vec<String>,
}

/// Runs `spec` with `fallback` deciding rounds a workload's policy fails.
pub fn run_policy_test(
    runtime: &Runtime,
    spec: &TestSpec,
    fallback: &PolicySlot,
) -> Result<TestRun, HarnessError> {
    let read = |source| HarnessError::Read {
        path: spec.input.to_path_buf(),
        source,
    };
    let bytes =
        switchyard_control::read_regular_file(spec.input, spec.limits.yaml_bytes).map_err(read)?;
    let text = String::from_utf8(bytes)
        .map_err(|e| read(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    if Fixture::looks_like(&text) {
        if spec.save_snapshots.is_some() {
            return Err(HarnessError::SnapshotsOfFixture {
                path: spec.input.to_path_buf(),
            });
        }
        let fixture = Fixture::parse(&text, spec.input)?;
        run_fixture(runtime, spec, &fixture)
    } else {
        let workload = Workload::parse_with(&text, spec.input, spec.limits)?;
        run_workload(runtime, spec, &workload, fallback)
    }
}

fn run_workload(
    runtime: &Runtime,
    spec: &TestSpec,
    workload: &Workload,
    fallback: &PolicySlot,
) -> Result<TestRun, HarnessError> {
    let seed = spec.seed.unwrap_or(workload.seed());
    let scenario = workload.scenario(seed)?;
    let slot = load_slot(runtime, spec.policy, spec.settings)?;
    let tested = slot.name().to_string();
    let component = component_line(&slot);
    let states = RecordedStates::default();
    let mut cluster = Recorder {
        sim: Simulator::new(scenario),
        states: states.clone(),
        policy: tested.clone(),
        snapshots: spec.save_snapshots.map(|_| Vec::new()),
    };
    let mut control = ControlLoop::new(slot, fallback.clone(), seed)
        .with_state_store(Box::new(states))
        .with_disruption_budget(spec.disruption);
    let mut against_name = None;
    if let Some(against) = spec.against {
        let b = load_slot(runtime, against, &Settings::new())?;
        against_name = Some(b.name().to_string());
        control.start_experiment(Experiment::new(b, ExperimentMode::Shadow));
    }
    control.run(&mut cluster, |_, _| {});
    if let (Some(dir), Some(snapshots)) = (spec.save_snapshots, &cluster.snapshots) {
        save_snapshots(dir, snapshots)?;
    }
    let finished = cluster
        .sim
        .outcomes()
        .into_iter()
        .map(|o| (o.id, o.finish_time))
        .collect();
    let records = control.records().to_vec();
    let comparison = against_name.map(|against| {
        let pairs = records.iter().filter_map(|r| {
            let shadow = r.shadow.as_ref()?;
            (r.arm_a.failure.is_none() && shadow.failure.is_none()).then_some((
                r.round,
                r.time,
                r.arm_a
                    .accepted
                    .iter()
                    .chain(r.arm_a.rejected.iter().map(|x| &x.action))
                    .cloned()
                    .collect::<Vec<_>>(),
                shadow.actions.clone(),
            ))
        });
        compare(against, pairs)
    });
    Ok(TestRun {
        header: vec![
            format!("decision trace of `{}` ({tested})", spec.policy),
            component,
            format!("on {} with seed {seed}", spec.input.display()),
        ],
        records,
        finished: Some(finished),
        comparison,
    })
}

fn run_fixture(
    runtime: &Runtime,
    spec: &TestSpec,
    fixture: &Fixture,
) -> Result<TestRun, HarnessError> {
    let seed = spec.seed.unwrap_or(0);
    let slot = load_slot(runtime, spec.policy, spec.settings)?;
    let decide = |slot: &PolicySlot| {
        let state = fixture.state_of(slot.name());
        slot.module
            .decide(&slot.settings, &fixture.snapshot, &state, seed)
            .map_err(|e| e.to_string())
    };
    let record = |slot: &PolicySlot, outcome: &Result<_, String>| {
        let decision = outcome.as_ref().cloned().unwrap_or_default();
        let checked = check_decision(&fixture.snapshot, &decision);
        let arm = ArmRecord::new(
            slot.name().to_string(),
            outcome.as_ref().err().cloned(),
            checked,
        );
        DecisionRecord::new(0, &fixture.snapshot, arm, decision.next_call_after)
    };
    let outcome = decide(&slot);
    let tested = record(&slot, &outcome);
    let comparison = match spec.against {
        None => None,
        Some(against) => {
            let b = load_slot(runtime, against, &Settings::new())?;
            let other = decide(&b);
            let pairs = match (&outcome, &other) {
                (Ok(a), Ok(o)) => vec![(
                    0,
                    fixture.snapshot.time,
                    a.actions.clone(),
                    o.actions.clone(),
                )],
                _ => vec![],
            };
            Some(compare(b.name().to_string(), pairs.into_iter()))
        }
    };
    Ok(TestRun {
        header: vec![
            format!("decision of `{}` ({})", spec.policy, slot.name()),
            component_line(&slot),
            format!("on the fixture {}", spec.input.display()),
        ],
        records: vec![tested],
        finished: None,
        comparison,
    })
}

/// The header line naming the component that decided: its version and the SHA-256 of
/// its bytes, so a trace says which build of the policy made it.
fn component_line(slot: &PolicySlot) -> String {
    format!(
        "{}{} {}",
        crate::trace::COMPONENT_LINE.trim_start_matches("# "),
        slot.module.description().version,
        slot.module.digest()
    )
}

/// Compares (round, time, tested's actions, other's actions) operation by operation,
/// reasons aside.
fn compare(
    against: String,
    rounds: impl Iterator<Item = (u64, f64, Vec<Action>, Vec<Action>)>,
) -> Comparison {
    let mut comparison = Comparison {
        against,
        compared: 0,
        agreed: 0,
        differing: Vec::new(),
    };
    for (round, time, tested, other) in rounds {
        let ops = |actions: &[Action]| {
            let mut ops: Vec<String> = actions.iter().map(|a| operation_text(&a.op)).collect();
            ops.sort();
            ops
        };
        let (tested, other) = (ops(&tested), ops(&other));
        comparison.compared += 1;
        if tested == other {
            comparison.agreed += 1;
            continue;
        }
        comparison.differing.push(RoundDifference {
            round,
            time,
            only_tested: tested
                .iter()
                .filter(|o| !other.contains(o))
                .cloned()
                .collect(),
            only_other: other
                .iter()
                .filter(|o| !tested.contains(o))
                .cloned()
                .collect(),
        });
    }
    comparison
}

fn save_snapshots(dir: &Path, snapshots: &[Fixture]) -> Result<(), FixtureError> {
    std::fs::create_dir_all(dir).map_err(|source| FixtureError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    for (round, fixture) in snapshots.iter().enumerate() {
        fixture.save(&dir.join(format!("round-{round}.yaml")))?;
    }
    Ok(())
}

/// The latest state blob of each policy, as the control loop saves them: what the
/// policy under test starts the next round from.
#[derive(Clone, Debug, Default)]
struct RecordedStates(Arc<Mutex<BTreeMap<String, Vec<u8>>>>);

impl RecordedStates {
    fn latest(&self, policy: &str) -> Vec<u8> {
        self.0
            .lock()
            .expect("state recorder lock")
            .get(policy)
            .cloned()
            .unwrap_or_default()
    }
}

impl StateStore for RecordedStates {
    fn load(&self, _: &str) -> Result<Option<Vec<u8>>, StateError> {
        Ok(None)
    }

    fn save(&self, policy: &str, blob: &[u8]) -> Result<(), StateError> {
        self.0
            .lock()
            .expect("state recorder lock")
            .insert(policy.to_string(), blob.to_vec());
        Ok(())
    }
}

/// The simulator, keeping each snapshot the policy under test is handed (with the state
/// it starts from) when snapshots are to be saved.
struct Recorder {
    sim: Simulator,
    states: RecordedStates,
    policy: String,
    snapshots: Option<Vec<Fixture>>,
}

impl Cluster for Recorder {
    fn now(&self) -> f64 {
        self.sim.now()
    }

    fn advance(&mut self, until: Option<f64>) -> Advance {
        self.sim.advance(until)
    }

    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        let snapshot = self.sim.snapshot(triggers);
        if let Some(saved) = &mut self.snapshots {
            let blob = self.states.latest(&self.policy);
            // A blob that is not text cannot go into a fixture; the snapshot still can.
            let fixture =
                Fixture::new(snapshot.clone(), &self.policy, &blob).unwrap_or_else(|_| Fixture {
                    snapshot: snapshot.clone(),
                    states: BTreeMap::new(),
                });
            saved.push(fixture);
        }
        snapshot
    }

    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) -> Vec<ActionOutcome> {
        self.sim.apply(accepted, labels)
    }

    fn finished_jobs(&self) -> usize {
        self.sim.finished_jobs()
    }
}
