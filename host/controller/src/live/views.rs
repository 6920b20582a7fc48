//! What the controller shows: the status the driver publishes after every round
//! ([`LiveStatus`]) and, beyond its counts, the active jobs one by one ([`JobList`]),
//! and how much of the cluster is allocated over time ([`UtilisationSample`], kept in a
//! bounded ring with the [`ChartMark`]s of policy swaps and experiments that a chart of
//! it draws). Both are built by the decision thread
//! from what it already has (a snapshot on request, the summary it publishes anyway), so
//! neither adds work to a round; this module does not page, filter or serialise them for
//! HTTP (the API does).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;

use switchyard_control::{
    Arm, DeciderLog, DecisionRecord, ExperimentReport, LastCheckpoint, RunEnd, SnapshotSummary,
};
use switchyard_core::Job;

/// What the driver publishes after every round.
#[derive(Clone, Debug, Default)]
pub struct LiveStatus {
    /// The active policy's name.
    pub active: String,
    /// Rounds run.
    pub rounds: u64,
    /// Rounds in which the active policy failed and the fallback decided.
    pub failures: u64,
    /// Why the run stopped deciding, once it has.
    pub ended: Option<RunEnd>,
    /// The most recent decisions, oldest first.
    pub decisions: VecDeque<DecisionRecord>,
    /// What `decisions` holds, in bytes ([`DecisionRecord::footprint`]).
    pub decision_bytes: usize,
    /// Which component each policy name in `decisions` meant, from which round.
    pub deciders: DeciderLog,
    /// State blobs that could not be persisted so far.
    pub state_save_failures: u64,
    /// Why state cannot be persisted, while that lasts (a restart would lose state).
    pub state_error: Option<String>,
    /// The cluster now.
    pub snapshot: SnapshotSummary,
    /// Per job, the labels policies put on it.
    pub labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Per labelled job, the policy that set its labels last: in a split each arm's
    /// policy labels its own jobs, and after a swap old labels stay until replaced.
    pub labels_by: BTreeMap<String, String>,
    /// The running experiment's figures.
    pub experiment: Option<ExperimentReport>,
    /// The last stopped experiment's final figures.
    pub last_experiment: Option<ExperimentReport>,
    /// Allocation over time, a bounded ring ([`LiveConfig::keep_utilisation`]).
    pub utilisation: UtilisationRing,
}

/// The active jobs as the decision thread listed them last, shared by every page read
/// from the listing.
#[derive(Clone, Debug, Default)]
pub struct JobList {
    /// Cluster time of the listing, seconds.
    pub time: f64,
    /// The active jobs, in submission order: the snapshot's own `Arc`s, so a listing of
    /// a simulated cluster costs pointers, not copies.
    pub jobs: Vec<Arc<Job>>,
    /// During a split experiment, the arm of each job assigned so far.
    pub arms: BTreeMap<String, Arm>,
    /// How the last checkpoint of each job that had one ended.
    pub checkpoints: BTreeMap<String, LastCheckpoint>,
}

/// How much of the cluster placed tasks hold at one moment: what they request over what
/// the nodes offer. This is allocation, not measured usage, so it means the same on the
/// simulator and on a cluster without metrics-server.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct UtilisationSample {
    /// Cluster time, seconds.
    pub time: f64,
    /// Share of the nodes' CPU requested by placed tasks, 0 to 1.
    pub cpu: f64,
    /// Share of the nodes' GPUs requested by placed tasks, 0 to 1; none when the cluster
    /// has no GPUs.
    pub gpu: Option<f64>,
}

impl UtilisationSample {
    /// The allocation `summary` shows.
    pub fn of(summary: &SnapshotSummary) -> Self {
        let (offered, requested) = (&summary.allocatable, &summary.requested);
        let share = |requested: f64, offered: f64| (requested / offered).clamp(0.0, 1.0);
        Self {
            time: summary.time,
            cpu: if offered.cpu_millis == 0 {
                0.0
            } else {
                share(requested.cpu_millis as f64, offered.cpu_millis as f64)
            },
            gpu: (offered.gpus > 0)
                .then(|| share(f64::from(requested.gpus), f64::from(offered.gpus))),
        }
    }
}

/// Something that changed how the cluster is decided, at the cluster time it happened: a
/// chart of allocation marks it, so a change in the curve can be read against its cause.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ChartMark {
    /// Cluster time, seconds (of the latest summary when the change was made).
    pub time: f64,
    /// What happened.
    #[serde(flatten)]
    pub kind: MarkKind,
}

/// What a [`ChartMark`] marks.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum MarkKind {
    /// `policy` decides from the next round on, instead of `previous` (the same name
    /// when the active policy was reloaded or its parameters set).
    Policy {
        /// The policy that decides now.
        policy: String,
        /// The policy that decided before.
        previous: String,
    },
    /// An experiment started (or replaced the running one).
    ExperimentStart {
        /// `shadow` or `split`.
        mode: String,
        /// Arm A's policy.
        policy_a: String,
        /// Arm B's policy.
        policy_b: String,
    },
    /// The running experiment stopped.
    ExperimentStop {
        /// Arm A's policy.
        policy_a: String,
        /// Arm B's policy.
        policy_b: String,
    },
}

