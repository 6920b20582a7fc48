//! Writing a recording: the [`Recorder`] (the loop's observer that turns each round into
//! a record) and the segment files it writes through zstd.
//!
//! Each record is one JSON line, compressed into the segment's zstd frame and flushed
//! at once: the flush ends a zstd block, so every record written so far can be decoded
//! from the file even when the process dies before the frame is finished, and the
//! window of the earlier records still compresses the later ones. A crash loses at most
//! the record being written. Segments rotate at a quarter of the size bound, and the
//! oldest are deleted to keep the directory within it; each segment starts with a
//! header, the policies and the whole snapshot, so it reads on its own. A segment takes
//! its name only once its header is on disk, and one left without a round by a failed
//! write (a full disk) is removed, so no reader meets an empty segment and the bound
//! counts every segment kept.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::RecordingError;
use super::format::{
    FORMAT_NAME, LossAppend, PolicyIdentity, PolicyRecord, RECORDING_FORMAT_VERSION,
    RECORDING_MIN_MAX_BYTES, RoundRecord, SegmentHeader, SegmentRecord, SnapshotChanges,
};
use crate::decision_record::DecisionRecord;
use crate::round_observer::{RoundObserver, RoundStart};
use crate::slot::PolicySlot;
use switchyard_core::{Change, HeldSnapshot, Snapshot};

/// The zstd level: the default's speed, since a record is written inside the round.
const ZSTD_LEVEL: i32 = 3;

/// Where and how to record.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordOptions {
    /// The directory the segments go to (made when missing).
    pub dir: PathBuf,
    /// The most bytes the directory's segments may hold together; the oldest segments
    /// are deleted to stay within it (the open one may pass its share by one record).
    pub max_bytes: u64,
    /// The cluster recorded, for the header (`sim:WORKLOAD.yaml`, `kube`).
    pub cluster: String,
    /// The loop's seed, for the header.
    pub seed: u64,
}

/// The segment files of one recording directory.
struct Segments {
    options: RecordOptions,
    /// Size at which the open segment is finished and the next one started.
    segment_bytes: u64,
    run: String,
    /// The next segment's place in this run.
    segment_in_run: u64,
    /// The number of the next segment file in the directory.
    next_file: u64,
    open: Option<OpenSegment>,
    /// Finished segments (this run's and earlier runs'), oldest first, with sizes.
    closed: VecDeque<(PathBuf, u64)>,
}

struct OpenSegment {
    path: PathBuf,
    encoder: zstd::stream::write::Encoder<'static, CountingFile>,
    /// Rounds written to it whole.
    rounds: u64,
}

/// A file that counts the bytes written to it: the compressed size of a segment.
struct CountingFile {
    file: File,
    written: u64,
}

impl Write for CountingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The name of segment number `n`: zero-padded, so names sort in order.
pub(crate) fn segment_name(n: u64) -> String {
    format!("segment-{n:06}.jsonl.zst")
}

/// The name segment number `n` has while its header is written: not a segment's name,
/// so no reader lists it before its header is on disk.
fn partial_name(n: u64) -> String {
    format!("{}.partial", segment_name(n))
}

/// The number of a segment file named by [`segment_name`].
pub(crate) fn segment_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("segment-")?
        .strip_suffix(".jsonl.zst")?
        .parse()
        .ok()
}

/// The segment files in `dir`, in order.
pub(crate) fn list_segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut segments = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if let Some(n) = segment_number(&path) {
            segments.push((n, path));
        }
    }
    segments.sort();
    Ok(segments)
}

/// Deletes the partial segments a recorder killed while writing a header left in
/// `dir`.
fn remove_partial_segments(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let partial = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".partial"))
            .is_some_and(|n| segment_number(Path::new(n)).is_some());
        if partial {
            remove_quietly(&path);
        }
    }
    Ok(())
}

