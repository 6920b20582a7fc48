//! Every job's loss series as the controller keeps it: the samples read from its logs
//! or pushed to the API, what of them is already in the job's status, and how far each
//! followed log has been read. A series seen for the first time starts from the samples
//! in the job's status, so a restarted controller continues it. It keeps; it must not
//! read logs or write to the cluster.

use std::collections::{HashMap, HashSet};

use k8s_openapi::jiff::Timestamp;

use crate::crd;
use switchyard_control::LossSeries;
use switchyard_core as model;

/// Every job's loss series, what of it is already in the job's status, and how far each
/// followed log has been read.
#[derive(Debug, Default)]
pub struct LossBook {
    id_to_series: HashMap<String, JobLoss>,
    /// Per followed pod (`<job id>:<pod>`), the timestamp of the last line read.
    pub(crate) pod_to_read_until: HashMap<String, Timestamp>,
    /// Jobs whose series changed since the snapshot last looked.
    changed: HashSet<String>,
}

#[derive(Debug, Default)]
struct JobLoss {
    series: LossSeries,
    /// Raised by every sample taken.
    version: u64,
    /// The version last written to the job's status.
    written: u64,
    /// When it was last written (Unix seconds).
    written_at: Option<f64>,
}

impl LossBook {
    /// Whether job `id` has a series (else its status is what there is).
    pub(crate) fn has(&self, id: &str) -> bool {
        self.id_to_series.contains_key(id)
    }

    /// Starts job `id`'s series from the samples its status holds.
    pub(crate) fn seed(&mut self, id: &str, from_status: &[crd::LossSample]) {
        self.changed.insert(id.to_string());
        self.id_to_series
            .entry(id.to_string())
            .or_insert_with(|| JobLoss {
                series: LossSeries::from_samples(from_status.iter().map(|s| model::LossSample {
                    time: s.time,
                    step: s.step,
                    value: s.value,
                })),
                ..JobLoss::default()
            });
    }

    /// Adds a sample to job `id`'s series; false when its step is already there.
    pub(crate) fn record(&mut self, id: &str, time: f64, step: Option<u64>, value: f64) -> bool {
        let job = self.id_to_series.entry(id.to_string()).or_default();
        let taken = job.series.record(time, step, value);
        if taken {
            job.version += 1;
            self.changed.insert(id.to_string());
        }
        taken
    }

    /// The time of job `id`'s latest sample, if it has any.
    pub(crate) fn latest_time(&self, id: &str) -> Option<f64> {
        self.id_to_series
            .get(id)?
            .series
            .to_vec()
            .iter()
            .map(|s| s.time)
            .reduce(f64::max)
    }

    /// The version of job `id`'s series: raised by every sample taken.
    pub(crate) fn version(&self, id: &str) -> Option<u64> {
        self.id_to_series.get(id).map(|j| j.version)
    }

    /// Job `id`'s samples, oldest first.
    pub fn samples(&self, id: &str) -> Option<Vec<model::LossSample>> {
        self.id_to_series.get(id).map(|j| j.series.to_vec())
    }

    /// The series with samples not yet in their job's status, last written at least
    /// `every` seconds before `now`: (job id, version, samples).
    pub(crate) fn due(&self, now: f64, every: f64) -> Vec<(String, u64, Vec<model::LossSample>)> {
        self.id_to_series
            .iter()
            .filter(|(_, j)| j.version > j.written && j.written_at.is_none_or(|t| now - t >= every))
            .map(|(id, j)| (id.clone(), j.version, j.series.to_vec()))
            .collect()
    }

    /// Notes that `version` of job `id`'s series is in its status since `now`.
    pub(crate) fn written(&mut self, id: &str, version: u64, now: f64) {
        if let Some(job) = self.id_to_series.get_mut(id) {
            job.written = job.written.max(version);
            job.written_at = Some(now);
        }
    }

    /// The jobs whose series changed since the last call (for the snapshot).
    pub(crate) fn take_changed(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.changed)
    }

    /// Drops a finished job's series and cursors.
    pub(crate) fn forget(&mut self, id: &str) {
        self.changed.insert(id.to_string());
        self.id_to_series.remove(id);
        let prefix = format!("{id}:");
        self.pod_to_read_until
            .retain(|k, _| !k.starts_with(&prefix));
    }
}

/// The samples of a series as the status holds them.
pub(crate) fn status_loss(samples: &[model::LossSample]) -> Vec<crd::LossSample> {
    samples
        .iter()
        .map(|s| crd::LossSample {
            time: s.time,
            step: s.step,
            value: s.value,
        })
        .collect()
}
