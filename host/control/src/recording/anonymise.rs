//! Anonymising a recording before it leaves the cluster: job ids, task names, node names
//! and label keys and values are replaced by salted hashes, the same name by the same
//! hash throughout, so the recording still replays and its rounds still line up. Names
//! inside the policies' reasons are replaced too (each word that is a known name). The
//! host's own labels (`switchyard.dev/...`) keep their keys and values: policies act on
//! them. What is not a name (times, requests, loss values, policies) is kept; the
//! policies' state blobs, which may hold names in the policy's own encoding, are dropped.

use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};

use super::format::{RoundRecord, SegmentHeader, SegmentRecord};
use crate::decision_record::{ArmRecord, DecisionRecord};
use switchyard_core::{Action, Job, JobLabel, Node, Operation, Trigger};

/// The host's label prefix, kept as it is.
const HOST_LABELS: &str = "switchyard.dev/";

/// Replaces names by salted hashes, consistently across every record it is given.
struct Anonymiser {
    salt: String,
    /// Every name replaced so far and its replacement (for the reasons' words).
    names: FxHashMap<String, String>,
}

impl Anonymiser {
    /// An anonymiser salted with `salt`: the same salt gives the same hashes, so two
    /// recordings anonymised with one salt can be joined; keep it secret, or a guessed
    /// name can be checked against its hash.
    fn new(salt: &str) -> Self {
        Self {
            salt: salt.to_string(),
            names: FxHashMap::default(),
        }
    }

    /// `name` as `kind-` and the first 12 hex digits of its salted hash.
    fn hash(&mut self, kind: &str, name: &str) -> String {
        if let Some(known) = self.names.get(name) {
            return known.clone();
        }
        let mut hasher = Sha256::new();
        hasher.update(self.salt.as_bytes());
        hasher.update([0]);
        hasher.update(name.as_bytes());
        let digest = hasher.finalize();
        let hashed = format!("{kind}-{}", hex::encode(&digest[..6]));
        self.names.insert(name.to_string(), hashed.clone());
        hashed
    }

    fn rename(&mut self, kind: &str, name: &mut String) {
        *name = self.hash(kind, name);
    }

    /// Anonymises `record` in place.
    fn record(&mut self, record: &mut SegmentRecord) {
        match record {
            SegmentRecord::Header(header) => self.header(header),
            // A state blob is the policy's own encoding, which may hold job ids: it
            // cannot be anonymised, so it is dropped (a replay of the copy starts the
            // recorded policy afresh).
            SegmentRecord::Policy(policy) => policy.active_state.clear(),
            SegmentRecord::Round(round) => self.round(round),
        }
    }

    /// A workload path can name a team or a project.
    fn header(&mut self, header: &mut SegmentHeader) {
        if let Some(workload) = header.cluster.strip_prefix("sim:") {
            header.cluster = format!("sim:{}", self.hash("workload", workload));
        }
    }

    fn round(&mut self, round: &mut RoundRecord) {
        let changes = &mut round.changes;
        for node in &mut changes.nodes {
            self.node(node);
        }
        for name in &mut changes.nodes_removed {
            self.rename("node", name);
        }
        for job in &mut changes.jobs {
            self.job(job);
        }
        for id in &mut changes.jobs_removed {
            self.rename("job", id);
        }
        for append in &mut changes.loss {
            self.rename("job", &mut append.job);
        }
        self.decision(&mut round.decision);
    }

    fn labels(&mut self, labels: &mut std::collections::BTreeMap<String, String>) {
        *labels = std::mem::take(labels)
            .into_iter()
            .map(|(key, value)| {
                if key.starts_with(HOST_LABELS) {
                    (key, value)
                } else {
                    (self.hash("label", &key), self.hash("value", &value))
                }
            })
            .collect();
    }

    fn node(&mut self, node: &mut Node) {
        self.rename("node", &mut node.name);
        self.labels(&mut node.labels);
    }

    fn job(&mut self, job: &mut Job) {
        self.rename("job", &mut job.id);
        for task in std::sync::Arc::make_mut(&mut job.tasks).iter_mut() {
            self.rename("task", &mut task.name);
            if let Some(node) = task.node.as_mut() {
                self.rename("node", node);
            }
        }
        for moved in std::sync::Arc::make_mut(&mut job.moves).iter_mut() {
            for node in moved.from_nodes.iter_mut().chain(moved.to_nodes.iter_mut()) {
                self.rename("node", node);
            }
        }
        let mut labels = (*job.labels).clone();
        self.labels(&mut labels);
        job.labels = std::sync::Arc::new(labels);
    }

