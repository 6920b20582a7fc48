//! Reading a recording back: the segments in order, each record decoded and each
//! round's snapshot rebuilt from the recorded changes.
//!
//! A segment cut short (the controller was killed while writing) reads up to its last
//! complete record: zstd decodes every block that reached the file, a record is one
//! line, and a line without its end is dropped. The reader notes such an end and goes on
//! with the next segment, which starts with a whole snapshot.
//!
//! What it refuses rather than reads: a segment that is not a regular file (opened
//! without blocking, so a FIFO cannot hang it), one without a header (empty, or not a
//! zstd stream), a record longer than the limit (each byte is looked at once, and no
//! more than the limit is held), a segment read already or out of its run's order, and a
//! recording that holds no round at all: a replay over nothing would report agreement
//! over nothing.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::error::RecordingError;
use super::format::{
    FORMAT_NAME, PolicyRecord, RECORDING_FORMAT_VERSION, RECORDING_MAX_RECORD_BYTES, RoundRecord,
    SegmentHeader, SegmentRecord,
};
use super::writer::list_segments;
use switchyard_core::{Job, Node, NodeSet, Snapshot};

/// A recording on disk: a directory of segments, or one segment file.
#[derive(Clone, Debug)]
pub struct Recording {
    /// The directory or file it was opened at.
    path: PathBuf,
    segments: Vec<PathBuf>,
    /// The longest record (line) read.
    max_record_bytes: usize,
}

/// One recorded round, with the snapshot the policy was shown.
#[derive(Clone, Debug)]
pub struct RecordedRound {
    /// The header of the segment it is in.
    pub header: Arc<SegmentHeader>,
    /// The policies in effect (the latest policy record before it).
    pub policy: Arc<PolicyRecord>,
    /// Whether a policy record came right before this round (a segment's start, a swap):
    /// its `active_state` is the active policy's state before this round.
    pub policy_written: bool,
    /// Whether it follows the previous round read in the same run without a gap.
    /// False at the first round, at a new run (a restart) and after deleted or damaged
    /// segments.
    pub continues: bool,
    /// The round as recorded.
    pub record: RoundRecord,
    /// The snapshot rebuilt from the recorded changes, with the round's time and
    /// triggers.
    pub snapshot: Snapshot,
}

/// A segment that ended before its last record was complete, or could not be decoded
/// past some point. The records before it were read.
#[derive(Clone, Debug, PartialEq)]
pub struct CutShort {
    /// The segment.
    pub path: PathBuf,
    /// Complete records read from it.
    pub records: u64,
    /// What ended it (`the file ends inside a record`, the decoder's error).
    pub reason: String,
}

impl Recording {
    /// The recording at `path`: a directory holding `segment-NNNNNN.jsonl.zst` files,
    /// or one such file. Every segment must be a regular file: a directory, device,
    /// FIFO or socket in its place is refused here, before anything is read.
    pub fn open(path: &Path) -> Result<Self, RecordingError> {
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RecordingError::Io { path, source }
        };
        let meta = std::fs::metadata(path).map_err(io_error(path))?;
        let segments: Vec<PathBuf> = if meta.is_dir() {
            list_segments(path)
                .map_err(io_error(path))?
                .into_iter()
                .map(|(_, p)| p)
                .collect()
        } else {
            vec![path.to_path_buf()]
        };
        if segments.is_empty() {
            return Err(RecordingError::Empty {
                path: path.to_path_buf(),
            });
        }
        for segment in &segments {
            if !std::fs::metadata(segment)
                .map_err(io_error(segment))?
                .is_file()
            {
                return Err(RecordingError::NotAFile {
                    path: segment.clone(),
                });
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            segments,
            max_record_bytes: RECORDING_MAX_RECORD_BYTES,
        })
    }

    /// The same recording, read with records of at most `bytes` bytes (a line longer
    /// than that is an error, read no further than the limit); the default is
    /// [`RECORDING_MAX_RECORD_BYTES`].
    pub fn with_max_record_bytes(mut self, bytes: usize) -> Self {
        self.max_record_bytes = bytes;
        self
    }

    /// The segment files, in order.
    pub fn segments(&self) -> &[PathBuf] {
        &self.segments
    }

    /// The rounds, oldest first, each with its rebuilt snapshot.
    pub fn rounds(&self) -> RecordedRounds {
        RecordedRounds {
            recording: self.path.clone(),
            max_record_bytes: self.max_record_bytes,
            pending: self.segments.iter().cloned().collect(),
            segment: None,
            cut_short: Vec::new(),
            last: None,
            runs: FxHashSet::default(),
            previous: None,
            rounds: 0,
            done: false,
        }
    }

    /// The records of segment `index` (of [`Recording::segments`]), undecoded further
    /// and read as they are asked for, so a tool that rewrites a recording (such as
    /// anonymising it) holds one record at a time, not the recording.
    pub(crate) fn segment_records(&self, index: usize) -> Result<SegmentRecords, RecordingError> {
        let path = self.segments.get(index).ok_or_else(|| RecordingError::Io {
            path: self.segments.last().cloned().unwrap_or_default(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "no segment {index}: the recording has {}",
                    self.segments.len()
                ),
            ),
        })?;
        Ok(SegmentRecords {
            lines: Lines::open(path, self.max_record_bytes)?,
        })
    }
}

