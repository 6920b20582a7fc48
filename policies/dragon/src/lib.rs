//! `dragon`: DRAGON (Lin, Yeh and Chou, "DRAGON: A Dynamic Scheduling and Scaling
//! Controller for Managing Distributed Deep Learning Jobs in Kubernetes Cluster", CLOSER
//! 2019, section 3.3), with the "Dynamic Resource Scheduler for Distributed Deep Learning
//! Training on Kubeflow" as `queue = utility`.
//!
//! Called on every arrival and departure and on its own alarms (`next-call-after`: the
//! next job to turn urgent, the next idle resource to reach mu), each round runs:
//! 1. scale-down: for the smallest urgent job (waited longer than `tau`), scale running
//!    jobs down, most surplus replicas above their minimum first, one replica at a
//!    time, just until its gang fits; no full plan, no action;
//! 2. adapted FCFS: every waiting job that fits the residual capacity, in queue order,
//!    all its tasks in one `place`, packed onto the fewest nodes (`Ledger::pack_gang`);
//! 3. scale-up: on a node whose idle resources have been usable for `mu` seconds, add
//!    replicas (up to max) to running jobs that already have tasks on that node
//!    (`scale` with one node entry per added replica).
//!
//! Modules: [`controller`] (the procedures), [`idle`] (the idle clock), [`policy`]
//! (parameters, state, labels `state=waiting|urgent|running`), [`task_nodes`] (where
//! the tasks run, kept between calls).
//!
//! Interpretations and deviations:
//! 1. "Smallest" job = fewest GPUs, then CPU, then memory of all its tasks.
//! 2. Shrinking stops the highest-numbered replicas (the WIT's rule), so the plan frees
//!    exactly those tasks' requests; the urgent job is placed in the same round, after
//!    the scale actions, on the capacity they free.
//! 3. A resource is "idle" when some running job on that node could use it (one more
//!    replica of its scalable role fits there); the clock restarts when that stops being
//!    true and after each scale-up. A job being scaled down is not scaled up in the same
//!    round. Jobs that cannot checkpoint are never scaled.
//! 4. Adapted FCFS continues past a job that does not fit (the paper: "the first arrival
//!    job ... whose required resource capacity is less than the residual capacity",
//!    applied repeatedly).
//! 5. `queue = utility`: the queue is ordered by utility (higher first; ties: larger
//!    CPU cores + memory GiB first); the scale-down candidate is the head of the queue
//!    when its utility exceeds every running job's (no tau), and only lower-utility
//!    jobs shrink; placement uses the same fewest-nodes packing (the article: one node
//!    when it fits, otherwise the first nodes available; the packing does that).
//! 6. Defaults tau = 120 s and mu = 60 s are ours: the paper gives no values.
//! 7. `scaling = false` turns off steps 1 and 3: the paper's "locality-aware scheduler"
//!    baseline ("DRAGON without the feature of auto-scaling", greedy packing).

pub mod controller;
pub mod idle;
pub mod policy;
pub mod task_nodes;

switchyard_policy_sdk::policy_binding!(DragonPolicy, policy);
