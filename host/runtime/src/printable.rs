//! Text a policy wrote, made safe to put in the host's log: the host's one escaping
//! function (`switchyard_core::printable`: control characters, line separators and
//! bidirectional controls shown escaped), used by the sandbox's log and output capture,
//! the log budget and the module's errors.

pub(crate) use switchyard_core::printable;
