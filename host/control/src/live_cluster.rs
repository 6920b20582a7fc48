//! What the live controller needs of a cluster beyond the [`Cluster`] trait: waits it
//! can interrupt to serve operator commands, loss samples and checkpoint
//! acknowledgements pushed over the API, readiness, and the counts the status shows. The paced simulator and the Kubernetes backend
//! implement [`LiveCluster`]; the live controller drives either without knowing which.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::Serialize;
use switchyard_core::{JobPhase, Resources, Snapshot};

use crate::checkpoint::{
    AckRefused, Acknowledged, CheckpointAck, CheckpointRequest, LastCheckpoint,
};
use crate::cluster::{Advance, Cluster};
use crate::loss::LossAck;

/// A cluster the live controller runs continuously: a [`Cluster`] whose waits the
/// decision thread can interrupt to serve operator commands, and which takes loss
/// samples pushed over the API.
pub trait LiveCluster: Cluster + Send + 'static {
    /// Like [`Cluster::advance`], but calls `between` at least every few tens of
    /// milliseconds while it waits (the driver applies commands there, so a swap lands
    /// between two rounds), and returns [`Advance::Stopped`] once `stop` is set.
    fn advance_live(
        &mut self,
        until: Option<f64>,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Self),
    ) -> Advance;

    /// Takes a sample pushed for `job` (known to be active): kept in the job's loss
    /// series, or ignored with the reason.
    fn push_loss(&mut self, job: &str, step: u64, value: f64) -> LossAck;

    /// The checkpoint asked of `job` (known to be active) now, if any.
    fn checkpoint_request(&mut self, job: &str) -> CheckpointRequest;

    /// Takes a task's acknowledgement that its checkpoint of `job` (known to be active)
    /// is complete; once every asked task has acknowledged, the job is stopped at once
    /// instead of at its grace period's end.
    fn acknowledge_checkpoint(
        &mut self,
        job: &str,
        ack: CheckpointAck,
    ) -> Result<Acknowledged, AckRefused>;

    /// How the last checkpoint of each active job that had one ended.
    fn last_checkpoints(&mut self) -> BTreeMap<String, LastCheckpoint>;

    /// Whether the caches the snapshot is built from are complete (readiness).
    fn synced(&self) -> bool {
        true
    }

    /// How often the snapshot summary is refreshed while nothing else happens.
    fn summary_every(&self) -> Duration {
        Duration::from_millis(50)
    }

    /// The counts `GET /v1/status` shows. They are refreshed every
    /// [`LiveCluster::summary_every`], so a cluster that can count without building a
    /// snapshot should: a snapshot of a large cluster is costly.
    fn summary(&mut self) -> SnapshotSummary {
        let finished = self.finished_jobs();
        summarise(&self.snapshot(Vec::new()), finished)
    }

    /// Whether the job `id` is in the cluster now (only such a job takes loss samples).
    fn has_job(&mut self, id: &str) -> bool {
        self.snapshot(Vec::new()).jobs.iter().any(|j| j.id == id)
    }
}

/// Called with (source, error) whenever a policy component or settings file is refused;
/// a cluster backend turns it into an Event.
pub type RefusalHook = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Counts of one kind of job in a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SnapshotSummary {
    /// Cluster time, seconds.
    pub time: f64,
    /// Nodes.
    pub nodes: usize,
    /// Of which schedulable.
    pub schedulable_nodes: usize,
    /// Active jobs.
    pub jobs: usize,
    /// Jobs with nothing placed.
    pub waiting: usize,
    /// Jobs running.
    pub running: usize,
    /// Jobs checkpointing or restoring.
    pub restarting: usize,
    /// Jobs finished so far.
    pub finished: usize,
    /// What all nodes offer.
    pub allocatable: Resources,
    /// What is requested on them.
    pub requested: Resources,
}

impl SnapshotSummary {
    /// Counts one node.
    pub fn count_node(
        &mut self,
        allocatable: &Resources,
        requested: &Resources,
        schedulable: bool,
    ) {
        self.nodes += 1;
        self.schedulable_nodes += usize::from(schedulable);
        self.allocatable = self.allocatable.plus(allocatable);
        self.requested = self.requested.plus(requested);
    }

    /// Counts one active job.
    pub fn count_job(&mut self, phase: JobPhase) {
        self.jobs += 1;
        match phase {
            JobPhase::Waiting => self.waiting += 1,
            JobPhase::Running => self.running += 1,
            JobPhase::Restarting => self.restarting += 1,
        }
    }
}

/// The summary of `snapshot`, `finished` jobs having finished before it.
fn summarise(snapshot: &Snapshot, finished: usize) -> SnapshotSummary {
    let mut summary = SnapshotSummary {
        time: snapshot.time,
        finished,
        ..SnapshotSummary::default()
    };
    for node in &snapshot.nodes {
        summary.count_node(&node.allocatable, &node.requested, node.schedulable);
    }
    for job in &snapshot.jobs {
        summary.count_job(job.phase);
    }
    summary
}
