//! [`Cluster`] (and [`LiveCluster`]) for a real Kubernetes cluster: the control loop's
//! clock is the wall clock, `advance` waits for watch events (job arrivals and
//! completions, node changes) or the policy's next tick, the snapshot comes from the
//! reflectors' caches, and accepted actions go to [`Actor`]. While it waits, the leader
//! also drives gangs and restarts ([`drive`](self::drive): members lost, placements
//! refused, staged restarts carried on), writes each job's new loss samples to its
//! status, and follows training logs ([`logs`](self::logs)), which with the API's
//! acknowledgements ([`checkpoints`](self::checkpoints)) tell it when a job's checkpoint
//! is complete; it does as much for the jobs it adopted ([`adopted`](self::adopted)).
//! Only the leader
//! ([`Leader`]) does any of that, or acts; a follower's `advance` just waits. The
//! control loop is synchronous, so it runs on a blocking thread and this type enters
//! the tokio runtime through a [`Handle`].

mod adopted;
mod adopted_grow;
mod adopted_scaling;
mod checkpoints;
mod controller;
mod drive;
mod logs;
mod pass;
mod traits;

pub use self::controller::{Clock, KubeCluster};
pub use self::logs::{LOSS_WRITE_EVERY, follow_log};