impl Segments {
    fn open(options: RecordOptions) -> Result<Self, RecordingError> {
        if options.max_bytes < RECORDING_MIN_MAX_BYTES {
            return Err(RecordingError::TooSmall {
                max_bytes: options.max_bytes,
            });
        }
        let dir = &options.dir;
        let io_error = |source| RecordingError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_error)?;
        remove_partial_segments(dir).map_err(io_error)?;
        let existing = list_segments(dir).map_err(io_error)?;
        let next_file = existing.last().map_or(0, |(n, _)| n + 1);
        let mut closed = VecDeque::new();
        for (_, path) in existing {
            let size = std::fs::metadata(&path)
                .map_err(|source| RecordingError::Io {
                    path: path.clone(),
                    source,
                })?
                .len();
            closed.push_back((path, size));
        }
        let started = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut segments = Self {
            segment_bytes: options.max_bytes / 4,
            run: format!("{}-{}", started.as_millis(), std::process::id()),
            segment_in_run: 0,
            next_file,
            open: None,
            closed,
            options,
        };
        segments.prune();
        Ok(segments)
    }

    /// Whether a segment is open (a new one starts with a header and a reset).
    fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Starts the next segment and writes its header. The segment is written under a
    /// partial name and takes its own once the header is on disk, so a reader never
    /// meets a segment without one, and a segment that cannot take its header (a full
    /// disk) is removed, not left empty for the next round to add another beside.
    fn start(&mut self) -> io::Result<()> {
        let path = self.options.dir.join(segment_name(self.next_file));
        let partial = self.options.dir.join(partial_name(self.next_file));
        let file = File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&partial)?;
        let encoder =
            zstd::stream::write::Encoder::new(CountingFile { file, written: 0 }, ZSTD_LEVEL)?;
        self.open = Some(OpenSegment {
            path: partial.clone(),
            encoder,
            rounds: 0,
        });
        let header = SegmentHeader {
            format: FORMAT_NAME.into(),
            version: RECORDING_FORMAT_VERSION,
            switchyard: env!("CARGO_PKG_VERSION").into(),
            run: self.run.clone(),
            segment: self.segment_in_run,
            cluster: self.options.cluster.clone(),
            seed: self.options.seed,
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
        };
        let named = self
            .write(&SegmentRecord::Header(header))
            .and_then(|()| std::fs::rename(&partial, &path));
        if let Err(error) = named {
            self.open = None;
            remove_quietly(&partial);
            return Err(error);
        }
        if let Some(open) = self.open.as_mut() {
            open.path = path;
        }
        self.next_file += 1;
        self.segment_in_run += 1;
        Ok(())
    }

    /// Appends `record` to the open segment and flushes it to the file.
    fn write(&mut self, record: &SegmentRecord) -> io::Result<()> {
        let Some(open) = self.open.as_mut() else {
            return Err(io::Error::other("no segment is open"));
        };
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        open.encoder.write_all(&line)?;
        open.encoder.flush()?;
        if matches!(record, SegmentRecord::Round(_)) {
            open.rounds += 1;
        }
        Ok(())
    }

    /// Whether the open segment has reached its share of the bound.
    fn full(&self) -> bool {
        self.open
            .as_ref()
            .is_some_and(|o| o.encoder.get_ref().written >= self.segment_bytes)
    }

    /// Finishes the open segment's frame and deletes the oldest segments beyond the
    /// bound.
    fn finish(&mut self) -> io::Result<()> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let file = open.encoder.finish()?;
        self.closed.push_back((open.path, file.written));
        self.prune();
        Ok(())
    }

    /// Drops the open segment after a failed write: one holding a whole round is kept
    /// (what reached the file reads up to its last complete record) and counts against
    /// the bound; one holding none is removed, since it has nothing to replay.
    fn abandon(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        if open.rounds == 0 {
            drop(open.encoder);
            remove_quietly(&open.path);
            return;
        }
        let written = open.encoder.get_ref().written;
        self.closed.push_back((open.path, written));
        self.prune();
    }

    /// Deletes the oldest finished segments until they leave room for a full open one.
    fn prune(&mut self) {
        let room = self.options.max_bytes - self.segment_bytes;
        let mut total: u64 = self.closed.iter().map(|(_, size)| size).sum();
        while total > room {
            let Some((path, size)) = self.closed.pop_front() else {
                break;
            };
            remove_quietly(&path);
            total -= size;
        }
    }
}

/// Deletes the segment file at `path`; a failure is logged, since the recording goes on
/// without it either way.
fn remove_quietly(path: &Path) {
    if let Err(error) = std::fs::remove_file(path)
        && error.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(%error, path = %path.display(), "cannot delete a recording segment");
    }
}

