//! Recordings: what a controller saw and did, written to disk round by round, and read
//! back for replay.
//!
//! A recording is a directory of segments (`segment-NNNNNN.jsonl.zst`), each one zstd
//! frame of JSON lines ([`mod@format`], documented in `docs/recording.md`): a header with
//! the format's version, the policies, then one record per round holding what changed
//! in the snapshot since the previous round (the contract's delta: nodes and jobs new,
//! changed or gone, loss samples appended, eligibility sets) and the decision record
//! (the deciding policy, actions with reasons, rejections, failures). The [`Recorder`]
//! is the control loop's observer, so the simulated and the Kubernetes controllers
//! record alike; [`Recording`] reads the segments back and rebuilds each round's
//! snapshot. This module decides nothing and runs no policy ([`crate::replay`] does).

mod anonymise;
mod error;
mod format;
mod reader;
mod writer;

pub use anonymise::export_anonymised;
pub use error::RecordingError;
pub use format::{
    LossAppend, PolicyIdentity, PolicyRecord, RECORDING_FORMAT_VERSION, RECORDING_MAX_RECORD_BYTES,
    RECORDING_MIN_MAX_BYTES, RoundRecord, SegmentHeader, SegmentRecord, SnapshotChanges,
};
pub use reader::{CutShort, RecordedRound, RecordedRounds, Recording};
pub use writer::{RecordOptions, Recorder};