/// One segment's records, oldest first ([`Recording::segment_records`]).
pub(crate) struct SegmentRecords {
    lines: Lines,
}

impl Iterator for SegmentRecords {
    type Item = Result<SegmentRecord, RecordingError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.lines.next_record().transpose()
    }
}

/// The complete lines of one segment, decoded as records.
struct Lines {
    path: PathBuf,
    decoder: zstd::stream::read::Decoder<'static, BufReader<File>>,
    buffer: Vec<u8>,
    /// Where the unread part of `buffer` starts.
    start: usize,
    /// How far past `start` the buffer is known to hold no line end, so each byte is
    /// looked at once however long a line is.
    scanned: usize,
    /// The longest line read.
    max_line: usize,
    /// The decoder has nothing more; why, when it ended early.
    ended: Option<Option<String>>,
    records: u64,
    /// The file held no byte when it was opened.
    empty: bool,
}

const READ_CHUNK: usize = 64 << 10;

impl Lines {
    fn open(path: &Path, max_line: usize) -> Result<Self, RecordingError> {
        let io_error = |source| RecordingError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = crate::files::open_regular_file(path).map_err(|source| {
            if source.kind() == io::ErrorKind::InvalidInput {
                RecordingError::NotAFile {
                    path: path.to_path_buf(),
                }
            } else {
                io_error(source)
            }
        })?;
        let empty = file.metadata().map_err(io_error)?.len() == 0;
        let decoder = zstd::stream::read::Decoder::new(file).map_err(io_error)?;
        Ok(Self {
            path: path.to_path_buf(),
            decoder,
            buffer: Vec::new(),
            start: 0,
            scanned: 0,
            max_line,
            ended: None,
            records: 0,
            empty,
        })
    }

    /// The next complete line, without its end; none at the end of what can be read. A
    /// line longer than the limit is an error, read no further than the limit.
    fn next_line(&mut self) -> Result<Option<Vec<u8>>, RecordingError> {
        loop {
            let unread = &self.buffer[self.start..];
            if let Some(at) = unread[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.scanned + at;
                let line = unread[..end].to_vec();
                self.start += end + 1;
                self.scanned = 0;
                return Ok(Some(line));
            }
            self.scanned = unread.len();
            if self.scanned > self.max_line {
                return Err(RecordingError::RecordTooLarge {
                    path: self.path.clone(),
                    line: self.records + 1,
                    limit: self.max_line,
                });
            }
            if self.ended.is_some() {
                return Ok(None);
            }
            self.buffer.drain(..self.start);
            self.start = 0;
            let filled = self.buffer.len();
            self.buffer.resize(filled + READ_CHUNK, 0);
            let read = self.decoder.read(&mut self.buffer[filled..]);
            match read {
                Ok(0) => {
                    self.buffer.truncate(filled);
                    self.ended = Some(None);
                }
                Ok(n) => self.buffer.truncate(filled + n),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {
                    self.buffer.truncate(filled);
                }
                Err(error) => {
                    self.buffer.truncate(filled);
                    let reason = if error.kind() == io::ErrorKind::UnexpectedEof {
                        "the file ends inside a record (the recorder stopped while writing)"
                            .to_string()
                    } else {
                        format!("cannot decode past this point: {error}")
                    };
                    self.ended = Some(Some(reason));
                }
            }
        }
    }

    /// The next record; none at the end. A complete line that is not a record is an
    /// error naming the segment and the line.
    fn next_record(&mut self) -> Result<Option<SegmentRecord>, RecordingError> {
        let Some(line) = self.next_line()? else {
            return Ok(None);
        };
        let record: SegmentRecord =
            serde_json::from_slice(&line).map_err(|source| RecordingError::BadRecord {
                path: self.path.clone(),
                line: self.records + 1,
                source,
            })?;
        if self.records == 0 {
            let SegmentRecord::Header(header) = &record else {
                return Err(RecordingError::NoHeader {
                    path: self.path.clone(),
                });
            };
            if header.format != FORMAT_NAME {
                return Err(RecordingError::NoHeader {
                    path: self.path.clone(),
                });
            }
            if header.version != RECORDING_FORMAT_VERSION {
                return Err(RecordingError::Version {
                    path: self.path.clone(),
                    found: header.version,
                });
            }
        }
        self.records += 1;
        Ok(Some(record))
    }