/// The loop's recorder: every round becomes a `round` record holding what changed in the
/// snapshot (the contract's delta, so a round costs what changed, not the cluster's
/// size) and the decision record; a change of policy becomes a `policy` record
/// (`docs/recording.md`).
pub struct Recorder {
    segments: Segments,
    /// What the previous round's snapshot held (the snapshot's own `Arc`s).
    held: HeldSnapshot,
    /// The policies last written in this segment.
    policies: Option<(PolicyIdentity, PolicyIdentity)>,
    /// The started round's record, waiting for its decision.
    pending: Option<Pending>,
    /// A write failed; the next round starts a new segment.
    failing: bool,
}

struct Pending {
    policy: Option<PolicyRecord>,
    seed: u64,
    changes: SnapshotChanges,
}

impl Recorder {
    /// Opens the recording directory (made when missing; a directory that holds an
    /// earlier run's segments gets the next numbers) and deletes its oldest segments
    /// beyond the bound.
    pub fn open(options: RecordOptions) -> Result<Self, RecordingError> {
        Ok(Self {
            segments: Segments::open(options)?,
            held: HeldSnapshot::default(),
            policies: None,
            pending: None,
            failing: false,
        })
    }

    /// Finishes the open segment, so its zstd frame is complete.
    pub fn finish(&mut self) -> Result<(), RecordingError> {
        let path = self.segments.options.dir.clone();
        self.segments
            .finish()
            .map_err(|source| RecordingError::Io { path, source })
    }

    fn write_round(&mut self, pending: Pending, record: &DecisionRecord) -> io::Result<()> {
        if !self.segments.is_open() {
            self.segments.start()?;
        }
        if let Some(policy) = pending.policy {
            self.segments.write(&SegmentRecord::Policy(policy))?;
        }
        self.segments
            .write(&SegmentRecord::Round(Box::new(RoundRecord {
                seed: pending.seed,
                changes: pending.changes,
                decision: record.clone(),
            })))?;
        if self.segments.full() {
            self.segments.finish()?;
            self.start_afresh();
        }
        Ok(())
    }

    /// The next round starts a segment: whole snapshot, policies written again.
    fn start_afresh(&mut self) {
        self.held = HeldSnapshot::default();
        self.policies = None;
    }
}

fn identity(slot: &PolicySlot) -> PolicyIdentity {
    PolicyIdentity {
        name: slot.name().to_string(),
        version: slot.module.description().version.clone(),
        digest: slot.module.digest().to_hex(),
        settings: slot.settings.clone(),
    }
}

/// What changed from the held snapshot to `now`, as a record says it.
fn changes(change: &Change, now: &Snapshot) -> SnapshotChanges {
    let Change::Delta(delta) = change else {
        return SnapshotChanges {
            reset: true,
            nodes: now.nodes.iter().map(|n| (**n).clone()).collect(),
            jobs: now.jobs.iter().map(|j| (**j).clone()).collect(),
            node_sets: Some(now.node_sets.to_vec()),
            ..SnapshotChanges::default()
        };
    };
    SnapshotChanges {
        reset: false,
        nodes_removed: delta.nodes.removed.clone(),
        nodes: delta
            .nodes
            .upserted(&now.nodes)
            .map(|n| (**n).clone())
            .collect(),
        jobs_removed: delta.jobs.removed.clone(),
        jobs: delta
            .jobs
            .upserted(&now.jobs)
            .map(|j| (**j).clone())
            .collect(),
        loss: delta
            .loss_updates
            .iter()
            .map(|update| {
                let job = &now.jobs[update.job];
                LossAppend {
                    job: job.id.clone(),
                    dropped: update.dropped,
                    samples: job.loss[update.kept..].to_vec(),
                }
            })
            .collect(),
        node_sets: delta.node_sets_changed.then(|| now.node_sets.to_vec()),
    }
}

impl RoundObserver for Recorder {
    fn round_started(&mut self, start: RoundStart<'_>) {
        let change = self.held.change_to(start.snapshot);
        let changes = changes(&change, start.snapshot);
        self.held.commit(start.snapshot, &change);
        let now = (identity(start.active), identity(start.fallback));
        let policy = (self.policies.as_ref() != Some(&now)).then(|| PolicyRecord {
            active: now.0.clone(),
            fallback: now.1.clone(),
            active_state: hex::encode(start.active_state),
        });
        self.policies = Some(now);
        self.pending = Some(Pending {
            policy,
            seed: start.seed,
            changes,
        });
    }

