//! What makes a workload file unusable ([`WorkloadError`]), each error naming the file
//! and, where it can, the line and field at fault with what would be accepted. It reads
//! no file itself.

use std::path::{Path, PathBuf};

/// A workload file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not match the schema (unknown field, wrong type, ...) or nests
    /// too deep.
    #[error(
        "{path}:{line}:{column}: {}{message}",
        crate::yaml::field_prefix(field)
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// Path of the field at fault, e.g. `templates.vae.wrok`; empty when the fault
        /// is the document's shape (its nesting).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The YAML is well-formed but a value makes no sense.
    #[error("{path}: field `{field}`: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Path of the field at fault.
        field: String,
        /// What is wrong and what would be accepted.
        message: String,
    },
    /// A data file the workload names (a trace, measurements, a replayed curve) is not
    /// there.
    #[error("{path}: no such file or folder; {origin}")]
    MissingData {
        /// The file or folder looked for.
        path: PathBuf,
        /// Where such data comes from and where the repository keeps it.
        origin: &'static str,
    },
    /// An imported trace could not be read.
    #[error("{path}: {message}")]
    Import {
        /// The trace file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl WorkloadError {
    /// The YAML of the file at `path` does not fit, as `error` locates it.
    pub(crate) fn parse(path: &Path, error: crate::yaml::YamlError) -> Self {
        WorkloadError::Parse {
            path: path.to_path_buf(),
            line: error.line,
            column: error.column,
            field: error.field,
            message: error.message,
        }
    }

    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            WorkloadError::Read { .. } => "read",
            WorkloadError::Parse { .. } => "parse",
            WorkloadError::Invalid { .. } => "invalid",
            WorkloadError::MissingData { .. } => "missing_data",
            WorkloadError::Import { .. } => "import",
        }
    }
}
