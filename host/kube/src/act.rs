//! Carrying out accepted actions through the API server, and keeping each job's status.
//! One module per action:
//!
//! - [`place`](self::place): the policy decides, kube-scheduler binds. The job's pods
//!   are created held by the placement gate, then each is pinned to the node the policy
//!   chose (required node affinity on `metadata.name`) and its gate lifted, all of a
//!   gang or none; the scheduler binds them with its whole filter set, or refuses, and
//!   a refused gang is taken back ([`restart`](self::restart)).
//! - [`restart`](self::restart): migrations, rescales, preemptions and gang recoveries
//!   (a member failed, crash-looped, was evicted or deleted, or was refused by the
//!   scheduler), carried out in stages so that no grace period blocks the control loop:
//!   the restart is recorded in the status first (a controller that restarts half-way
//!   finishes it and never moves the job twice), checkpoints are asked for, and once the
//!   old pods are gone the replacements are made and released, or the job is queued
//!   again after a back-off.
//! - [`acknowledge`](self::acknowledge): checkpoint acknowledgements heard from the
//!   pods or the API; a restart whose every asked pod acknowledged deletes them at once,
//!   and each stop that asked for a checkpoint ends `CheckpointAcknowledged` or
//!   `CheckpointTimedOut` (status, condition and Event).
//! - [`resize`](self::resize): a CPU weight as an in-place resize of the training
//!   container's request.
//! - [`adopted`](self::adopted): the same release for the gated pods of a job another
//!   operator owns, its checkpoint request, and eviction (never a delete).
//! - [`adopted_resize`](self::adopted_resize): a CPU weight for an adopted pod, the same
//!   resize relative to its owner's template, told as Events on the owner.
//! - [`adopted_scale`](self::adopted_scale): an elastic adopted job scaled through its
//!   owner's `scale` subresource, the one write to an owner.
//! - [`told`](self::told): Events told once per object and occasion, whoever leads
//!   (the Event's name remembers it).
//! - [`status`](self::status): reading and writing the job's status (guarded by its
//!   resourceVersion), conditions, the policy's labels, and placements whose first
//!   write was lost.
//!
//! Every call goes through one [`Guard`] (a deadline and the leadership check), and
//! each action leaves a Kubernetes Event on the job with the policy's reason. This
//! module acts on what it is told; it must not check decisions (the validator did) or
//! read the caches (the caller hands it the job and its pods).

mod acknowledge;
mod actor;
mod adopted;
mod adopted_resize;
mod adopted_scale;
mod advance;
mod place;
mod recover;
mod resize;
mod restart;
mod status;
mod told;

pub use self::acknowledge::CHECKPOINTED_CONDITION;
pub(crate) use self::acknowledge::{CLOCK_SLACK, describe as describe_checkpoint, task_of_pod};
pub use self::actor::{
    Actor, CPU_WEIGHT_CONDITION, FAILED_CONDITION, PODS_CREATED_CONDITION,
    PODS_SCHEDULED_CONDITION, PodAck,
};
pub(crate) use self::adopted::{Eviction, Refusal};
pub(crate) use self::adopted_resize::{
    AdoptedWeight, AskedResize, resize_told, weight_not_offered,
};
pub(crate) use self::adopted_scale::OwnerScale;
pub use self::advance::RestartProgress;
pub(crate) use self::recover::GangLoss;
pub use self::restart::Migration;
pub(crate) use self::status::set_condition;
pub(crate) use self::told::Told;
