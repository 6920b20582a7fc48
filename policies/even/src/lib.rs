//! `even`: SpeCon's baseline "DS" (Mao et al., "Speculative Container Scheduling for Deep
//! Learning Applications in a Kubernetes Cluster", section VI-A): the default
//! scheduler with "a fixed initial container placement, where workload are evenly
//! distributed based on the number of containers", and nothing ever again.
//!
//! The k-th arriving job (k from 0, in submission order, counted over the policy's whole
//! life in its state blob) goes to worker `k mod |W|`, workers in snapshot node order.
//! All of a job's tasks go onto that one worker.
//!
//! Interpretations and deviations:
//! - the paper does not say what happens when the chosen worker is full; the job goes
//!   to the next worker round the ring that has room for all its tasks, and waits (for
//!   the next arrival or departure) when none has;
//! - a multi-task job whose tasks fit on no single worker is packed onto the fewest
//!   nodes, all or nothing (the paper only runs single-container jobs);
//! - a job that already has tasks on a node (e.g. scaled by an operator) gets its
//!   missing tasks on that node when they fit;
//! - no migration, CPU weight or scaling, ever; no `next-call-after` (the host calls on
//!   every arrival and departure, which is when placement can change).
//!
//! The algorithm is [`switchyard_policy_sdk::spread::EvenSpread`], shared with
//! SpeCon, whose evaluation uses the same initial placement; [`policy`] wires it to a
//! decision and lib.rs only binds it to the WIT world.

pub mod policy;

switchyard_policy_sdk::policy_binding!(EvenPolicy, policy);
