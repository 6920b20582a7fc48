//! CSV files with a header row, read so that every fault names the file, the line and
//! the column: a missing column, a cell that is not a number, a value out of range.
//! A file is read only when it is a regular file within the limits' bytes and rows.
//! The importers say what each column must hold; this module only reads and locates.

use std::path::{Path, PathBuf};

use super::error::WorkloadError;
use super::limits::{InputLimits, Number};

/// A whole CSV file: its column names and its rows as text.
pub(crate) struct Table {
    path: PathBuf,
    columns: Vec<String>,
    rows: Vec<(u64, csv::StringRecord)>,
}

/// One row of a [`Table`], with what it needs to locate a fault.
pub(crate) struct Row<'t> {
    table: &'t Table,
    line: u64,
    record: &'t csv::StringRecord,
}

impl Table {
    /// Reads `path`; a missing file is [`WorkloadError::MissingData`] with `origin`. A
    /// file that is not a regular file, or holds more bytes or rows than `limits` allow,
    /// is refused, read no further than the limit.
    pub(crate) fn read(
        path: &Path,
        origin: &'static str,
        limits: &InputLimits,
    ) -> Result<Self, WorkloadError> {
        if !path.exists() {
            return Err(WorkloadError::MissingData {
                path: path.to_path_buf(),
                origin,
            });
        }
        let fail = |e: csv::Error| error(path, e);
        let file = switchyard_control::open_regular_file(path).map_err(|e| error(path, e))?;
        let size = file.metadata().map_err(|e| error(path, e))?.len();
        if size > limits.trace_bytes {
            return Err(error(
                path,
                format!(
                    "{size} bytes; a trace or measurement file may have at most {} bytes",
                    limits.trace_bytes
                ),
            ));
        }
        // The file may grow while it is read: no more than the limit is read.
        let mut reader = csv::Reader::from_reader(std::io::Read::take(file, limits.trace_bytes));
        let columns = reader
            .headers()
            .map_err(fail)?
            .iter()
            .map(|c| c.trim().to_string())
            .collect();
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(fail)?;
            if rows.len() as u64 == limits.trace_rows {
                return Err(error(
                    path,
                    format!(
                        "more than {} rows; a trace or measurement file may have at most that many",
                        limits.trace_rows
                    ),
                ));
            }
            let line = record.position().map_or(0, |p| p.line());
            rows.push((line, record));
        }
        Ok(Self {
            path: path.to_path_buf(),
            columns,
            rows,
        })
    }

    /// The position of column `name`, or an error listing the columns there are.
    pub(crate) fn column(&self, name: &str) -> Result<usize, WorkloadError> {
        self.columns.iter().position(|c| c == name).ok_or_else(|| {
            error(
                &self.path,
                format!(
                    "missing column `{name}` (the header has: {})",
                    self.columns.join(", ")
                ),
            )
        })
    }

    /// The positions of `names`, in order.
    pub(crate) fn columns<const N: usize>(
        &self,
        names: [&str; N],
    ) -> Result<[usize; N], WorkloadError> {
        let mut out = [0; N];
        for (slot, name) in out.iter_mut().zip(names) {
            *slot = self.column(name)?;
        }
        Ok(out)
    }

    /// Its rows, in file order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(|(line, record)| Row {
            table: self,
            line: *line,
            record,
        })
    }

    /// How many rows it has.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// An error about the whole file.
    pub(crate) fn fault(&self, message: impl std::fmt::Display) -> WorkloadError {
        error(&self.path, message)
    }
}

impl Row<'_> {
    /// The text in column `col`.
    pub(crate) fn text(&self, col: usize) -> &str {
        self.record.get(col).unwrap_or("").trim()
    }

    /// The finite number in column `col`.
    pub(crate) fn number(&self, col: usize) -> Result<f64, WorkloadError> {
        let text = self.text(col);
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.fault(
                col,
                format!("`{}` is not a finite number", text.escape_debug()),
            )),
        }
    }

    /// The number in column `col`, which must satisfy `ok` (`wanted` says how).
    pub(crate) fn number_where(
        &self,
        col: usize,
        wanted: &str,
        ok: impl Fn(f64) -> bool,
    ) -> Result<f64, WorkloadError> {
        let v = self.number(col)?;
        if ok(v) {
            Ok(v)
        } else {
            Err(self.fault(col, format!("{} must be {wanted}", Number(v))))
        }
    }

    /// The whole number in column `col`, from `min` to `max`.
    pub(crate) fn whole(&self, col: usize, min: u32, max: u32) -> Result<u32, WorkloadError> {
        let v = self.number(col)?;
        if v.fract() == 0.0 && v >= f64::from(min) && v <= f64::from(max) {
            Ok(v as u32)
        } else {
            Err(self.fault(
                col,
                format!("{} must be a whole number from {min} to {max}", Number(v)),
            ))
        }
    }

    /// An error about column `col` of this row.
    pub(crate) fn fault(&self, col: usize, message: impl std::fmt::Display) -> WorkloadError {
        let name = self.table.columns.get(col).map_or("?", String::as_str);
        error(
            &self.table.path,
            format!("line {}, column `{name}`: {message}", self.line),
        )
    }
}

fn error(path: &Path, message: impl std::fmt::Display) -> WorkloadError {
    WorkloadError::Import {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}
