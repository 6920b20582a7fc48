//! Reading YAML files people write (workloads, expectations, fixtures) with errors that
//! point at the line, column and field at fault, so a typo is found without guessing.

use serde::de::DeserializeOwned;

/// A YAML document that does not fit the type it should hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: field `{field}`: {message}")]
pub struct YamlError {
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// Path of the field at fault, e.g. `templates.vae.wrok`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// Deserialises `text`, locating the first field that does not fit.
pub(crate) fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
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

/// A YAML file that could not be read or does not fit.
#[derive(Debug, thiserror::Error)]
pub enum YamlLoadError {
    /// The file could not be read.
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

/// Reads the file at `path` and deserialises it, locating any fault.
pub fn load_yaml<T: DeserializeOwned>(path: &std::path::Path) -> Result<T, YamlLoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| YamlLoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_yaml(&text, path)
}

/// Deserialises `text` as if read from `path`.
pub fn parse_yaml<T: DeserializeOwned>(
    text: &str,
    path: &std::path::Path,
) -> Result<T, YamlLoadError> {
    from_str(text).map_err(|source| YamlLoadError::Parse {
        path: path.to_path_buf(),
        source,
    })
}
