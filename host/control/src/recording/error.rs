//! What goes wrong writing or reading a recording ([`RecordingError`]), each error
//! naming the file or directory at fault. It neither reads nor writes anything.

use std::path::PathBuf;

use super::format::{FORMAT_NAME, RECORDING_FORMAT_VERSION, RECORDING_MIN_MAX_BYTES};

/// A recording that cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// A file or directory could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The size bound is too small to hold a segment.
    #[error(
        "a recording bound of {max_bytes} bytes is too small: it must be at least {} bytes (1 MiB), so that a segment holds a whole snapshot and the rounds after it",
        RECORDING_MIN_MAX_BYTES
    )]
    TooSmall {
        /// The bound asked for.
        max_bytes: u64,
    },
    /// A directory without segments.
    #[error("{path}: no recording here (no segment-NNNNNN.jsonl.zst files)")]
    Empty {
        /// The directory.
        path: PathBuf,
    },
    /// A segment that is not a regular file (a directory, device, FIFO or socket).
    #[error(
        "{path}: not a regular file; a recording's segments are regular files (a directory, device, FIFO or socket is never read)"
    )]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A segment from which not even its header can be read: empty, or not a zstd
    /// stream. The recorder never leaves one (it names a segment once its header is on
    /// disk).
    #[error(
        "{path}: no record can be read from it ({reason}); a segment starts with its header, so this one was cut or replaced: remove it to read the others"
    )]
    Unreadable {
        /// The segment.
        path: PathBuf,
        /// What the reader found.
        reason: String,
    },
    /// A record longer than the reader's limit.
    #[error(
        "{path}: record {line} is longer than the limit of {limit} bytes (a record is one line); it was read no further"
    )]
    RecordTooLarge {
        /// The segment.
        path: PathBuf,
        /// The record's place in the segment, from 1.
        line: u64,
        /// The limit.
        limit: usize,
    },
    /// A segment read already, or one before the segment read last in its run, or of a
    /// run another run has followed: its rounds would be counted twice or out of order.
    #[error(
        "{path}: segment {segment} of run `{run}` comes after segment {after_segment} of run `{after_run}` ({}): a recording's segments are read once each, in the order they were written; remove the copied or renamed one",
        after.display()
    )]
    OutOfOrder {
        /// The segment refused.
        path: PathBuf,
        /// Its run, as its header says.
        run: String,
        /// Its place in its run, as its header says.
        segment: u64,
        /// The segment read before it.
        after: PathBuf,
        /// That segment's run.
        after_run: String,
        /// That segment's place in its run.
        after_segment: u64,
    },
    /// A recording whose segments hold no round.
    #[error(
        "{path}: the recording holds no round (its segments have headers and nothing decided), so there is nothing to replay"
    )]
    NoRounds {
        /// The recording's directory or file.
        path: PathBuf,
    },
    /// A file that does not start with a recording's header.
    #[error(
        "{path}: not a switchyard recording (its first line is not a `header` record of format `{}`)",
        FORMAT_NAME
    )]
    NoHeader {
        /// The file.
        path: PathBuf,
    },
    /// A segment of another format version.
    #[error(
        "{path}: recording format version {found}; this switchyard reads version {}",
        RECORDING_FORMAT_VERSION
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// The version it says it is.
        found: u32,
    },
    /// A complete line that is not a record.
    #[error("{path}: record {line}: {source}")]
    BadRecord {
        /// The segment.
        path: PathBuf,
        /// The record's place in the segment, from 1.
        line: u64,
        /// What serde found wrong.
        #[source]
        source: serde_json::Error,
    },
    /// Records in an order a recorder does not write.
    #[error("{path}: record {line}: {message}")]
    Malformed {
        /// The segment.
        path: PathBuf,
        /// The record's place in the segment, from 1.
        line: u64,
        /// What is wrong.
        message: String,
    },
}

impl RecordingError {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            RecordingError::Io { .. } => "io",
            RecordingError::TooSmall { .. } => "too_small",
            RecordingError::Empty { .. } => "empty",
            RecordingError::NoHeader { .. } => "no_header",
            RecordingError::Version { .. } => "version",
            RecordingError::BadRecord { .. } => "bad_record",
            RecordingError::Malformed { .. } => "malformed",
            RecordingError::NotAFile { .. } => "not_a_file",
            RecordingError::Unreadable { .. } => "unreadable",
            RecordingError::RecordTooLarge { .. } => "record_too_large",
            RecordingError::OutOfOrder { .. } => "out_of_order",
            RecordingError::NoRounds { .. } => "no_rounds",
        }
    }
}
