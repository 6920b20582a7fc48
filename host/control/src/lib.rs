//! The control loop: snapshot -> policy ->
//! [`check_decision_within`](switchyard_core::check_decision_within) its disruption budget
//! -> apply.
//!
//! It owns the round: when to call the policy (every job arrival or departure, and when
//! the policy's `next_call_after` falls due), each policy's state blob between calls (one
//! per policy name, so swapping back resumes it; see [`StateStore`]), what happens when a
//! policy fails (the round is decided by the last good decision maker: the most recent
//! other policy that decided a round successfully, such as the one active before a hot
//! swap, or else the configured fallback, by default the built-in `default`; the failure
//! is recorded), and A/B experiments ([`Experiment`]). It talks to a cluster only
//! through [`Cluster`], so it does not know whether it drives the simulator or a real
//! cluster; it must not reach into either.
//!
//! Its modules are private; the names below are re-exported at the crate root.
//!
//! - `cluster`: what the loop needs of a cluster ([`Cluster`], [`Advance`]).
//! - `slot`: a policy ready to decide ([`PolicySlot`]).
//! - `control_loop`: the loop ([`ControlLoop`]): its policies, state blobs, experiment
//!   and records, when the next round is due ([`Step`]), a run to its end ([`RunEnd`]).
//! - `round`: one round ([`ControlLoop::decide_round`]): each arm's call, the fallback
//!   when it fails, validation, apply, the record ([`RoundOutcome`]).
//! - `decision_record`: what the loop keeps of each round ([`DecisionRecord`]).
//! - `decider`: which component a policy's name meant when it decided, named once per
//!   listing rather than in every record ([`DecidingPolicy`], [`DeciderLog`]).
//! - `outcome`: what became of an accepted action ([`ActionOutcome`]).
//! - `window`: how much of the queue a policy that overran its deadline is shown.
//! - `round_observer`: what an observer of the rounds is told ([`RoundObserver`]).
//! - `live_cluster`: what the live controller needs of a cluster beyond [`Cluster`]
//!   ([`LiveCluster`]).
//! - `checkpoint`: acknowledged checkpoints as the live controller and a cluster speak of
//!   them ([`CheckpointAck`], [`LastCheckpoint`], [`CHECKPOINT_KEPT_LABEL`]).
//! - `leader`: whether this replica may act ([`Leader`]).
//! - `loss`: the bounded loss series a cluster keeps per job ([`LossSeries`]).
//! - `state`: state blobs and kept components ([`StateStore`], [`ComponentStore`]).
//! - `experiment`: A/B experiments ([`Experiment`]) and their figures
//!   ([`ExperimentReport`]).
//! - `recording`: a run written to disk as it happens, and read back ([`Recorder`],
//!   [`Recording`]).
//! - `replay`: a recording's rounds decided again by other policies ([`replay()`]).
//! - `stats`: completion times that count unfinished jobs as censored, and figures over
//!   seeds ([`CompletionStats`], [`mean_interval`]).
//! - `files`: opening the files people and recordings name: regular files only, without
//!   blocking, up to a limit ([`open_regular_file`], [`read_regular_file`]).

mod checkpoint;
mod cluster;
mod control_loop;
mod decider;
mod decision_record;
mod experiment;
mod files;
mod leader;
mod live_cluster;
mod loss;
mod outcome;
mod recording;
mod replay;
mod round;
mod round_observer;
mod slot;
mod state;
mod stats;
mod window;

pub use checkpoint::{
    AckRefused, Acknowledged, CHECKPOINT_KEPT_LABEL, CHECKPOINT_PATH_MAX_BYTES, CheckpointAck,
    CheckpointOutcome, CheckpointRequest, LastCheckpoint, TASK_NAME_MAX_BYTES,
};
pub use cluster::{Advance, Cluster};
pub use control_loop::{ControlLoop, RunEnd, Step};
pub use decider::{DeciderLog, DecidingPolicy, PolicyFromRound};
pub use decision_record::{
    ArmRecord, DecisionRecord, FailedActionRecord, QueueWindowRecord, RejectedActionRecord,
    RejectedLabelRecord, ShadowRecord,
};
pub use experiment::{
    Arm, ArmReport, Experiment, ExperimentError, ExperimentMode, ExperimentReport, FailedActions,
    Imbalance, JobAssignment, LabelSelector, ShadowDifference, ShadowReport, SplitReport,
};
pub use files::{open_regular_file, read_regular_file};
pub use leader::Leader;
pub use live_cluster::{LiveCluster, RefusalHook, SnapshotSummary};
pub use loss::{LOSS_MAGNITUDE_MAX, LOSS_WINDOW, LossAck, LossSeries, is_loss_value};
pub use outcome::{ActionFailure, ActionOutcome, FailureReason};
pub use recording::{
    CutShort, LossAppend, PolicyIdentity, PolicyRecord, RECORDING_FORMAT_VERSION,
    RECORDING_MAX_RECORD_BYTES, RECORDING_MIN_MAX_BYTES, RecordOptions, RecordedRound,
    RecordedRounds, Recorder, Recording, RecordingError, RoundRecord, SegmentHeader, SegmentRecord,
    SnapshotChanges, export_anonymised,
};
pub use replay::{
    Agreement, CutShortNote, JobDifference, RecordedComponent, ReplayError, ReplayPolicy,
    ReplayReport, RoundDifference, replay,
};
pub use round::{CallRole, PolicyCall, RETRY_FIRST, RoundOutcome};
pub use round_observer::{RoundObserver, RoundStart};
pub use slot::PolicySlot;
pub use state::{
    ACTIVE_FILE, ActivePolicy, ComponentStore, DirStateStore, KeepError, KeptComponent,
    MemoryStateStore, PARAMETERS_FILE, PolicyParameters, StateError, StateStore,
};
pub use stats::{
    CONFIDENCE, CompletionStats, Difference, Estimate, IMBALANCE_P_VALUE, KaplanMeier, Observation,
    SurvivalStep, binomial_p_value, compare_arms, mean_interval, paired_interval,
};
