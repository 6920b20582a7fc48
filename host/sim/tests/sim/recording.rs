//! Recordings: a run recorded through the control loop's observer reads back round for
//! round (every snapshot the policy saw, every decision), survives being cut short at
//! any byte of its last record, stays within its size bound, replays under its own
//! policy in full agreement and under another with the differences named, and runs in
//! the simulator as the load it recorded (counterfactual replay): under its own policy
//! every job finishes when it did, under another as the workload itself would.

use crate::support;

use support::{policy_slot as slot, simulator_of as simulator};

use std::path::Path;
use std::sync::{Arc, Mutex};

use switchyard_control::{
    ControlLoop, DecisionRecord, RecordOptions, Recorder, Recording, ReplayPolicy, RoundObserver,
    RoundStart, replay,
};
use switchyard_core::Snapshot;
use switchyard_runtime::Runtime;
use switchyard_sim::{
    CurveFile, Records, RunResult, Workload, estimate_counterfactual, run_offline,
};

const WORKLOAD: &str = "
seed: 5
cluster:
  nodes:
    - {name: cpu, count: 3, cpus: 8, memory_gib: 32}
templates:
  vae: {work: 600, speed: 1.0, cpus: 1, max_cores: 4, memory_gib: 2, curve: vae}
  gru: {work: 900, speed: 1.0, cpus: 2, max_cores: 4, memory_gib: 4, curve: gru}
jobs:
  - {template: vae, count: 10, every: 40}
  - {template: gru, count: 6, poisson: 0.02}
";

/// What the test saw of each round besides the recording: the snapshot and record, and
/// the segment's size once the round was written.
#[derive(Default)]
struct Seen {
    snapshots: Vec<Snapshot>,
    records: Vec<DecisionRecord>,
    sizes_after: Vec<u64>,
}

/// The recorder, watched: forwards every call and notes what the loop showed.
struct Watched {
    recorder: Recorder,
    dir: std::path::PathBuf,
    seen: Arc<Mutex<Seen>>,
}

impl RoundObserver for Watched {
    fn round_started(&mut self, start: RoundStart<'_>) {
        self.seen
            .lock()
            .unwrap()
            .snapshots
            .push(start.snapshot.clone());
        self.recorder.round_started(start);
    }

    fn round_decided(&mut self, record: &DecisionRecord) {
        self.recorder.round_decided(record);
        let size = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        let mut seen = self.seen.lock().unwrap();
        seen.records.push(record.clone());
        seen.sizes_after.push(size);
    }
}

/// Runs `workload` under `policy`, recording to `dir` within `max_bytes`.
fn record(
    runtime: &Runtime,
    policy: &str,
    workload: &str,
    dir: &Path,
    max_bytes: u64,
) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorder = Recorder::open(RecordOptions {
        dir: dir.to_path_buf(),
        max_bytes,
        cluster: "sim:recorded.yaml".into(),
        seed: 5,
    })
    .unwrap();
    let watched = Watched {
        recorder,
        dir: dir.to_path_buf(),
        seen: seen.clone(),
    };
    let mut control = ControlLoop::new(slot(runtime, policy), slot(runtime, "default"), 5)
        .with_observer(Box::new(watched));
    let mut sim = simulator(workload, 5);
    control.run(&mut sim, |_, _| {});
    drop(control);
    seen
}

#[test]
fn a_recording_gives_back_every_snapshot_the_policy_saw_and_every_decision() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    let seen = record(&runtime, "tiresias", WORKLOAD, dir.path(), 1 << 30);
    let seen = seen.lock().unwrap();
    let recording = Recording::open(dir.path()).unwrap();
    let rounds: Vec<_> = recording.rounds().map(Result::unwrap).collect();
    assert!(seen.records.len() > 20, "the workload makes many rounds");
    assert_eq!(rounds.len(), seen.records.len(), "every round is recorded");
    for (i, round) in rounds.iter().enumerate() {
        assert_eq!(round.snapshot, seen.snapshots[i], "round {i}'s snapshot");
        assert_eq!(
            round.record.decision, seen.records[i],
            "round {i}'s decision"
        );
        assert_eq!(round.policy.active.name, "tiresias");
        assert_eq!(round.continues, i > 0);
    }
    assert!(
        rounds[1..].iter().all(|r| !r.record.changes.reset),
        "after the first round only changes are recorded"
    );
    let arrivals: usize = rounds.iter().map(|r| r.record.changes.jobs.len()).sum();
    assert!(arrivals >= 16, "each of the 16 jobs arrives with its spec");
}