    /// How the segment ended early, once read to its end: a partial last line, or a
    /// decoder error.
    fn cut_short(&self) -> Option<CutShort> {
        let partial = self.start < self.buffer.len();
        let reason = match &self.ended {
            Some(Some(reason)) => Some(reason.clone()),
            Some(None) if partial => {
                Some("the file ends inside a record (the recorder stopped while writing)".into())
            }
            _ => None,
        }?;
        Some(CutShort {
            path: self.path.clone(),
            records: self.records,
            reason,
        })
    }
}

/// The snapshot being rebuilt within a segment.
#[derive(Default)]
struct Held {
    nodes: Vec<Arc<Node>>,
    jobs: Vec<Arc<Job>>,
    node_sets: Arc<Vec<NodeSet>>,
}

impl Held {
    fn apply(&mut self, record: &RoundRecord) {
        let changes = &record.changes;
        if changes.reset {
            *self = Held::default();
        }
        remove(&mut self.nodes, &changes.nodes_removed, |n| &n.name);
        upsert(&mut self.nodes, &changes.nodes, |n| &n.name);
        remove(&mut self.jobs, &changes.jobs_removed, |j| &j.id);
        upsert(&mut self.jobs, &changes.jobs, |j| &j.id);
        if !changes.loss.is_empty() {
            let at: FxHashMap<&str, usize> = self
                .jobs
                .iter()
                .enumerate()
                .map(|(i, j)| (j.id.as_str(), i))
                .collect();
            let mut updates = Vec::new();
            for append in &changes.loss {
                if let Some(&i) = at.get(append.job.as_str()) {
                    updates.push((i, append));
                }
            }
            for (i, append) in updates {
                let job = Arc::make_mut(&mut self.jobs[i]);
                let dropped = (append.dropped as usize).min(job.loss.len());
                job.loss = job.loss[dropped..]
                    .iter()
                    .chain(&append.samples)
                    .copied()
                    .collect();
            }
        }
        if let Some(sets) = &changes.node_sets {
            self.node_sets = Arc::new(sets.clone());
        }
    }

    fn snapshot(&self, record: &RoundRecord) -> Snapshot {
        Snapshot {
            time: record.decision.time,
            triggers: record.decision.triggers.clone(),
            nodes: self.nodes.clone(),
            jobs: self.jobs.clone(),
            node_sets: Arc::clone(&self.node_sets),
        }
    }
}

fn remove<T>(items: &mut Vec<Arc<T>>, removed: &[String], key: impl Fn(&T) -> &str) {
    if removed.is_empty() {
        return;
    }
    let gone: rustc_hash::FxHashSet<&str> = removed.iter().map(String::as_str).collect();
    items.retain(|item| !gone.contains(key(item)));
}

/// Replaces each item of `upserted` where an item of its key stands, or appends it.
fn upsert<T: Clone>(items: &mut Vec<Arc<T>>, upserted: &[T], key: impl Fn(&T) -> &str) {
    if upserted.is_empty() {
        return;
    }
    let at: FxHashMap<String, usize> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (key(item).to_string(), i))
        .collect();
    for item in upserted {
        match at.get(key(item)) {
            Some(&i) => items[i] = Arc::new(item.clone()),
            None => items.push(Arc::new(item.clone())),
        }
    }
}

/// The rounds of a recording, oldest first ([`Recording::rounds`]).
pub struct RecordedRounds {
    /// The recording's directory or file, for an error about the whole of it.
    recording: PathBuf,
    max_record_bytes: usize,
    pending: VecDeque<PathBuf>,
    segment: Option<SegmentState>,
    cut_short: Vec<CutShort>,
    /// The run and round of the last round read.
    last: Option<(String, u64)>,
    /// Each run read so far.
    runs: FxHashSet<String>,
    /// The run and number of the last segment read, and its file.
    previous: Option<(String, u64, PathBuf)>,
    /// Rounds read so far.
    rounds: u64,
    /// Nothing more comes: the end was reached or an error ended the reading.
    done: bool,
}

