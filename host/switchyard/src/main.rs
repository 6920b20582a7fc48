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