    fn round_decided(&mut self, record: &DecisionRecord) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        match self.write_round(pending, record) {
            Ok(()) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!(dir = %self.segments.options.dir.display(), "recording again");
                }
            }
            Err(error) => {
                if !self.failing {
                    tracing::error!(%error, dir = %self.segments.options.dir.display(), round = record.round, "cannot write the recording; the rounds until a write succeeds are not recorded");
                }
                self.failing = true;
                self.segments.abandon();
                self.start_afresh();
            }
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Err(error) = self.finish() {
            tracing::warn!(%error, "cannot finish the recording's last segment; its records stay readable");
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::decision_record::ArmRecord;
    use crate::recording::Recording;

    /// Set in the child process the test starts: the directory to record to.
    const CHILD_DIR: &str = "SWITCHYARD_TEST_RECORDER_FILE_LIMIT_DIR";

    fn identity(name: &str) -> PolicyIdentity {
        PolicyIdentity {
            name: name.into(),
            version: "1".into(),
            digest: format!("sha256:{}", "0".repeat(64)),
            settings: Default::default(),
        }
    }

    /// Lets `recorder` record round `n`, as the loop's two calls would.
    fn record_round(recorder: &mut Recorder, n: u64) {
        recorder.pending = Some(Pending {
            policy: Some(PolicyRecord {
                active: identity("default"),
                fallback: identity("default"),
                active_state: String::new(),
            }),
            seed: n,
            changes: SnapshotChanges {
                reset: true,
                ..SnapshotChanges::default()
            },
        });
        recorder.round_decided(&DecisionRecord {
            round: n,
            time: n as f64,
            triggers: Vec::new(),
            arm_a: ArmRecord {
                policy: "default".into(),
                failure: None,
                accepted: Vec::new(),
                failed: Vec::new(),
                rejected: Vec::new(),
                labels: Vec::new(),
                rejected_labels: Vec::new(),
            },
            next_call_after: None,
            queue_window: None,
            shadow: None,
            arm_b: None,
        });
    }

    /// Sets how large this process may make a file: 0 fails every write, as a full
    /// disk does.
    fn file_size_limit(bytes: libc::rlim_t) {
        // SAFETY: plain system calls on this process's own limits and signal
        // disposition. SIGXFSZ is ignored so that a write past the limit fails with
        // EFBIG instead of killing the process.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let mut limit = std::mem::zeroed::<libc::rlimit>();
            assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit), 0);
            limit.rlim_cur = bytes.min(limit.rlim_max);
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
        }
    }

    /// In the child: five rounds recorded, thirty while no write succeeds, three after.
    fn record_through_a_full_disk(dir: &Path) {
        let mut recorder = Recorder::open(RecordOptions {
            dir: dir.to_path_buf(),
            max_bytes: RECORDING_MIN_MAX_BYTES,
            cluster: "sim:full.yaml".into(),
            seed: 1,
        })
        .unwrap();
        for n in 0..5 {
            record_round(&mut recorder, n);
        }
        file_size_limit(0);
        for n in 5..35 {
            record_round(&mut recorder, n);
        }
        file_size_limit(libc::RLIM_INFINITY);
        for n in 35..38 {
            record_round(&mut recorder, n);
        }
    }

    #[test]
    fn a_recorder_on_a_full_disk_leaves_no_segment_without_a_round_and_resumes_after_it() {
        if let Some(dir) = std::env::var_os(CHILD_DIR) {
            record_through_a_full_disk(Path::new(&dir));
            return;
        }
        // The file size limit is the process's: the recording runs in a child process
        // of this test binary, running this test alone.
        let dir = tempfile::tempdir().unwrap();
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "recording::writer::tests::a_recorder_on_a_full_disk_leaves_no_segment_without_a_round_and_resumes_after_it",
                "--exact",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .output()
            .unwrap();
        assert!(
            child.status.success(),
            "the recording child failed: {}\n{}",
            String::from_utf8_lossy(&child.stdout),
            String::from_utf8_lossy(&child.stderr)
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["segment-000000.jsonl.zst", "segment-000001.jsonl.zst"],
            "the segment before the outage and the one after it, nothing for the rounds between"
        );
        let recording = Recording::open(dir.path()).unwrap();
        let rounds: Vec<u64> = recording
            .rounds()
            .map(|r| r.unwrap().record.decision.round)
            .collect();
        assert_eq!(rounds, [0, 1, 2, 3, 4, 35, 36, 37]);
    }
}