struct SegmentState {
    lines: Lines,
    header: Arc<SegmentHeader>,
    policy: Option<Arc<PolicyRecord>>,
    policy_written: bool,
    held: Held,
    rounds: u64,
}

impl RecordedRounds {
    /// Segments that ended early, among those read so far.
    pub fn cut_short(&self) -> &[CutShort] {
        &self.cut_short
    }

    fn next_segment(&mut self) -> Result<bool, RecordingError> {
        let Some(path) = self.pending.pop_front() else {
            return Ok(false);
        };
        let mut lines = Lines::open(&path, self.max_record_bytes)?;
        // The recorder names a segment only once its header is on disk, so a segment
        // without one was cut or replaced after the fact: it cannot be read as a part.
        let Some(SegmentRecord::Header(header)) = lines.next_record()? else {
            let reason = match lines.cut_short() {
                _ if lines.empty => "it is empty".to_string(),
                Some(cut) => cut.reason,
                None => "it holds no record".to_string(),
            };
            return Err(RecordingError::Unreadable { path, reason });
        };
        self.check_order(&header, &path)?;
        self.segment = Some(SegmentState {
            lines,
            header: Arc::new(header),
            policy: None,
            policy_written: false,
            held: Held::default(),
            rounds: 0,
        });
        Ok(true)
    }

    /// Refuses a segment read already (a copy) or one that goes back in its run or
    /// returns to a run another has followed: its rounds would be counted twice or out
    /// of order.
    fn check_order(&mut self, header: &SegmentHeader, path: &Path) -> Result<(), RecordingError> {
        if let Some((after_run, after_segment, after)) = &self.previous
            && self.runs.contains(&header.run)
            && (*after_run != header.run || header.segment <= *after_segment)
        {
            return Err(RecordingError::OutOfOrder {
                path: path.to_path_buf(),
                run: header.run.clone(),
                segment: header.segment,
                after: after.clone(),
                after_run: after_run.clone(),
                after_segment: *after_segment,
            });
        }
        self.runs.insert(header.run.clone());
        self.previous = Some((header.run.clone(), header.segment, path.to_path_buf()));
        Ok(())
    }

    fn next_round(&mut self) -> Result<Option<RecordedRound>, RecordingError> {
        loop {
            let Some(segment) = self.segment.as_mut() else {
                if !self.next_segment()? {
                    if self.rounds == 0 {
                        return Err(RecordingError::NoRounds {
                            path: self.recording.clone(),
                        });
                    }
                    return Ok(None);
                }
                continue;
            };
            let record = match segment.lines.next_record()? {
                Some(record) => record,
                None => {
                    if let Some(c) = segment.lines.cut_short() {
                        self.cut_short.push(c);
                    }
                    self.segment = None;
                    continue;
                }
            };
            match record {
                SegmentRecord::Header(_) => {
                    return Err(RecordingError::Malformed {
                        path: segment.lines.path.clone(),
                        line: segment.lines.records,
                        message: "a second header inside a segment".into(),
                    });
                }
                SegmentRecord::Policy(policy) => {
                    segment.policy = Some(Arc::new(policy));
                    segment.policy_written = true;
                }
                SegmentRecord::Round(round) => {
                    let malformed = |message: &str| RecordingError::Malformed {
                        path: segment.lines.path.clone(),
                        line: segment.lines.records,
                        message: message.into(),
                    };
                    if segment.rounds == 0 && !round.changes.reset {
                        return Err(malformed(
                            "the segment's first round does not carry the whole snapshot (reset)",
                        ));
                    }
                    let Some(policy) = segment.policy.clone() else {
                        return Err(malformed("a round before any policy record"));
                    };
                    segment.rounds += 1;
                    self.rounds += 1;
                    segment.held.apply(&round);
                    let snapshot = segment.held.snapshot(&round);
                    let run = segment.header.run.clone();
                    let continues = self
                        .last
                        .as_ref()
                        .is_some_and(|(r, n)| *r == run && n + 1 == round.decision.round);
                    self.last = Some((run, round.decision.round));
                    let policy_written = std::mem::take(&mut segment.policy_written);
                    return Ok(Some(RecordedRound {
                        header: Arc::clone(&segment.header),
                        policy,
                        policy_written,
                        continues,
                        record: *round,
                        snapshot,
                    }));
                }
            }
        }
    }
}

impl Iterator for RecordedRounds {
    type Item = Result<RecordedRound, RecordingError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_round() {
            Ok(Some(round)) => Some(Ok(round)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                // An error ends the reading: the rounds after it cannot be rebuilt.
                self.done = true;
                self.pending.clear();
                self.segment = None;
                Some(Err(error))
            }
        }
    }
}
