//! An allocator that counts, per thread, the bytes live and the most that were live
//! since a reset ([`CountingAllocator`], [`live_bytes`], [`peak_growth`]): a test's memory
//! figure is what its own thread allocated, not a resident-set size that depends on the
//! allocator's habits or on the tests running beside it. It also counts the bytes live
//! in the whole process ([`process_live_bytes`]), for a measure of what tasks hold on
//! threads of their own (a tokio runtime's workers); such a figure counts every thread,
//! so only a binary that runs one measurement at a time may read it. A test binary
//! installs the allocator with `#[global_allocator]`; without that the counters stay at
//! 0. It decides no bound: each test states its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator, counting per thread. Install it in a test binary:
/// `#[global_allocator] static ALLOCATOR: CountingAllocator = CountingAllocator;`.
pub struct CountingAllocator;

thread_local! {
    /// Bytes allocated and not yet freed by this thread.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The most `LIVE` reached since [`peak_growth`] last reset it.
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Bytes allocated and not yet freed by every thread of the process.
static PROCESS_LIVE: AtomicIsize = AtomicIsize::new(0);

fn count(bytes: isize) {
    PROCESS_LIVE.fetch_add(bytes, Ordering::Relaxed);
    // A thread being torn down has no counter left; what it frees then is not ours.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + bytes;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is passed to the system allocator unchanged; counting touches
// thread-local cells and one atomic only, and allocates nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes this thread has allocated and not freed, now.
pub fn live_bytes() -> isize {
    LIVE.with(Cell::get)
}

/// Bytes every thread of the process has allocated and not freed, now.
pub fn process_live_bytes() -> isize {
    PROCESS_LIVE.load(Ordering::SeqCst)
}

/// What `f` returns, and the most this thread held above what it held before while `f`
/// ran.
pub fn peak_growth<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = live_bytes();
    PEAK.with(|peak| peak.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, usize::try_from(peak - base).unwrap_or(0))
}
