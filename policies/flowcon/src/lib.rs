//! `flowcon`: FlowCon (W. Zheng, "Efficient Resource Management for Deep Learning
//! Applications with Virtual Containers", master's thesis, chapter 5.1, Algorithms 1-2),
//! with the readings of its ambiguous parts given below.
//!
//! Per worker, every `itval` seconds: progress P = |E(t_i) - E(t_{i-1})| / (t_i -
//! t_{i-1}) on the normalised evaluation value E, growth efficiency G = P / R with R the
//! job's CPU in cores (its tasks' measured usage when known, else their requests); lists
//! NL -> WL -> CL while G < alpha, back to NL when G >= alpha. All jobs in CL: every
//! limit 1 and the worker's itval doubles (exponential back-off). Otherwise CL limit =
//! max(G / sum G, 1 / (beta n)), WL unchanged, NL 1. A limit L is a fraction of the
//! worker, as `docker update --cpus` sets it (section 5.1.1); it is sent as the
//! `set-cpu-weight` that gives the job the share L gives it under Docker (soft limits:
//! weighted sharing, a job that does not use its share leaves it to the others).
//! Listener (Algorithm 2): a job arriving or leaving (`job-arrived` / `job-finished`, a
//! job placed in the round, or a worker's set of jobs changing) resets itval to its
//! initial value and re-runs Algorithm 1 at once, with the new job in NL. Labels:
//! `list=NL|WL|CL`.
//!
//! Interpretations and deviations:
//! 1. FlowCon does not place jobs (Docker runs them where they are started); so that
//!    jobs run at all, waiting tasks are placed like the baseline: pod by pod,
//!    least-allocated (`placement::pod_by_pod`).
//! 2. NL limit is 1 (the notes and the evaluation: a new job at 1 while an older one
//!    is held at 0.25), not line 26's G / sum G. Limits are clamped to (0, 1].
//! 3. E is normalised (`normalisation = initial | max`, as SpeCon); P is per second and R
//!    in cores, so alpha is "normalised progress per second per core" (default 0.01).
//!    The thesis does not give R's unit, so its alpha values (1 % to 15 %) do not carry
//!    over: with R in cores a job's G does not depend on how many cores it gets when its
//!    speed-up is linear.
//! 4. A job's first round has no previous E: it stays in NL (new) with limit 1. sum G
//!    runs over the worker's jobs that have a G.
//! 5. A job lives on its first task's node; all its tasks get its weight. The listener
//!    resets every worker on an arrival or departure trigger (the snapshot does not
//!    say where a departed job ran), and a worker whose set of jobs changed.
//! 6. Limits become weights (the notes: a CPU weight, not a CFS quota). Under Docker a
//!    container limited to L of the worker gets min(L, its equal split of what the
//!    limited ones leave) (section 6.1.3: limits 0.25 and 1 give 25 % and 75 %); the
//!    limit itself as a weight would give 20 % and 80 %, and far less than L when several
//!    jobs are at 1. So the weight sent is that Docker share ([`policy::docker_shares`],
//!    computed as if every job could use the whole worker), scaled so the largest is 1.
//!    `limits = weight` sends L itself instead. The policy keeps each job's limit in its
//!    state: WL keeps the one it had (1, from NL, by item 2), not the snapshot's weight.
//!    A weight is only sent when it differs from the task's current one.
//! 7. R is the usage the snapshot reports at the call, not its average over the
//!    interval: the snapshot carries no usage history. Shares only change at the calls
//!    that arrivals and departures trigger, so the two differ only right after a job
//!    leaves.
//! 8. `spare_capped` (default true; not in the thesis): a job seen using less than an
//!    equal split of its worker while unlimited is capped by its own parallelism (the
//!    thesis's LSTM-CFC uses 19 % of the worker alone). While it stays under an equal
//!    split, a CL limit does not hold it below that usage ([`policy::cl_limit`]): the
//!    progress a limit takes from such a job cannot be made up later, because it runs no
//!    faster when the worker empties, so where it ends the schedule every core-second
//!    taken lengthens the makespan the thesis says FlowCon keeps (on the 5-job examples
//!    the thesis's floor alone costs up to 4.6 % of makespan). A job that can use more
//!    than an equal split is limited as the thesis says. `spare_capped = false` is the
//!    thesis's floor alone.

pub mod memory;
pub mod policy;

switchyard_policy_sdk::policy_binding!(FlowconPolicy, policy);
