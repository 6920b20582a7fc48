//! Text from elsewhere made safe to show a person: the one function every printer and
//! the host's log pass foreign strings through (what a policy writes, job ids, names and
//! labels from a recording or a workload, a controller's messages). It owns what counts
//! as unsafe and how it is shown; it must not shorten, pad or otherwise format text.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every character that could act on the terminal or hide what it follows
/// shown escaped, as Rust writes it in a string (`\u{1b}`, `\r`, `\n`, `\t`): control
/// characters (C0, DEL and C1, so ESC and the CSI and OSC introducers), line and
/// paragraph separators, and the bidirectional controls that reorder what is shown
/// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069). Anything else is unchanged,
/// backslashes included: an escape here marks a character that was there, and a
/// backslash cannot move the cursor.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_to_print) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_to_print(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn unsafe_to_print(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::printable as escaped;

    #[test]
    fn plain_text_is_printed_as_it_is() {
        let text = "resnet-12 → gpu-1 (C:\\data, 50 %)";
        assert!(matches!(escaped(text), std::borrow::Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn escape_sequences_cannot_reach_the_terminal() {
        assert_eq!(escaped("\u{1b}[2J\u{1b}[31mok"), "\\u{1b}[2J\\u{1b}[31mok");
        assert_eq!(
            escaped("\u{1b}]8;;http://x\u{7}link\u{1b}]8;;\u{7}"),
            "\\u{1b}]8;;http://x\\u{7}link\\u{1b}]8;;\\u{7}"
        );
        assert_eq!(escaped("\u{9b}2J"), "\\u{9b}2J");
    }

    #[test]
    fn a_carriage_return_or_newline_cannot_overwrite_or_add_a_line() {
        assert_eq!(escaped("fine\rFAILED\nround 9"), "fine\\rFAILED\\nround 9");
    }

    #[test]
    fn bidirectional_controls_are_shown_not_obeyed() {
        assert_eq!(escaped("job\u{202e}gpj.exe"), "job\\u{202e}gpj.exe");
        assert_eq!(escaped("\u{2066}a\u{2069}"), "\\u{2066}a\\u{2069}");
        assert_eq!(escaped("a\u{200f}b\u{061c}"), "a\\u{200f}b\\u{61c}");
    }
}