/// How many marks the ring keeps beside its samples: changes are rare next to samples,
/// and a chart with more marks than this could not label them anyway.
const KEEP_MARKS: usize = 64;

/// The most recent utilisation samples, oldest first, at most `capacity` of them, and
/// the most recent [`KEEP_MARKS`] marks.
#[derive(Clone, Debug, Default)]
pub struct UtilisationRing {
    samples: VecDeque<UtilisationSample>,
    capacity: usize,
    marks: VecDeque<ChartMark>,
}

impl UtilisationRing {
    /// An empty ring that keeps `capacity` samples (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            samples: VecDeque::new(),
            capacity: capacity.max(1),
            marks: VecDeque::new(),
        }
    }

    /// Adds `mark`; the oldest goes when [`KEEP_MARKS`] are kept.
    pub fn mark(&mut self, mark: ChartMark) {
        if self.marks.len() == KEEP_MARKS {
            self.marks.pop_front();
        }
        self.marks.push_back(mark);
    }

    /// Every mark kept, oldest first: few enough to send whole on every read, so a
    /// reader that polls with `since` still sees a mark made before its last sample.
    pub fn marks(&self) -> Vec<ChartMark> {
        self.marks.iter().cloned().collect()
    }

    /// Adds `sample` unless the cluster's clock has not moved since the last one (an
    /// idle simulator stands still, and a flat line of repeats would push history out);
    /// the oldest sample goes when the ring is full.
    pub fn record(&mut self, sample: UtilisationSample) {
        if self
            .samples
            .back()
            .is_some_and(|last| sample.time <= last.time)
        {
            return;
        }
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// The samples taken after cluster time `since` (all of them without it), oldest
    /// first.
    pub fn since(&self, since: Option<f64>) -> Vec<UtilisationSample> {
        let start = since.map_or(0, |t| self.samples.partition_point(|s| s.time <= t));
        self.samples.range(start..).copied().collect()
    }

    /// How many samples it holds.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::Resources;

    fn summary(time: f64, cpu: (u64, u64), gpus: (u32, u32)) -> SnapshotSummary {
        SnapshotSummary {
            time,
            allocatable: Resources {
                cpu_millis: cpu.1,
                memory_bytes: 0,
                gpus: gpus.1,
            },
            requested: Resources {
                cpu_millis: cpu.0,
                memory_bytes: 0,
                gpus: gpus.0,
            },
            ..SnapshotSummary::default()
        }
    }

    #[test]
    fn a_sample_is_requested_over_offered_and_has_no_gpu_share_without_gpus() {
        let with_gpus = UtilisationSample::of(&summary(5.0, (6000, 8000), (1, 4)));
        assert_eq!((with_gpus.cpu, with_gpus.gpu), (0.75, Some(0.25)));
        let cpu_only = UtilisationSample::of(&summary(5.0, (0, 8000), (0, 0)));
        assert_eq!((cpu_only.cpu, cpu_only.gpu), (0.0, None));
        let empty = UtilisationSample::of(&summary(5.0, (0, 0), (0, 0)));
        assert_eq!(empty.cpu, 0.0, "a cluster without nodes is not NaN");
    }

    #[test]
    fn the_ring_keeps_the_most_recent_samples_and_skips_a_clock_that_stood_still() {
        let mut ring = UtilisationRing::new(3);
        for time in [1.0, 2.0, 2.0, 3.0, 4.0] {
            ring.record(UtilisationSample::of(&summary(time, (1, 2), (0, 0))));
        }
        let times: Vec<f64> = ring.since(None).iter().map(|s| s.time).collect();
        assert_eq!(times, [2.0, 3.0, 4.0]);
        let after: Vec<f64> = ring.since(Some(2.5)).iter().map(|s| s.time).collect();
        assert_eq!(after, [3.0, 4.0]);
        assert!(ring.since(Some(4.0)).is_empty());
    }

    #[test]
    fn the_ring_keeps_the_most_recent_marks_oldest_first() {
        let mut ring = UtilisationRing::new(3);
        for i in 0..KEEP_MARKS + 2 {
            ring.mark(ChartMark {
                time: i as f64,
                kind: MarkKind::Policy {
                    policy: format!("p{i}"),
                    previous: "default".into(),
                },
            });
        }
        let marks = ring.marks();
        assert_eq!(marks.len(), KEEP_MARKS);
        assert_eq!(
            (marks[0].time, marks[KEEP_MARKS - 1].time),
            (2.0, (KEEP_MARKS + 1) as f64)
        );
        let json = serde_json::to_value(&marks[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"time": 2.0, "kind": "policy", "policy": "p2", "previous": "default"})
        );
    }
}
