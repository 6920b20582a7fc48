//! What a policy instance may touch: the per-call store state with its memory limiter,
//! a locked-down WASI context (no files, network, environment or arguments; virtual
//! clocks at the snapshot's time; randomness seeded from the call), and the `log` import
//! with its per-call cap (and, for a call made through a session, the policy's log
//! budget over time, whose account `log_budget.rs` keeps).

use std::time::Duration;

use rand_core::SeedableRng;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use crate::contract::bindings::switchyard::policy::host::{Host, LogLevel};
use crate::contract::bindings::switchyard::policy::types;
use crate::error::CallDeadline;
use crate::limits::{LogRate, ResultBudget};
use crate::log_budget::PolicyLog;
use crate::printable::printable;

/// How much a guest may print to stdout/stderr in one call before the rest is dropped.
const GUEST_OUTPUT_CAPACITY: usize = 64 * 1024;

/// Everything one policy call's store holds.
pub(crate) struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryCap,
    policy_name: String,
    stderr: MemoryOutputPipe,
    /// Bytes of `stderr` printed by earlier calls of a kept instance.
    output_mark: usize,
    /// What this call may still write through `log`.
    log: LogBudget,
    /// What the policy may still log over time, and its rate, when the call is made
    /// through a session; without one only the per-call cap applies.
    over_time: Option<(PolicyLog, LogRate)>,
    /// The cluster time of the current call.
    time: f64,
    /// The deadline the current call runs under, for the error that names it.
    pub(crate) deadline: CallDeadline,
}

/// What one call may still write through the `log` import, and what it wrote past
/// that.
struct LogBudget {
    lines: usize,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
    dropped_lines: u64,
    dropped_bytes: u64,
}

impl LogBudget {
    fn new(max_lines: usize, max_bytes: usize) -> Self {
        Self {
            lines: 0,
            bytes: 0,
            max_lines,
            max_bytes,
            dropped_lines: 0,
            dropped_bytes: 0,
        }
    }

    /// Whether a line of `len` bytes still fits; counts it either way.
    fn admit(&mut self, len: usize) -> bool {
        if self.lines < self.max_lines && self.bytes.saturating_add(len) <= self.max_bytes {
            self.lines += 1;
            self.bytes += len;
            true
        } else {
            self.dropped_lines += 1;
            self.dropped_bytes += len as u64;
            false
        }
    }
}

impl GuestState {
    /// A fresh sandbox for one call made at `time` (snapshot seconds), seeded by `seed`.
    pub(crate) fn new(
        policy_name: &str,
        memory_limit: usize,
        budget: &ResultBudget,
        time: f64,
        seed: u64,
    ) -> Self {
        let stderr = MemoryOutputPipe::new(GUEST_OUTPUT_CAPACITY);
        Self {
            wasi: wasi_ctx(&stderr, time, seed),
            table: ResourceTable::new(),
            limiter: MemoryCap {
                limit: memory_limit,
                refused: false,
                grown_to: 0,
            },
            policy_name: policy_name.to_string(),
            stderr,
            output_mark: 0,
            log: LogBudget::new(budget.log_lines, budget.log_bytes),
            over_time: None,
            time,
            deadline: CallDeadline::Round(Duration::ZERO),
        }
    }

    /// Holds this call's log, and every later call's on this store, to `log` as well as
    /// to the per-call cap.
    pub(crate) fn log_over_time(&mut self, log: &PolicyLog, rate: LogRate) {
        log.refill(self.time, rate);
        self.over_time = Some((log.clone(), rate));
    }

    /// Readies a kept instance's store for its next call: the clocks move to `time`,
    /// randomness is seeded anew and only what the guest prints from now on counts.
    /// Resources the guest opened (its stdout stream) stay valid: they write to the
    /// same pipe.
    pub(crate) fn begin_call(&mut self, time: f64, seed: u64) {
        self.wasi = wasi_ctx(&self.stderr, time, seed);
        self.limiter.refused = false;
        self.output_mark = self.stderr.contents().len();
        self.log = LogBudget::new(self.log.max_lines, self.log.max_bytes);
        self.time = time;
        if let Some((log, rate)) = &self.over_time {
            log.refill(time, *rate);
        }
    }