#[test]
fn a_segment_cut_at_any_byte_of_its_last_record_reads_every_record_before_it() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    let seen = record(&runtime, "default", WORKLOAD, dir.path(), 1 << 30);
    let seen = seen.lock().unwrap();
    let segment = dir.path().join("segment-000000.jsonl.zst");
    let bytes = std::fs::read(&segment).unwrap();
    let n = seen.records.len();
    // The last record's bytes were flushed between these two sizes; the finished frame
    // adds its end after them.
    let (before_last, after_last) = (seen.sizes_after[n - 2], seen.sizes_after[n - 1]);
    assert!(before_last < after_last && after_last as usize <= bytes.len());
    let cut_dir = tempfile::tempdir().unwrap();
    let cut = cut_dir.path().join("segment-000000.jsonl.zst");
    for end in before_last..=after_last {
        std::fs::write(&cut, &bytes[..end as usize]).unwrap();
        let recording = Recording::open(cut_dir.path()).unwrap();
        let mut rounds = recording.rounds();
        let read: Vec<_> = rounds.by_ref().map(Result::unwrap).collect();
        let expected = if end == after_last { n } else { n - 1 };
        assert_eq!(read.len(), expected, "cut at byte {end}");
        assert_eq!(read[expected - 1].snapshot, seen.snapshots[expected - 1]);
        if end < after_last {
            assert_eq!(rounds.cut_short().len(), 1, "cut at byte {end} is noted");
        }
    }
}

#[test]
fn a_bounded_recording_deletes_its_oldest_segments_and_each_left_reads_on_its_own() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    let many = WORKLOAD.replace("count: 10, every: 40", "count: 1500, every: 5");
    let max = switchyard_control::RECORDING_MIN_MAX_BYTES;
    let seen = record(&runtime, "default", &many, dir.path(), max);
    let seen = seen.lock().unwrap();
    let segments = Recording::open(dir.path()).unwrap();
    let total: u64 = segments
        .segments()
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(segments.segments().len() >= 2, "the recording rotated");
    assert!(
        segments.segments()[0] != dir.path().join("segment-000000.jsonl.zst"),
        "the oldest segments were deleted"
    );
    assert!(total <= max, "{total} bytes on disk, bound {max}");
    let rounds: Vec<_> = segments.rounds().map(Result::unwrap).collect();
    let first = rounds[0].record.decision.round as usize;
    assert!(
        !rounds[0].continues,
        "rounds before the first kept segment are gone"
    );
    assert!(rounds[0].record.changes.reset);
    assert_eq!(
        first + rounds.len(),
        seen.records.len(),
        "every later round is kept"
    );
    for (i, round) in rounds.iter().enumerate() {
        assert_eq!(
            round.snapshot,
            seen.snapshots[first + i],
            "round {}",
            first + i
        );
        assert_eq!(
            round.continues,
            i > 0,
            "segments of one run follow each other"
        );
    }
}

#[test]
fn replaying_a_recording_under_its_own_policy_agrees_and_under_another_names_the_differences() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    record(&runtime, "tiresias", WORKLOAD, dir.path(), 1 << 30);
    let recording = Recording::open(dir.path()).unwrap();
    let policies = ["tiresias", "even"].map(|name| ReplayPolicy {
        label: name.into(),
        slot: slot(&runtime, name),
    });
    let report = replay(&recording, &policies).unwrap();
    let (own, other) = (&report.policies[0], &report.policies[1]);
    assert_eq!(own.compared, report.rounds);
    assert_eq!(own.agreed, own.compared, "{:#?}", own.differences.first());
    assert_eq!(own.agreement_percent, Some(100.0));
    assert!(other.agreed < other.compared, "even decides otherwise");
    let first = &other.differences[0];
    assert!(!first.jobs.is_empty(), "a differing round names its jobs");
    let job = &first.jobs[0];
    assert!(
        job.recorded
            .iter()
            .chain(&job.replayed)
            .all(|a| !a.reason.is_empty()),
        "both sides' reasons are given: {job:#?}"
    );
}

