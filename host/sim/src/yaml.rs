//! Reading YAML files people write (workloads, expectations, fixtures) with errors that
//! point at the line, column and field at fault, so a typo is found without guessing.
//!
//! A file is read only when it is a regular file within the size limit, and its nesting
//! is measured before it is deserialised: the YAML parser's cost grows with the square
//! of the nesting depth, so a small file nested a hundred thousand levels deep would
//! hold the process for minutes. The measure walks the parser's own event stream (the
//! same parser serde reads with, so both see one structure) and stops at the first
//! event past the limit, which keeps its cost linear in the bytes read.

use std::mem::MaybeUninit;
use std::path::Path;

use serde::de::DeserializeOwned;
use unsafe_libyaml_norway as unsafe_yaml;

use crate::workload::InputLimits;

/// A YAML document that does not fit the type it should hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {}{message}", field_prefix(field))]
pub struct YamlError {
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// Path of the field at fault, e.g. `templates.vae.wrok`; empty when the fault is
    /// the document's shape (its nesting).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// `field `F`: ` before a message about field `F`, nothing when no field is at fault.
pub(crate) fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("field `{field}`: ")
    }
}

/// Deserialises `text`, nested at most `max_depth` levels, locating the first field
/// that does not fit.
pub(crate) fn from_str<T: DeserializeOwned>(text: &str, max_depth: usize) -> Result<T, YamlError> {
    check_depth(text, max_depth)?;
    let deserializer = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let (line, column) = inner.location().map_or((0, 0), |l| (l.line(), l.column()));
        YamlError {
            line,
            column,
            field,
            message: inner.to_string(),
        }
    })
}

/// The text of the YAML file at `path`: a regular file of at most `limits.yaml_bytes`
/// bytes, in UTF-8.
pub(crate) fn read_text(path: &Path, limits: &InputLimits) -> std::io::Result<String> {
    let bytes = switchyard_control::read_regular_file(path, limits.yaml_bytes)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text: {e}"),
        )
    })
}

/// The error of a YAML text longer than `limit` bytes, as a file that size is refused.
pub(crate) fn too_large(limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!("larger than the limit of {limit} bytes"),
    )
}

/// A YAML file that could not be read or does not fit.
#[derive(Debug, thiserror::Error)]
pub enum YamlLoadError {
    /// The file could not be read: missing, not a regular file, too large, not text.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not fit the type.
    #[error("{path}:{source}")]
    Parse {
        /// The file.
        path: std::path::PathBuf,
        /// Where and what.
        #[source]
        source: YamlError,
    },
}

