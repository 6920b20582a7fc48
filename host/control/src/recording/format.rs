//! The records a recording is made of, as they are written: one JSON object per line,
//! tagged by `kind`, in segments of a quarter of the recording's size bound. `docs/recording.md` documents them field by field; a change that
//! an older reader would misread raises [`RECORDING_FORMAT_VERSION`].

use serde::{Deserialize, Serialize};

use crate::decision_record::DecisionRecord;
use switchyard_core::{Job, LossSample, Node, NodeSet, Settings};

/// What the header's `format` field says, so a reader can tell a recording from any
/// other zstd-compressed JSON lines.
pub(super) const FORMAT_NAME: &str = "switchyard-recording";

/// The version of the format this host writes and reads. A reader refuses a segment
/// of another version, naming both.
pub const RECORDING_FORMAT_VERSION: u32 = 1;

/// The smallest size bound a recording accepts: a segment (a quarter of it) must hold a
/// large cluster's whole snapshot and many rounds after it.
pub const RECORDING_MIN_MAX_BYTES: u64 = 1 << 20;

/// The longest record a reader reads by default
/// ([`Recording::with_max_record_bytes`](super::Recording::with_max_record_bytes) sets
/// another): a round that resets the snapshot holds the whole cluster, so this leaves
/// room for a cluster many times the largest the performance tests run, and still
/// refuses a line that would take the reader's memory.
pub const RECORDING_MAX_RECORD_BYTES: usize = 256 << 20;

/// One line of a segment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SegmentRecord {
    /// The first line of every segment.
    Header(SegmentHeader),
    /// Which policy decides from the next round on, and who stands in when it fails:
    /// written at the start of a segment and whenever either changes.
    Policy(PolicyRecord),
    /// One round of the control loop: what changed in the snapshot since the previous
    /// round, and what was decided.
    Round(Box<RoundRecord>),
}

/// What a segment is and where it comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentHeader {
    /// Always `switchyard-recording`.
    pub format: String,
    /// The format version ([`RECORDING_FORMAT_VERSION`] when this host wrote it).
    pub version: u32,
    /// The version of switchyard that recorded it.
    pub switchyard: String,
    /// Identifies one run of a controller: a restarted controller starts another run,
    /// whose rounds count from 0 again.
    pub run: String,
    /// The segment's place in its run, from 0. A run's segments follow each other
    /// without a gap unless the oldest were deleted to keep the recording in bounds.
    pub segment: u64,
    /// The cluster recorded (`sim:WORKLOAD.yaml`, `kube`).
    pub cluster: String,
    /// The seed of the policies' randomness; each round records the seed it used.
    pub seed: u64,
    /// Wall-clock time the segment was started, seconds since the Unix epoch.
    pub started_unix: f64,
}

/// A policy as the loop runs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyIdentity {
    /// The policy's name.
    pub name: String,
    /// The version it describes itself with.
    pub version: String,
    /// The content digest of its component (`sha256:...`).
    pub digest: String,
    /// Its effective settings (defaults filled in).
    pub settings: Settings,
}

/// The active policy and the fallback standing in for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// The active policy.
    pub active: PolicyIdentity,
    /// The policy that decides a round the active one fails.
    pub fallback: PolicyIdentity,
    /// The active policy's state blob before the next round, hex-encoded, so a replay
    /// that starts here (a later segment, a swap) resumes the policy where it was.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub active_state: String,
}

/// One round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// The seed the policies' randomness used this round.
    pub seed: u64,
    /// What changed in the snapshot since the previous round of the segment.
    pub changes: SnapshotChanges,
    /// The decision, as the loop recorded it: the deciding policy, its actions with
    /// their reasons, what was rejected, what failed, and the shadow's answer.
    pub decision: DecisionRecord,
}

/// How the snapshot of a round differs from the previous round's. The first round of a
/// segment is a reset (every node and job in full), so each segment reads on its own.
/// The order rule is the one of the contract's deltas: items keep their places, a
/// changed item is replaced where it stands, new ones follow; a snapshot that cannot be
/// said this way is recorded as a reset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotChanges {
    /// Forget everything held: `nodes`, `jobs` and `node_sets` are the whole lists.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reset: bool,
    /// Nodes gone, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes_removed: Vec<String>,
    /// Nodes new or changed, whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
    /// Jobs gone (finished, or no longer the cluster's), by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs_removed: Vec<String>,
    /// Jobs new or changed other than in their loss series, whole: a new job carries
    /// its spec (tasks with roles and requests, replicas and limits, priority, utility,
    /// labels, whether it checkpoints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<Job>,
    /// Jobs whose only change is that their loss series moved on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loss: Vec<LossAppend>,
    /// The eligibility sets, whole, when they changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_sets: Option<Vec<NodeSet>>,
}

/// A job's loss series moved on: drop the `dropped` oldest samples, append `samples`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossAppend {
    /// The job.
    pub job: String,
    /// Oldest samples that left the series' window.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u32,
    /// Samples new since the previous round, oldest first.
    pub samples: Vec<LossSample>,
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}