#[test]
fn a_replay_under_the_recorded_name_with_other_bytes_names_the_recorded_component() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    // One guest, two builds: the same name, other bytes.
    let builds = tempfile::tempdir().unwrap();
    let build = |reads_loss: bool| {
        let path = builds
            .path()
            .join(format!("least-loaded-{reads_loss}.wasm"));
        std::fs::write(
            &path,
            support::guest_reading_loss("least-loaded", reads_loss),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    };
    let (recorded, rebuilt) = (build(true), build(false));
    record(&runtime, &recorded, WORKLOAD, dir.path(), 1 << 30);
    let recording = Recording::open(dir.path()).unwrap();
    let policies = [("same", &recorded), ("rebuilt", &rebuilt)].map(|(label, path)| ReplayPolicy {
        label: label.into(),
        slot: slot(&runtime, path),
    });
    let report = replay(&recording, &policies).unwrap();
    let recorded_digest = policies[0].slot.module.digest().to_hex();
    assert_eq!(
        report.recorded_components.len(),
        1,
        "{:?}",
        report.recorded_components
    );
    let component = &report.recorded_components[0];
    assert_eq!(component.policy.name, policies[0].slot.name());
    assert_eq!(component.policy.digest, recorded_digest);
    assert_eq!(component.rounds, report.rounds);
    let (same, other) = (&report.policies[0], &report.policies[1]);
    assert!(same.recorded_with_other_bytes.is_empty(), "{same:?}");
    assert_eq!(
        other.recorded_with_other_bytes,
        std::slice::from_ref(component)
    );
    assert_ne!(other.digest, recorded_digest);
}

/// A recording of format version 1, made by `switchyard run --cluster
/// sim:tests/data/recording-v1/workload.yaml --record ...` (see its README), reads with
/// this host: a change to the format that would misread it must raise the version.
#[test]
fn a_checked_in_recording_of_the_current_format_version_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/recording-v1");
    let recording = Recording::open(&dir).unwrap();
    let mut rounds = recording.rounds();
    let read: Vec<_> = rounds.by_ref().map(Result::unwrap).collect();
    assert!(rounds.cut_short().is_empty(), "{:?}", rounds.cut_short());
    let first = &read[0];
    assert_eq!(first.header.version, 1);
    assert_eq!(
        first.header.version,
        switchyard_control::RECORDING_FORMAT_VERSION
    );
    assert_eq!(first.header.cluster, "sim:workload.yaml");
    assert_eq!(first.policy.active.name, "default");
    assert!(first.policy.active.digest.starts_with("sha256:"));
    assert_eq!(first.snapshot.nodes.len(), 2);
    let jobs: std::collections::BTreeSet<&str> = read
        .iter()
        .flat_map(|r| r.record.changes.jobs.iter().map(|j| j.id.as_str()))
        .collect();
    assert_eq!(jobs.len(), 4, "every job arrives: {jobs:?}");
    let finished = read
        .iter()
        .flat_map(|r| &r.record.decision.triggers)
        .filter(|t| matches!(t, switchyard_core::Trigger::JobFinished(_)))
        .count();
    assert_eq!(finished, 4, "every job finishes");
    let placed = read
        .iter()
        .flat_map(|r| &r.record.decision.arm_a.accepted)
        .filter(|a| a.op.name() == "place")
        .count();
    assert!(placed >= 4, "each job was placed");
    assert!(read.windows(2).all(|w| w[1].continues));
    assert!(
        read.iter()
            .flat_map(|r| &r.snapshot.jobs)
            .any(|j| !j.loss.is_empty()),
        "loss samples are recorded"
    );
}

/// The round-trip workload: CPU jobs whose cores change as their neighbours come and go
/// (each may use up to four cores, asks for one or two), and distributed GPU jobs with a
/// parameter server and two workers on a measured throughput table.
const ROUND_TRIP: &str = "
seed: 5
cluster:
  nodes:
    - {name: cpu, count: 3, cpus: 8, memory_gib: 32}
    - {name: gpu, cpus: 16, memory_gib: 64, gpus: 4}
templates:
  vae: {work: 600, speed: 1.0, cpus: 1, max_cores: 4, memory_gib: 2, curve: vae}
  gru: {work: 900, speed: 1.0, cpus: 2, max_cores: 4, memory_gib: 4, curve: gru}
  resnet:
    work: 100000
    model: resnet50
    curve: gru
    roles:
      - {name: ps, cpus: 2, memory_gib: 4}
      - {name: worker, count: 2, cpus: 2, memory_gib: 8, gpus: 1}
    scale: {role: worker, min: 1, max: 4}
jobs:
  - {template: vae, count: 10, every: 40}
  - {template: gru, count: 6, poisson: 0.02}
  - {template: resnet, count: 2, every: 300}
";

