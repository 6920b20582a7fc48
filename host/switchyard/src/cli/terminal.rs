//! Text from elsewhere made safe to print on a terminal: every command's text output
//! passes foreign strings (job ids, policy names and reasons, labels, error messages
//! from a controller, a recording or a workload) through [`escaped`], the host's one
//! escaping function (`switchyard_core::printable`, which the controller's log uses
//! too). It must not shorten, pad or otherwise format text, which the printers do.

pub(crate) use switchyard_core::printable as escaped;
