//! Text a policy wrote, made safe to put in the host's log: one function, used by the
//! sandbox's log and output capture, the log budget and the module's errors.

use std::borrow::Cow;

/// `text` with its control characters escaped (`\n` for a newline), so nothing a policy
/// writes can start a line of the host's log or forge one.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}