    /// Closes a call: what the guest logged past its budgets is summarised in one line,
    /// per call, or per minute when the call was held to a budget over time (a line per
    /// call would itself be a log without bound).
    pub(crate) fn end_call(&mut self) {
        let log = &self.log;
        if let Some((over_time, rate)) = &self.over_time {
            over_time.count_dropped(log.dropped_lines, log.dropped_bytes);
            over_time.report(
                &self.policy_name,
                self.time,
                *rate,
                (log.max_lines, log.max_bytes),
            );
            return;
        }
        if log.dropped_lines > 0 {
            tracing::warn!(
                policy = %printable(&self.policy_name),
                dropped_lines = log.dropped_lines,
                dropped_bytes = log.dropped_bytes,
                "the policy logged past its budget of {} lines and {} bytes per call; the rest of its log in this call was dropped",
                log.max_lines,
                log.max_bytes
            );
        }
    }

    /// True when the guest has printed so much over its calls that the next call's
    /// output might not fit: such an instance is not kept.
    pub(crate) fn output_nearly_full(&self) -> bool {
        self.stderr.contents().len() > GUEST_OUTPUT_CAPACITY / 2
    }

    /// True when the instance's linear memory has grown past three quarters of its cap:
    /// such an instance is not kept. A Wasm memory never shrinks, and an engine whose
    /// heap creeps up from call to call (SpiderMonkey in a componentize-js policy,
    /// `docs/performance.md`) would otherwise fail a round at the cap, for
    /// the fallback to decide; a fresh instance, primed under the priming deadline, is
    /// the cheaper round.
    pub(crate) fn memory_nearly_full(&self) -> bool {
        self.limiter.grown_to > self.limiter.limit / 4 * 3
    }

    /// The limiter the store consults before any memory or table growth.
    pub(crate) fn limiter(&mut self) -> &mut MemoryCap {
        &mut self.limiter
    }

    /// True when the guest asked for memory past its cap during this call.
    pub(crate) fn memory_refused(&self) -> bool {
        self.limiter.refused
    }

    /// What the guest printed (a Rust panic message, for instance).
    pub(crate) fn guest_output(&self) -> String {
        let contents = self.stderr.contents();
        printable(String::from_utf8_lossy(&contents[self.output_mark.min(contents.len())..]).trim())
            .into_owned()
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// WASI as a policy sees it: no files, network, environment or arguments; clocks stand
/// at `time`; randomness seeded by `seed`; stdout and stderr captured in `output`.
fn wasi_ctx(output: &MemoryOutputPipe, time: f64, seed: u64) -> WasiCtx {
    let mut builder = WasiCtx::builder();
    builder
        .stdout(output.clone())
        .stderr(output.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .wall_clock(VirtualClock::at(time))
        .monotonic_clock(VirtualClock::at(time))
        .secure_random(rand_pcg::Pcg64Mcg::seed_from_u64(seed))
        .insecure_random(rand_pcg::Pcg64Mcg::seed_from_u64(seed ^ 0x5eed))
        .insecure_random_seed(u128::from(seed));
    builder.build()
}

/// The `types` interface has no functions; the impl only satisfies the linker's bound.
impl types::Host for GuestState {}

impl Host for GuestState {
    fn log(&mut self, level: LogLevel, message: String) {
        if !self.log.admit(message.len()) {
            return;
        }
        if let Some((over_time, _)) = &self.over_time
            && !over_time.admit(message.len())
        {
            return;
        }
        let policy = printable(&self.policy_name);
        let policy = policy.as_ref();
        let message = printable(&message);
        match level {
            LogLevel::Trace => tracing::trace!(policy, "{message}"),
            LogLevel::Debug => tracing::debug!(policy, "{message}"),
            LogLevel::Info => tracing::info!(policy, "{message}"),
            LogLevel::Warn => tracing::warn!(policy, "{message}"),
            LogLevel::Error => tracing::error!(policy, "{message}"),
        }
    }
}

/// Caps linear memory; remembers a refusal so the host can report it as out-of-memory
/// rather than as whatever trap the guest's allocator turns it into.
pub(crate) struct MemoryCap {
    limit: usize,
    refused: bool,
    /// The largest size any memory of the instance was allowed to grow to.
    grown_to: usize,
}

/// Tables (function references) are small in practice; this bounds a hostile guest.
pub(crate) const TABLE_ELEMENT_LIMIT: usize = 100_000;

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.limit;
        self.refused |= !allowed;
        if allowed {
            self.grown_to = self.grown_to.max(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENT_LIMIT)
    }
}

/// A clock that stands still at the snapshot's time, so a policy that reads the time
/// gets the same answer on every replay.
struct VirtualClock {
    since_epoch: Duration,
}

impl VirtualClock {
    fn at(time: f64) -> Self {
        Self {
            since_epoch: Duration::from_secs_f64(time.max(0.0)),
        }
    }
}

impl HostWallClock for VirtualClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        self.since_epoch
    }
}

impl HostMonotonicClock for VirtualClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        self.since_epoch.as_nanos() as u64
    }
}