/// Reads the file at `path` and deserialises it, locating any fault, within the default
/// [`InputLimits`].
pub fn load_yaml<T: DeserializeOwned>(path: &Path) -> Result<T, YamlLoadError> {
    let limits = InputLimits::default();
    let text = read_text(path, &limits).map_err(|source| YamlLoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_yaml(&text, path)
}

/// Deserialises `text` as if read from `path`, within the default [`InputLimits`].
pub fn parse_yaml<T: DeserializeOwned>(text: &str, path: &Path) -> Result<T, YamlLoadError> {
    from_str(text, InputLimits::default().yaml_depth).map_err(|source| YamlLoadError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Refuses `text` when its collections nest deeper than `max_depth`. A document the
/// parser cannot read passes: deserialising it reports the fault where it is.
fn check_depth(text: &str, max_depth: usize) -> Result<(), YamlError> {
    let mut parser = EventParser::new(text.as_bytes());
    let mut depth = 0usize;
    while let Some((event, mark)) = parser.next() {
        match event {
            unsafe_yaml::YAML_SEQUENCE_START_EVENT | unsafe_yaml::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > max_depth {
                    return Err(YamlError {
                        line: mark.line as usize + 1,
                        column: mark.column as usize + 1,
                        field: String::new(),
                        message: format!(
                            "mappings and sequences nest deeper than {max_depth} levels here; \
                             give a document nested at most {max_depth} levels deep"
                        ),
                    });
                }
            }
            unsafe_yaml::YAML_SEQUENCE_END_EVENT | unsafe_yaml::YAML_MAPPING_END_EVENT => {
                depth = depth.saturating_sub(1);
            }
            unsafe_yaml::YAML_STREAM_END_EVENT => return Ok(()),
            _ => {}
        }
    }
    Ok(())
}

/// libyaml's event parser over a byte string, owned: it is initialised in a box that
/// never moves (libyaml keeps a pointer to the parser in the parser), and deleted on
/// drop.
struct EventParser<'input> {
    parser: Box<MaybeUninit<unsafe_yaml::yaml_parser_t>>,
    /// The parser reads from these bytes until it is deleted.
    _input: &'input [u8],
    /// An error ended the stream.
    failed: bool,
}

impl<'input> EventParser<'input> {
    fn new(input: &'input [u8]) -> Self {
        let mut parser = Box::new(MaybeUninit::<unsafe_yaml::yaml_parser_t>::uninit());
        let raw = parser.as_mut_ptr();
        // SAFETY: `raw` points to the boxed parser, which is initialised here before any
        // other use and never moves; `input` outlives the parser (the struct borrows
        // it), as `yaml_parser_set_input_string` requires.
        unsafe {
            // Initialisation fails only when allocation does, which aborts in Rust.
            let _ = unsafe_yaml::yaml_parser_initialize(raw);
            unsafe_yaml::yaml_parser_set_encoding(raw, unsafe_yaml::YAML_UTF8_ENCODING);
            unsafe_yaml::yaml_parser_set_input_string(raw, input.as_ptr(), input.len() as u64);
        }
        Self {
            parser,
            _input: input,
            failed: false,
        }
    }

    /// The next event's type and where it starts; none after the stream's end or a
    /// parse error.
    fn next(&mut self) -> Option<(unsafe_yaml::yaml_event_type_t, unsafe_yaml::yaml_mark_t)> {
        if self.failed {
            return None;
        }
        let mut event = MaybeUninit::<unsafe_yaml::yaml_event_t>::uninit();
        // SAFETY: the parser was initialised in `new`; `event` is written by
        // `yaml_parser_parse` when it succeeds, read only then, and deleted at once.
        unsafe {
            let raw = event.as_mut_ptr();
            if unsafe_yaml::yaml_parser_parse(self.parser.as_mut_ptr(), raw).fail {
                self.failed = true;
                return None;
            }
            let kind = (*raw).type_;
            let mark = (*raw).start_mark;
            unsafe_yaml::yaml_event_delete(raw);
            if kind == unsafe_yaml::YAML_STREAM_END_EVENT {
                self.failed = true;
            }
            Some((kind, mark))
        }
    }
}

impl Drop for EventParser<'_> {
    fn drop(&mut self) {
        // SAFETY: the parser was initialised in `new` and is deleted once, here.
        unsafe { unsafe_yaml::yaml_parser_delete(self.parser.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Anything(serde_norway::Value);

    #[test]
    fn a_document_nested_past_the_limit_is_refused_where_it_passes_the_limit() {
        let deep = format!("a: {}1{}", "[".repeat(65), "]".repeat(65));
        let error = from_str::<Anything>(&deep, 64).unwrap_err();
        // The mapping is level 1 and the 64th `[` (column 3 + 64) level 65.
        assert_eq!((error.line, error.column), (1, 3 + 64), "{error}");
        assert!(error.message.contains("deeper than 64 levels"), "{error}");
        assert!(error.to_string().starts_with("1:67: mappings"), "{error}");
        let within = format!("a: {}1{}", "[".repeat(63), "]".repeat(63));
        from_str::<Anything>(&within, 64).unwrap();
    }

    #[test]
    fn block_nesting_counts_as_flow_nesting_does() {
        // `- - - x`: each dash opens a sequence inside the one before.
        let deep = format!("{}x\n", "- ".repeat(10));
        assert!(from_str::<Anything>(&deep, 9).is_err());
        from_str::<Anything>(&deep, 10).unwrap();
    }

    #[test]
    fn a_document_the_parser_cannot_read_is_reported_by_the_deserialiser() {
        let error = from_str::<Anything>("a: [1, 2\nb: 3\n", 64).unwrap_err();
        assert!(error.line > 0, "{error}");
        assert!(!error.message.contains("nest"), "{error}");
    }
}
