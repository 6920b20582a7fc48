//! `gang`: gang scheduling for distributed jobs (`gang-scheduler-thesis.txt`, section 4.5),
//! in two modes as `guide/seeds-notes.md` asks.
//!
//! - [`strict`] (`mode = strict`, default): a job's minimum gang (every task of its
//!   non-scalable roles plus `replicas.min` of its scalable role) is placed together in
//!   one `place` action, packed onto the fewest nodes, or not at all; no partial gang
//!   ever holds resources. Jobs are taken by submit time. Replicas above the minimum
//!   follow one by one as they fit, in the same round or later.
//! - [`thesis`] (`mode = thesis`): the thesis's three plugin changes (queue by job
//!   creation time then pod name; role filter; node score 0/100), pod by pod.
//! - [`policy`]: parameters, mode selection, labels (`gang=placed|waiting|...`).
//!
//! Interpretations and deviations:
//! 1. Strict mode, head of line: like Volcano and coscheduling, a later job that fits
//!    goes ahead of an earlier one that does not (backfill). To keep the earlier job
//!    from starving, once it has waited longer than `starve-after` seconds (default
//!    300) nothing behind it is placed until it is: the cluster drains towards it as
//!    jobs finish. A gang that does not fit even on the empty cluster never blocks.
//! 2. Strict mode places a minimum gang with the SDK's `Ledger::pack_gang` (fewest
//!    nodes), the locality the thesis's score aims at. Tasks already bound count towards
//!    the minimum: a job that runs part of it gets the missing members as one gang.
//! 3. Strict mode, extra replicas (above `replicas.min`) are backfill: they are placed
//!    after every minimum gang of the round, oldest job first, one by one on the job's
//!    nodes first, with whatever room the gangs left, and not at all while a starving
//!    gang holds the head of the queue (item 1). Strict mode never scales down, so an
//!    extra placed while a younger gang waits keeps its room until its job ends;
//!    `starve-after` bounds how long that can hold a gang back.
//! 4. Thesis mode, creation time = the job's submit time (when its first pod was
//!    queued); pod name = `<job>-<task>`.
//! 5. Thesis mode, role filter: the snapshot lists every task of a job from submission,
//!    so the roles a job needs come from its `roles` label (comma-separated, e.g.
//!    `scheduler,ps,worker`) when it has one, else its scalable role plus the roles its
//!    tasks name; the filter passes when each has at least one task.
//! 6. Thesis mode, ties between equally scored nodes go to snapshot order
//!    (kube-scheduler picks at random among them; a policy must be deterministic). The
//!    default filters the thesis keeps are the resource fit.
//! 7. Strict mode, pods created role by role: a job whose `tasks` label (its total task
//!    count, set by the workload loader for every distributed job: its non-scalable
//!    tasks plus `replicas.current`) says members of its minimum gang do not exist yet
//!    is `incomplete` and waits without blocking the queue; extras may appear later.
//!    Without the label the gang is whatever tasks exist.
//! 8. Neither mode migrates, scales or weighs anything; both are stateless.

pub mod policy;
pub mod strict;
pub mod thesis;

switchyard_policy_sdk::policy_binding!(GangPolicy, policy);
