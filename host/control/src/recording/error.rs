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
        }
    }
}
