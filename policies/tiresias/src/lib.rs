//! `tiresias`: Tiresias's discretized two-dimensional least-attained-service scheduler
//! (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning",
//! NSDI 2019), the preemptive scheduler that proves contract 0.2 can express one.
//!
//! A job's attained service is its width (GPUs, or CPU cores for a job without GPUs)
//! times the time it has run. Jobs start in the highest-priority queue and move down a
//! queue each time their service passes that queue's threshold (`queue_thresholds`).
//! Every round the jobs are ranked by queue, then by when they entered it (first come,
//! first served within a queue), and admitted in that order while the cluster's capacity
//! lasts; a running job that is no longer admitted is preempted (checkpointed, its nodes
//! released) so the jobs ranked above it can run, and a waiting job that is admitted is
//! placed as soon as its whole gang fits.
//!
//! - [`queues`]: the per-job bookkeeping (service, demotion, the starvation rule) and
//!   the ranking, with no cluster in sight;
//! - [`facts`]: what a round reads of a job's tasks, read again only when it changes;
//! - [`policy`]: the decision: admission, preemption, placement, labels;
//! - [`blob`]: the state blob, a job's entry copied from the last blob when unchanged.
//!
//! Interpretations and deviations (each a choice the paper leaves open):
//! 1. Defaults follow the artifact's simulator as the Pollux artifact ships it: two
//!    queues split at 57,600 GPU-seconds (16 GPU-hours), no starvation rule, a round
//!    every 60 s; the paper's evaluation uses the same two-queue form.
//! 2. The starvation rule (the paper's `PROMOTEKNOB`): a job that has run before and
//!    has waited, since it last ran, at least `promote_knob` times its service time in
//!    its current queue goes back to the top queue with that time reset; 0 turns it off.
//! 3. Admission counts every resource (CPU, memory, GPUs) of the schedulable nodes, not
//!    GPUs alone, so CPU-only workloads are ranked the same way; placement packs the
//!    gang onto the fewest nodes (the SDK's `Ledger::pack_gang`, which also keeps each
//!    task inside the nodes it may run on), while the artifact fills the node with the
//!    most free GPUs first; both put a gang on as few nodes as they can.
//! 4. A preempted job keeps its nodes until its checkpoint is saved; the jobs it made
//!    room for are placed when the host says it released them (`job-preempted`), so
//!    nothing is placed on capacity that is not free yet.
//! 5. Jobs that cannot checkpoint are never preempted: their resources are set aside
//!    before the others are ranked.
//! 6. Each job carries the label `tiresias.queue=Q<k>` (0 is the highest priority).

pub mod blob;
pub mod facts;
pub mod policy;
pub mod queues;

switchyard_policy_sdk::policy_binding!(TiresiasPolicy, policy);
