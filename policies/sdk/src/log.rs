//! The host's `log` import. In a native build (unit tests, benches) there is no host to
//! call: lines go to standard error when `SWITCHYARD_POLICY_LOG` is set, and are dropped
//! otherwise, as the host drops debug lines by default. Writing them unconditionally
//! made native benchmarks measure the terminal rather than the policy.

use crate::bindings::switchyard::policy::host::LogLevel;

/// Writes one line to the controller's log at `level`.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::switchyard::policy::host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    if native_log_enabled() {
        eprintln!("[policy {level:?}] {message}");
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn native_log_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("SWITCHYARD_POLICY_LOG").is_some())
}

/// Logs at `info`.
pub fn info(message: &str) {
    log(LogLevel::Info, message);
}

/// Logs at `debug`.
pub fn debug(message: &str) {
    log(LogLevel::Debug, message);
}

/// Logs at `warn`.
pub fn warn(message: &str) {
    log(LogLevel::Warn, message);
}
