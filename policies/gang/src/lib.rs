//! `gang`: gang scheduling for distributed jobs (F.-L. Lövenvald, "Comparing a Gang-like
//! Scheduler with the Default Kubernetes Scheduler in a Serverless Deep Learning Training
//! Environment", master's thesis, Umeå University, 2021, section 4.5), in two modes.
//!
//! - [`strict`] (`mode = strict`, default): a job's minimum members (all its tasks: see
//!   below why that is the minimum) are placed together in one `place` action, packed
//!   onto the fewest nodes, or not at all; no partial gang ever holds resources. Jobs
//!   are taken by submit time.
//! - [`thesis`] (`mode = thesis`): the thesis's three plugin changes (queue by job
//!   creation time then pod name; role filter; node score 0/100), pod by pod.
//! - [`policy`]: parameters, mode selection, labels (`gang=placed|waiting|...`);
//! - [`memory`]: strict mode's memory of each job between calls, and its blob.
//!
//! Interpretations and deviations:
//! 1. Strict mode, head of line: like Volcano and coscheduling, a later job that fits
//!    goes ahead of an earlier one that does not (backfill). To keep the earlier job
//!    from starving, once it has waited longer than `starve-after` seconds (default
//!    300) nothing behind it is placed until it is: the cluster drains towards it as
//!    jobs finish. A gang that does not fit even on the empty cluster never blocks.
//! 2. Strict mode places a gang with the SDK's `Ledger::pack_gang` (fewest nodes), the
//!    locality the thesis's score aims at; a job that already runs some tasks gets its
//!    pending ones as one gang too.
//! 3. Thesis mode, creation time = the job's submit time (when its first pod was
//!    queued); pod name = `<job>-<task>`.
//! 4. Thesis mode, role filter: the snapshot lists every task of a job from submission,
//!    so the roles a job needs come from its `roles` label (comma-separated, e.g.
//!    `scheduler,ps,worker`) when it has one, else its scalable role plus the roles its
//!    tasks name; the filter passes when each has at least one task.
//! 5. Thesis mode, ties between equally scored nodes go to snapshot order
//!    (kube-scheduler picks at random among them; a policy must be deterministic). The
//!    default filters the thesis keeps are the resource fit.
//! 6. Strict mode, pods created role by role: a job whose `tasks` label (its total task
//!    count, set by the workload loader for every distributed job) exceeds the tasks in
//!    the snapshot is `incomplete` and waits without blocking the queue; without the
//!    label the gang is whatever tasks exist, as before.
//! 7. Neither mode migrates, scales or weighs anything; both decide from the snapshot
//!    alone (the state blob only remembers the labels shown, see `policy`).
//! 8. Strict mode, the minimum members are every task the job has now, not
//!    `replicas.min` of its scalable role. In this contract a job's replica count
//!    changes only by a `scale` action, which restarts it from a checkpoint (DRAGON's
//!    elasticity); a parameter-server job started with `current` workers waits for all
//!    of them (the simulator makes no progress until every task is bound, as a TF
//!    cluster spec does). Placing only `min` of them would be exactly the partial gang
//!    that holds resources without running. `replicas.min` is the floor a scaling
//!    policy may shrink the job to; a gang scheduler does not scale.

pub mod memory;
pub mod policy;
pub mod strict;
pub mod thesis;

switchyard_policy_sdk::policy_binding!(GangPolicy, policy);