/// `workload` (YAML) under `policy` in the simulator, as `simulate` runs it, with the
/// workload's seed (5, the seed [`record`] runs with).
fn simulated(runtime: &Runtime, policy: &str, workload: &str) -> RunResult {
    let workload =
        Workload::parse(workload, Path::new("workload.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let seed = workload.seed();
    let scenario = workload.scenario(seed).unwrap();
    run_offline(
        runtime,
        policy,
        &Default::default(),
        &slot(runtime, "default"),
        scenario,
        seed,
        Records::Stream,
        |_, _| {},
    )
    .unwrap()
    .result
}

/// Completion time of each finished job, by id.
fn completions(run: &RunResult) -> std::collections::BTreeMap<String, f64> {
    run.jobs
        .iter()
        .filter_map(|j| Some((j.id.clone(), j.finish_time? - j.submit_time)))
        .collect()
}

#[test]
fn a_recording_run_in_the_simulator_under_its_own_policy_finishes_every_job_when_it_did() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    let original = simulated(&runtime, "default", ROUND_TRIP);
    record(&runtime, "default", ROUND_TRIP, dir.path(), 1 << 30);
    let estimated = estimate_counterfactual(&Recording::open(dir.path()).unwrap()).unwrap();
    assert!(estimated.left_out.is_empty(), "{:?}", estimated.left_out);
    let recorded = completions(&estimated.recorded);
    assert_eq!(
        recorded,
        completions(&original),
        "the recorded run is the run the workload makes"
    );
    // The recorded shares count every job until the round that saw it leave, so they are
    // the run's own, give or take the rounds' lag (the CPU share is read from usage).
    let (was, now) = (&original.summary, &estimated.recorded.summary);
    println!(
        "shares: GPU {:.3} simulated, {:.3} recorded; CPU {:.3} simulated, {:.3} recorded",
        was.gpu_utilisation, now.gpu_utilisation, was.cpu_utilisation, now.cpu_utilisation
    );
    assert!(
        (was.gpu_utilisation - now.gpu_utilisation).abs() <= 0.01,
        "GPU share {} recorded, {} simulated",
        now.gpu_utilisation,
        was.gpu_utilisation
    );
    assert!(
        (was.cpu_utilisation - now.cpu_utilisation).abs() <= 0.05,
        "CPU share {} recorded, {} simulated",
        now.cpu_utilisation,
        was.cpu_utilisation
    );
    let yaml = estimated.to_yaml("the recording").unwrap();
    let replayed = simulated(&runtime, "default", &yaml);
    let replayed_jct = completions(&replayed);
    assert_eq!(
        replayed.jobs.len(),
        18,
        "every recorded job is in the workload"
    );
    assert_eq!(
        replayed_jct.keys().collect::<Vec<_>>(),
        recorded.keys().collect::<Vec<_>>(),
        "every recorded job finishes in the replay"
    );
    let worst = recorded
        .iter()
        .map(|(job, &was)| (replayed_jct[job] - was).abs() / was)
        .fold(0.0, f64::max);
    println!(
        "under its own policy: worst per-job completion change {:.2}%",
        100.0 * worst
    );
    for (job, &was) in &recorded {
        let now = replayed_jct[job];
        assert!(
            (now - was).abs() <= 0.05 * was,
            "{job}: completion {now:.1} s replayed, {was:.1} s recorded"
        );
    }
}

#[test]
fn a_recording_run_under_another_policy_averages_as_the_workload_simulated_under_it() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    let quickstart = std::fs::read_to_string("../../examples/quickstart.yaml").unwrap();
    let quickstart = quickstart.replace("seed: 42", "seed: 5");
    record(&runtime, "default", &quickstart, dir.path(), 1 << 30);
    let estimated = estimate_counterfactual(&Recording::open(dir.path()).unwrap()).unwrap();
    let yaml = estimated.to_yaml("the recording").unwrap();
    let replayed = simulated(&runtime, "default", &yaml);
    let recorded = completions(&estimated.recorded);
    let worst = completions(&replayed)
        .iter()
        .map(|(job, now)| (now - recorded[job]).abs() / recorded[job])
        .fold(0.0, f64::max);
    println!(
        "quickstart under its own policy: worst per-job completion change {:.2}%",
        100.0 * worst
    );
    for policy in ["tiresias", "even"] {
        let direct = simulated(&runtime, policy, &quickstart);
        let replayed = simulated(&runtime, policy, &yaml);
        assert_eq!(
            replayed.summary.finished, direct.summary.finished,
            "{policy}"
        );
        for (figure, was, now) in [
            (
                "average completion",
                direct.summary.avg_completion,
                replayed.summary.avg_completion,
            ),
            (
                "makespan",
                direct.summary.makespan,
                replayed.summary.makespan,
            ),
        ] {
            println!(
                "{policy}: {figure} {now:.1} s from the recording, {was:.1} s simulated directly ({:+.2}%)",
                100.0 * (now - was) / was
            );
            assert!(
                (now - was).abs() <= 0.10 * was,
                "{policy}: {figure} {now:.1} s from the recording, {was:.1} s simulated directly"
            );
        }
    }
}

