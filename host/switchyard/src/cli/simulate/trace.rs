//! A run's decision trace (`decisions-NAME.jsonl`), written as the rounds come and held
//! to the size the operator sets (`--trace-limit-kib`): a first line naming the
//! components the records' policy names stand for (version, digest, pinned reference),
//! once rather than in every record, then records up to the limit, then one line that
//! summarises the rounds past it. A policy that acts on every job every round
//! writes a record per round for as long as the run lasts; the limit bounds the file
//! whatever the policy does. This module only writes; it decides nothing about the run.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;
use switchyard_control::{DecidingPolicy, DecisionRecord};

/// The default size of one run's decision trace, KiB.
pub(crate) const DEFAULT_TRACE_LIMIT_KIB: u64 = 1 << 20;

/// What the trace left out once it reached its limit: the trace's last line, as
/// `{"omitted": {...}}`.
#[derive(Debug, Default, PartialEq, Serialize)]
pub(crate) struct Omitted {
    /// The limit, bytes.
    pub limit_bytes: u64,
    /// Rounds not written.
    pub rounds: u64,
    /// Bytes their records would have taken, newlines included.
    pub bytes: u64,
    /// Actions those rounds applied.
    pub accepted: u64,
    /// Actions turned down.
    pub rejected: u64,
    /// Actions accepted that the cluster failed to carry out.
    pub failed: u64,
    /// Rounds some policy failed in (the fallback decided).
    pub policy_failures: u64,
    /// Cluster time of the first and the last round left out.
    pub first_time: f64,
    /// See `first_time`.
    pub last_time: f64,
}

/// One run's decision trace being written.
pub(crate) struct TraceWriter {
    file: PathBuf,
    out: BufWriter<File>,
    limit_bytes: u64,
    written: u64,
    omitted: Option<Omitted>,
    error: Option<std::io::Error>,
}

impl TraceWriter {
    /// Creates `file`, to hold a first line naming `policies` (`{"policies": [...]}`)
    /// and records, at most `limit_kib` KiB together, and one summary line.
    pub(crate) fn create(
        file: &Path,
        limit_kib: u64,
        policies: &[DecidingPolicy],
    ) -> anyhow::Result<Self> {
        #[derive(Serialize)]
        struct Header<'a> {
            policies: &'a [DecidingPolicy],
        }
        let context = || format!("writing {}", file.display());
        let mut out = File::create(file)
            .map(BufWriter::new)
            .with_context(context)?;
        let mut header = serde_json::to_vec(&Header { policies })?;
        header.push(b'\n');
        out.write_all(&header).with_context(context)?;
        Ok(Self {
            file: file.to_path_buf(),
            out,
            limit_bytes: limit_kib.saturating_mul(1024),
            // The limit bounds the file: the first line counts.
            written: header.len() as u64,
            omitted: None,
            error: None,
        })
    }

    /// Writes `record` as one line, or counts it in the summary once the trace is full:
    /// the trace is the run's first rounds, never a sample of them.
    pub(crate) fn record(&mut self, record: &DecisionRecord) {
        if self.error.is_some() {
            return;
        }
        let mut line = match serde_json::to_vec(record) {
            Ok(line) => line,
            Err(error) => {
                self.error = Some(error.into());
                return;
            }
        };
        line.push(b'\n');
        let len = line.len() as u64;
        if self.omitted.is_none() && self.written + len <= self.limit_bytes {
            self.written += len;
            self.error = self.out.write_all(&line).err();
            return;
        }
        let omitted = self.omitted.get_or_insert_with(|| Omitted {
            limit_bytes: self.limit_bytes,
            first_time: record.time,
            ..Omitted::default()
        });
        omitted.rounds += 1;
        omitted.bytes += len;
        omitted.last_time = record.time;
        for arm in std::iter::once(&record.arm_a).chain(&record.arm_b) {
            omitted.accepted += arm.accepted.len() as u64;
            omitted.rejected += arm.rejected.len() as u64;
            omitted.failed += arm.failed.len() as u64;
            omitted.policy_failures += u64::from(arm.failure.is_some());
        }
    }

    /// Writes the summary line, if the trace reached its limit, and flushes; returns
    /// what was left out.
    pub(crate) fn finish(mut self) -> anyhow::Result<Option<Omitted>> {
        let context = || format!("writing {}", self.file.display());
        if let Some(error) = self.error.take() {
            return Err(error).with_context(context);
        }
        if let Some(omitted) = &self.omitted {
            #[derive(Serialize)]
            struct Summary<'a> {
                omitted: &'a Omitted,
            }
            serde_json::to_writer(&mut self.out, &Summary { omitted })
                .map_err(std::io::Error::from)
                .and_then(|()| self.out.write_all(b"\n"))
                .with_context(context)?;
        }
        self.out.flush().with_context(context)?;
        Ok(self.omitted)
    }
}