    fn decision(&mut self, decision: &mut DecisionRecord) {
        for trigger in &mut decision.triggers {
            match trigger {
                Trigger::Tick => {}
                Trigger::JobArrived(id) | Trigger::JobFinished(id) | Trigger::JobPreempted(id) => {
                    self.rename("job", id)
                }
                Trigger::NodeChanged(name) => self.rename("node", name),
            }
        }
        self.arm(&mut decision.arm_a);
        if let Some(arm) = decision.arm_b.as_mut() {
            self.arm(arm);
        }
        if let Some(shadow) = decision.shadow.as_mut() {
            for action in &mut shadow.actions {
                self.action(action);
            }
            if let Some(failure) = shadow.failure.as_mut() {
                *failure = self.text(failure);
            }
        }
    }

    fn arm(&mut self, arm: &mut ArmRecord) {
        for action in &mut arm.accepted {
            self.action(action);
        }
        for failed in &mut arm.failed {
            self.action(&mut failed.action);
            failed.failed_because = self.text(&failed.failed_because);
        }
        for rejected in &mut arm.rejected {
            self.action(&mut rejected.action);
            rejected.rejected_because = self.text(&rejected.rejected_because);
        }
        for label in &mut arm.labels {
            self.job_label(label);
        }
        for rejected in &mut arm.rejected_labels {
            self.job_label(&mut rejected.label);
            rejected.rejected_because = self.text(&rejected.rejected_because);
        }
        if let Some(failure) = arm.failure.as_mut() {
            *failure = self.text(failure);
        }
    }

    fn job_label(&mut self, label: &mut JobLabel) {
        self.rename("job", &mut label.job);
        if !label.key.starts_with(HOST_LABELS) {
            label.key = self.hash("label", &label.key);
            label.value = self.hash("value", &label.value);
        }
    }

    fn action(&mut self, action: &mut Action) {
        match &mut action.op {
            Operation::Place { job, assignments } => {
                self.rename("job", job);
                for a in assignments {
                    self.rename("task", &mut a.task);
                    self.rename("node", &mut a.node);
                }
            }
            Operation::Migrate {
                job, task, node, ..
            } => {
                self.rename("job", job);
                if let Some(task) = task.as_mut() {
                    self.rename("task", task);
                }
                self.rename("node", node);
            }
            Operation::SetCpuWeight { job, task, .. } => {
                self.rename("job", job);
                self.rename("task", task);
            }
            Operation::Scale { job, nodes, .. } => {
                self.rename("job", job);
                for node in nodes {
                    self.rename("node", node);
                }
            }
            Operation::Wait { job } | Operation::Preempt { job } => self.rename("job", job),
        }
        action.reason = self.text(&action.reason);
    }

    /// `text` with every word that is a known name replaced by its hash. A word is a run
    /// of characters a Kubernetes name may hold; trailing dots (end of a sentence) are
    /// not part of it.
    fn text(&self, text: &str) -> String {
        let is_name_char =
            |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while !rest.is_empty() {
            let word_end = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
            if word_end == 0 {
                let c = rest.chars().next().unwrap_or(' ');
                out.push(c);
                rest = &rest[c.len_utf8()..];
                continue;
            }
            let word = &rest[..word_end];
            let trimmed = word.trim_end_matches('.');
            match self.names.get(trimmed) {
                Some(hashed) => {
                    out.push_str(hashed);
                    out.push_str(&word[trimmed.len()..]);
                }
                None => out.push_str(word),
            }
            rest = &rest[word_end..];
        }
        out
    }
}

/// Writes `recording` to `out` (a directory, made when missing; it must hold no
/// segments yet) with every name anonymised by `salt`, segment by segment under the same
/// names. Returns the segments written. A segment cut short is written up to its last
/// complete record, as a finished frame.
pub fn export_anonymised(
    recording: &super::reader::Recording,
    out: &std::path::Path,
    salt: &str,
) -> Result<usize, super::error::RecordingError> {
    use std::io::Write as _;
    let io_error = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| super::error::RecordingError::Io { path, source }
    };
    std::fs::create_dir_all(out).map_err(io_error(out))?;
    if !super::writer::list_segments(out)
        .map_err(io_error(out))?
        .is_empty()
    {
        return Err(super::error::RecordingError::Io {
            path: out.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "already holds a recording; export to an empty directory",
            ),
        });
    }
    let mut anonymiser = Anonymiser::new(salt);
    // Record by record: a recording may be far larger than memory.
    for index in 0..recording.segments().len() {
        let records = recording.segment_records(index)?;
        let path = out.join(super::writer::segment_name(index as u64));
        let file = std::fs::File::create(&path).map_err(io_error(&path))?;
        let mut encoder = zstd::stream::write::Encoder::new(file, 3).map_err(io_error(&path))?;
        for record in records {
            let mut record = record?;
            anonymiser.record(&mut record);
            serde_json::to_writer(&mut encoder, &record)
                .map_err(std::io::Error::other)
                .and_then(|()| encoder.write_all(b"\n"))
                .map_err(io_error(&path))?;
        }
        encoder
            .finish()
            .and_then(|file| file.sync_all())
            .map_err(io_error(&path))?;
    }
    Ok(recording.segments().len())
}
