//! The host's `log` import. In a native build (unit tests, benches) there is no host to
//! call, so lines go to standard error instead.

use crate::bindings::switchyard::policy::host::LogLevel;

/// Writes one line to the controller's log at `level`.
pub fn log(level: LogLevel, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::switchyard::policy::host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[policy {level:?}] {message}");
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
