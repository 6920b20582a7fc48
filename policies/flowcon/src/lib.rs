//! `flowcon`: FlowCon (`flowcon-specon-thesis.txt`, chapter 5.1, Algorithms 1-2), read
//! as `guide/seeds-notes.md` says.
//!
//! Per worker, every `itval` seconds: progress P = |E(t_i) - E(t_{i-1})| / (t_i -
//! t_{i-1}) on the normalised evaluation value E, growth efficiency G = P / R with R the
//! job's CPU in cores (its tasks' measured usage when known, else their requests); lists
//! NL -> WL -> CL while G < alpha, back to NL when G >= alpha. All jobs in CL: every
//! weight 1 and the worker's itval doubles (exponential back-off). Otherwise CL weight =
//! max(G / sum G, 1 / (beta n)), WL unchanged, NL 1. Weights are `set-cpu-weight`
//! (soft limits: weighted sharing). Listener (Algorithm 2): a job arriving or leaving
//! (`job-arrived` / `job-finished`, or a worker's set of jobs changing) resets itval to
//! its initial value and re-runs Algorithm 1 at once. Labels: `list=NL|WL|CL`.
//!
//! Interpretations and deviations:
//! 1. FlowCon does not place jobs (Docker runs them where they are started); so that
//!    jobs run at all, waiting tasks are placed like the baseline: pod by pod,
//!    least-allocated (`placement::pod_by_pod`).
//! 2. NL weight is 1 (the notes and the evaluation: a new job at 1 while an older one
//!    is held at 0.25), not line 26's G / sum G. Weights are clamped to (0, 1].
//! 3. E is normalised (`normalisation = initial | max`, as SpeCon); P is per second and R
//!    in cores, so alpha is "normalised progress per second per core" (default 0.01).
//! 4. A job's first round has no previous E: it stays in NL (new) with weight 1. sum G
//!    runs over the worker's jobs that have a G.
//! 5. A job lives on its first task's node; all its tasks get its weight. The listener
//!    resets every worker on an arrival or departure trigger (the snapshot does not
//!    say where a departed job ran), and a worker whose set of jobs changed.
//! 6. The `cpu-weight` the snapshot reports is the "unchanged" WL limit; a weight is
//!    only sent when it differs from the task's current one.

pub mod policy;

switchyard_policy_sdk::policy_binding!(FlowconPolicy, policy);
