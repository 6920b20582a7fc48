//! The `switchyard` command: wires the library's pieces to the command line.

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than glibc's allocator: every round builds, diffs and drops a
/// snapshot made of thousands of small strings and vectors (see `docs/performance.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    restore_default_sigpipe();
    disable_transparent_huge_pages();
    purge_freed_memory_at_once();
    let args = cli::Cli::parse();
    let live = matches!(args.command, cli::Command::Run(_));
    cli::init_tracing(args.log_json, live);
    match cli::run(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", explain(&error));
            ExitCode::FAILURE
        }
    }
}

/// Rust ignores SIGPIPE, so `switchyard simulate ... | head` would panic on the first
/// write after `head` exits; a command-line tool should just stop, as `cat` does.
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; setting a signal's
    // disposition to the default has no other precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// mimalloc asks the kernel for transparent huge pages on its arenas, and a huge page is
/// resident whole as soon as one byte of it is used. The controller's heap is many small
/// objects kept for a job's life, interleaved with what each round builds and drops, so
/// after a burst of rounds huge pages keep far more resident than is live; with the
/// kernel's ordinary pages the same work takes the same CPU time (see
/// `docs/performance.md`, "Controller footprint"). The flag is the process's own and its
/// children's; a kernel without it leaves things as they were.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE sets a flag on this process and touches no memory of
    // ours; the unused arguments are zero, as the call requires.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// mimalloc hands freed pages back to the kernel a second after they became free, so the
/// buffers of a burst of rounds (a controller catching up) stay resident while the next
/// rounds allocate beside them. Handing them back at once keeps the resident set near
/// what is live, at no CPU cost measured on the Philly replay (`docs/performance.md`,
/// "Controller footprint"). An operator's `MIMALLOC_PURGE_DELAY` still decides.
fn purge_freed_memory_at_once() {
    /// `mi_option_purge_delay` of mimalloc's `mi_option_e`, whose values mimalloc keeps
    /// from version to version (a retired option keeps its place).
    const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
    unsafe extern "C" {
        /// mimalloc's `mi_option_set`, from the library `ALLOCATOR` links in.
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's options may be set at any time from any thread; the option
        // is a valid `mi_option_e` and 0 a valid delay.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
    }
}

/// The error and its causes, each cause only when the message before it does not
/// already quote it: the library's errors usually name their source themselves (so they
/// read whole in the API's JSON too), and `{:#}` would say it twice.
fn explain(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