#[test]
fn the_estimated_workload_says_what_it_fitted_and_refuses_nothing_it_wrote() {
    let runtime = support::generous_runtime();
    let dir = tempfile::tempdir().unwrap();
    record(&runtime, "default", ROUND_TRIP, dir.path(), 1 << 30);
    let estimated = estimate_counterfactual(&Recording::open(dir.path()).unwrap()).unwrap();
    let yaml = estimated.to_yaml("the recording").unwrap();
    let workload = Workload::parse(&yaml, Path::new("exported.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    let file = &workload.file;
    let groups: Vec<(&str, u32)> = file
        .cluster
        .nodes
        .iter()
        .map(|g| (g.name.as_str(), g.count))
        .collect();
    assert_eq!(
        groups,
        [("cpu", 3), ("gpu", 1)],
        "the nodes, grouped as written"
    );
    // A CPU job: its speed per core and its work, fitted to what it did.
    let vae = &file.templates["vae-0"];
    let speed = vae.speed.unwrap();
    assert!((speed - 1.0).abs() < 0.02, "vae-0 speed {speed}");
    assert!((vae.work - 600.0).abs() < 6.0, "vae-0 work {}", vae.work);
    assert_eq!(vae.max_cores, Some(4.0), "it was seen using four cores");
    let Some(CurveFile::Shape(shape)) = &vae.curve else {
        panic!("vae-0 has a fitted curve: {:?}", vae.curve)
    };
    assert!(
        (shape.first - 1.0).abs() < 0.05 && (shape.last - 0.1).abs() < 0.05,
        "vae-0 curve {shape:?}"
    );
    assert!(
        (shape.share_at_20 - 0.65).abs() < 0.05,
        "vae-0 curve {shape:?}"
    );
    // A GPU job: its throughput with the two workers it ran with, DRAGON's 176.65/s.
    let resnet = file
        .templates
        .values()
        .find(|t| !t.roles.is_empty())
        .unwrap();
    let table = resnet.throughput.as_ref().unwrap();
    assert_eq!(
        table.len(),
        4,
        "a rate for each replica count it may scale to"
    );
    assert!(
        (table[1] - 176.65).abs() < 2.0,
        "resnet with two workers: {table:?}"
    );
    assert!(
        (resnet.work - 100_000.0).abs() < 1000.0,
        "resnet work {}",
        resnet.work
    );
    assert!(yaml.starts_with("# Estimated from the recording"), "{yaml}");
}

/// A job id is whatever the cluster reported: one holding line breaks (here, a line
/// that would import a trace) reaches the exported workload only escaped inside a
/// comment, and the job is left out, since a workload refuses such a name.
#[test]
fn a_recorded_job_id_holding_line_breaks_cannot_add_a_key_to_the_exported_workload() {
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/recording-v1/segment-000000.jsonl.zst");
    let text =
        String::from_utf8(zstd::decode_all(std::fs::File::open(checked_in).unwrap()).unwrap())
            .unwrap();
    // In the records' JSON, `\n` is a line break in the id.
    let hostile = text.replace(
        "\"vae-0\"",
        "\"vae-0\\nimport:\\n  philly: {path: philly.csv}\"",
    );
    assert_ne!(hostile, text);
    let dir = tempfile::tempdir().unwrap();
    let segment = dir.path().join("segment-000000.jsonl.zst");
    zstd::stream::copy_encode(
        hostile.as_bytes(),
        std::fs::File::create(&segment).unwrap(),
        3,
    )
    .unwrap();

    let estimated = estimate_counterfactual(&Recording::open(dir.path()).unwrap()).unwrap();
    let yaml = estimated.to_yaml("the recording").unwrap();
    assert!(
        !yaml.lines().any(|line| line.starts_with("import:")),
        "{yaml}"
    );
    assert!(
        yaml.contains(
            "# Left out: vae-0\\nimport:\\n  philly: {path: philly.csv}: its id is not a \
             workload name"
        ),
        "{yaml}"
    );
    let workload = Workload::parse(&yaml, Path::new("exported.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert!(workload.file.import.is_none());
    let ids: Vec<&str> = workload
        .file
        .jobs
        .iter()
        .filter_map(|j| j.id.as_deref())
        .collect();
    assert_eq!(ids, ["vae-1", "vae-2", "vae-3"]);
}
