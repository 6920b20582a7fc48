//! The floor every other host crate stands on: what a cluster snapshot and a policy's
//! decision are, how a snapshot changes between rounds, and whether a decision is valid.
//! Its modules are private; the names below are re-exported at the crate root.
//!
//! - `model`: the host's own view of a cluster ([`Snapshot`]) and of a policy's
//!   decision ([`Decision`]); every other crate speaks these types.
//! - `delta`: what a kept policy instance holds ([`HeldSnapshot`]) and the [`Change`]
//!   that brings it to the current snapshot: a reset, or a [`SnapshotDelta`].
//! - `validate`: checking a decision against the snapshot it was made for
//!   ([`check_decision`]), with what it turned down and why ([`RejectedAction`],
//!   [`RejectedLabel`]).
//! - `disruption`: the disruption budget ([`DisruptionBudget`]): how often one job may
//!   be disrupted per interval, how soon again, and how many jobs may be per interval,
//!   which the validator applies
//!   ([`check_decision_within`]).
//! - `eligibility`: the cluster's placement rules ([`PlacementRules`]: taints, selectors,
//!   affinity) and the eligibility sets they give tasks ([`EligibilitySets`]).
//! - `names`: the syntax of policy names and job labels (Kubernetes'):
//!   [`check_policy_name`], [`check_label_key`], [`check_label_value`].
//! - `digest`: the [`ComponentDigest`] that names a policy component by its content.
//! - [`snapshot_lowering!`]: the one lowering of a snapshot to the WIT types, shared by
//!   the host's bindings and the guest SDK's.
//!
//! It knows nothing of WebAssembly, the simulator or Kubernetes: it names no generated
//! binding type and depends on no engine.

mod delta;
mod digest;
mod disruption;
mod eligibility;
mod lowering;
mod model;
mod names;
mod validate;

pub use delta::{Change, HeldSnapshot, ListDelta, LossUpdate, SnapshotDelta};
pub use digest::ComponentDigest;
pub use disruption::{
    DEFAULT_DISRUPTION_INTERVAL, DEFAULT_MAX_DISRUPTED_SHARE, DEFAULT_MAX_DISRUPTIONS_PER_JOB,
    DEFAULT_MIN_RUN_TIME, DisruptionBudget, DisruptionBudgetError, DisruptionRefusal,
};
pub use eligibility::{
    EligibilitySets, PlacementRules, RuledNode, SelectorOperator, SelectorRequirement,
    SelectorTerm, Taint, TaintEffect, Toleration, TolerationOperator,
};
pub use model::{
    Action, Assignment, Decision, Description, Job, JobLabel, JobMove, JobPhase, LossSample,
    MOVE_HISTORY, MoveKind, Node, NodeSet, ONE_TASK_PER_NODE_LABEL, Operation, Parameter, Replicas,
    Resources, Settings, Snapshot, Task, TaskPhase, Trigger, with_move,
};
pub use names::{check_label_key, check_label_value, check_policy_name};
pub use validate::{
    Checked, LabelRejection, RejectedAction, RejectedLabel, Rejection, check_decision,
    check_decision_within,
};
