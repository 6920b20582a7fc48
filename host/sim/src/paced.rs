//! Scaled real time: lets a discrete-event [`Cluster`] (the simulator) advance no faster
//! than `speed` virtual seconds per wall second, so the controller around it behaves as
//! it would on a real cluster. The wrapped cluster is used unchanged; between slices of
//! waiting, a callback lets the driver apply operator commands, which is why a swap
//! takes effect between rounds and never inside one.
//!
//! Checkpoint acknowledgements pushed over the API go to the simulator itself (a job
//! whose template says `acknowledge: api` waits for them).
//!
//! It also keeps the loss samples pushed over the API for jobs whose workload gives them
//! no loss curve, and lays them over those jobs in every snapshot: the simulator itself
//! is never fed outside samples, so a job with a curve keeps its deterministic series
//! and a pushed sample for it is ignored with the reason.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::simulator::{Scenario, Simulator};
use switchyard_control::{
    AckRefused, Acknowledged, ActionOutcome, Advance, CheckpointAck, CheckpointRequest, Cluster,
    LastCheckpoint, LiveCluster, LossAck, LossSeries, SnapshotSummary,
};
use switchyard_core::{Action, JobLabel, Snapshot, Trigger};

/// How long the pacer sleeps before looking at the clock and the commands again.
pub const PACE_SLICE: Duration = Duration::from_millis(5);

/// A cluster whose virtual clock follows the wall clock, `speed` times faster.
pub struct Paced<C> {
    inner: C,
    speed: f64,
    /// When the clock started: at the first advance, not at construction, so a
    /// controller that compiles its policies before its first round does not find the
    /// cluster already far ahead and replay the gap in one burst.
    origin_wall: Option<Instant>,
    origin_virtual: f64,
    /// Jobs that take pushed samples (their workload has no loss curve).
    takes_pushes: HashSet<String>,
    /// Pushed samples per job, laid over the snapshot.
    pushed: HashMap<String, LossSeries>,
}

impl<C: Cluster> Paced<C> {
    /// Paces `inner` from its current time on, the clock starting at the first advance.
    /// No job takes pushed loss samples.
    pub fn new(inner: C, speed: f64) -> Self {
        let origin_virtual = inner.now();
        Self {
            inner,
            speed,
            origin_wall: None,
            origin_virtual,
            takes_pushes: HashSet::new(),
            pushed: HashMap::new(),
        }
    }

    /// The wrapped cluster.
    pub fn inner(&mut self) -> &mut C {
        &mut self.inner
    }

    /// The virtual time the wall clock stands at.
    fn virtual_now(&self) -> f64 {
        let elapsed = self.origin_wall.map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.origin_virtual + self.speed * elapsed
    }

    /// Like [`Cluster::advance`], but never past the wall clock's virtual time: it
    /// sleeps in [`PACE_SLICE`] steps until an event is due, calling `between` before each slice.
    /// Returns [`Advance::Stopped`] as soon as `stop` is set.
    pub fn advance_paced(
        &mut self,
        until: Option<f64>,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Self),
    ) -> Advance {
        self.origin_wall.get_or_insert_with(Instant::now);
        loop {
            between(self);
            if stop.load(Ordering::Relaxed) {
                return Advance::Stopped;
            }
            let wall = self.virtual_now();
            let limit = until.map_or(wall, |u| u.min(wall));
            if limit > self.inner.now() {
                match self.catch_up(limit) {
                    Advance::Reached { quiescent } => {
                        if until.is_some_and(|u| u <= limit) {
                            return Advance::Reached { quiescent };
                        }
                        if quiescent && until.is_none() {
                            return Advance::Idle;
                        }
                    }
                    other => return other,
                }
            }
            std::thread::sleep(PACE_SLICE);
        }
    }

    /// Advances the wrapped cluster to `limit`, gathering every event on the way into
    /// one report, as a real cluster's watch delivers everything that happened since
    /// the controller last looked. A controller that fell behind (a burst of arrivals,
    /// a slow round) so catches up in one round instead of one round per event, which
    /// would keep it behind for good. With nothing due before `limit` this is the
    /// wrapped cluster's own answer.
    fn catch_up(&mut self, limit: f64) -> Advance {
        let mut gathered: Vec<Trigger> = Vec::new();
        loop {
            let step = self.inner.advance(Some(limit));
            match step {
                Advance::Events(triggers) => {
                    self.forget_finished(&triggers);
                    gathered.extend(triggers);
                    if self.inner.now() >= limit {
                        return Advance::Events(gathered);
                    }
                }
                // What stopped the gathering is seen again at the next advance.
                _ if !gathered.is_empty() => return Advance::Events(gathered),
                other => return other,
            }
        }
    }

    fn forget_finished(&mut self, triggers: &[Trigger]) {
        for trigger in triggers {
            if let Trigger::JobFinished(id) = trigger {
                self.pushed.remove(id);
            }
        }
    }
}

impl Paced<Simulator> {
    /// Paces a simulator of `scenario`; jobs whose workload has no loss curve take
    /// pushed samples as their loss series.
    pub fn for_scenario(scenario: Scenario, speed: f64) -> Self {
        let takes_pushes = scenario
            .jobs
            .iter()
            .filter(|j| j.curve.is_none())
            .map(|j| j.id.clone())
            .collect();
        let mut paced = Self::new(Simulator::new(scenario), speed);
        paced.takes_pushes = takes_pushes;
        paced
    }
}

impl<C: Cluster> Cluster for Paced<C> {
    fn now(&self) -> f64 {
        self.inner.now()
    }

    fn advance(&mut self, until: Option<f64>) -> Advance {
        self.advance_paced(until, &AtomicBool::new(false), &mut |_| {})
    }

    fn snapshot(&mut self, triggers: Vec<Trigger>) -> Snapshot {
        let mut snapshot = self.inner.snapshot(triggers);
        if !self.pushed.is_empty() {
            for job in &mut snapshot.jobs {
                if let Some(series) = self.pushed.get(&job.id)
                    && !series.matches(&job.loss)
                {
                    // Copied only when the series moved on, so an unchanged job stays
                    // shared with the held snapshot.
                    Arc::make_mut(job).loss = series.to_vec().into();
                }
            }
        }
        snapshot
    }

    fn apply(&mut self, accepted: &[Action], labels: &[JobLabel]) -> Vec<ActionOutcome> {
        self.inner.apply(accepted, labels)
    }

    fn finished_jobs(&self) -> usize {
        self.inner.finished_jobs()
    }
}

impl LiveCluster for Paced<Simulator> {
    /// Counted from the simulator's own tables: the driver asks every summary interval,
    /// and a snapshot of a large cluster each time would cost a round's work for a few
    /// counts.
    fn summary(&mut self) -> SnapshotSummary {
        let sim = &self.inner;
        let mut summary = SnapshotSummary {
            time: sim.now(),
            finished: sim.finished_jobs(),
            ..SnapshotSummary::default()
        };
        // Every simulated node is schedulable (the snapshot says so too).
        for (allocatable, requested) in sim.node_resources() {
            summary.count_node(&allocatable, &requested, true);
        }
        for phase in sim.active_phases() {
            summary.count_job(phase);
        }
        summary
    }

    fn has_job(&mut self, id: &str) -> bool {
        self.inner.is_active(id)
    }

    fn advance_live(
        &mut self,
        until: Option<f64>,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Self),
    ) -> Advance {
        self.advance_paced(until, stop, between)
    }

    fn checkpoint_request(&mut self, job: &str) -> CheckpointRequest {
        self.inner.checkpoint_request(job)
    }

    fn acknowledge_checkpoint(
        &mut self,
        job: &str,
        ack: CheckpointAck,
    ) -> Result<Acknowledged, AckRefused> {
        self.inner.acknowledge_checkpoint(job, ack)
    }

    fn last_checkpoints(&mut self) -> BTreeMap<String, LastCheckpoint> {
        self.inner
            .last_checkpoints()
            .map(|(id, last)| (id.to_string(), last.clone()))
            .collect()
    }

    fn push_loss(&mut self, job: &str, step: u64, value: f64) -> LossAck {
        if !self.takes_pushes.contains(job) {
            return LossAck::Ignored {
                note: format!(
                    "the simulator generates job `{job}`'s loss from its workload curve and \
                     is never fed outside samples (that would make its runs depend on the \
                     pushes); pushed samples are kept only for jobs whose template has \
                     `curve: none`"
                ),
            };
        }
        let now = self.inner.now();
        if self
            .pushed
            .entry(job.to_string())
            .or_default()
            .record(now, Some(step), value)
        {
            LossAck::Accepted
        } else {
            LossAck::Ignored {
                note: format!("step {step} is already in job `{job}`'s loss series"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::workload::Workload;

    const TWO_KINDS: &str = "
seed: 1
cluster:
  nodes:
    - {name: cpu, count: 1, cpus: 8, memory_gib: 32}
templates:
  plain: {work: 100, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}
  vae: {work: 100, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: vae}
jobs:
  - {template: plain, count: 1, every: 1}
  - {template: vae, count: 1, every: 1}
";

    #[test]
    fn a_pushed_sample_becomes_the_loss_of_a_job_without_a_curve_and_is_refused_for_one_with_a_curve()
     {
        let scenario = Workload::parse(TWO_KINDS, Path::new("two.yaml"))
            .unwrap()
            .scenario(1)
            .unwrap();
        let ids: Vec<(String, bool)> = scenario
            .jobs
            .iter()
            .map(|j| (j.id.clone(), j.curve.is_some()))
            .collect();
        let plain = ids.iter().find(|(_, c)| !c).unwrap().0.clone();
        let vae = ids.iter().find(|(_, c)| *c).unwrap().0.clone();
        let mut paced = Paced::for_scenario(scenario, 1e9);
        while paced.inner().snapshot(Vec::new()).jobs.len() < 2 {
            let next = paced.now() + 1.0;
            paced.inner().advance(Some(next));
        }
        assert_eq!(paced.push_loss(&plain, 10, 0.5), LossAck::Accepted);
        assert_eq!(
            paced.push_loss(&plain, 10, 0.4).metric_label(),
            "ignored",
            "the same step twice"
        );
        let ack = paced.push_loss(&vae, 10, 0.5);
        let LossAck::Ignored { note } = ack else {
            panic!("a job with a curve took a pushed sample")
        };
        assert!(note.contains("curve"), "{note}");
        let snapshot = paced.snapshot(Vec::new());
        let loss = &snapshot.job(&plain).unwrap().loss;
        assert_eq!(loss.len(), 1);
        assert_eq!((loss[0].step, loss[0].value), (10, 0.5));
        assert!(
            snapshot
                .job(&vae)
                .unwrap()
                .loss
                .iter()
                .all(|s| s.step != 10),
            "the simulator's own series is untouched"
        );
    }

    const STREAM: &str = "
seed: 1
cluster:
  nodes:
    - {name: cpu, count: 4, cpus: 64, memory_gib: 256}
templates:
  plain: {work: 1000, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}
jobs:
  - {template: plain, count: 100, every: 1}
";

    #[test]
    fn a_controller_behind_the_wall_clock_hears_every_event_since_it_last_looked_at_once() {
        let scenario = Workload::parse(STREAM, Path::new("stream.yaml"))
            .unwrap()
            .scenario(1)
            .unwrap();
        let due: usize = scenario
            .jobs
            .iter()
            .filter(|j| j.submit_time <= 49.5)
            .count();
        assert!(due > 10, "the workload gives {due} arrivals before 49.5 s");
        // So fast that the wall clock is past 49.5 virtual seconds at once: the
        // controller is "behind" by every arrival before it.
        let mut paced = Paced::for_scenario(scenario, 1e12);
        let Advance::Events(triggers) = paced.advance(Some(49.5)) else {
            panic!("no events")
        };
        let arrived = triggers
            .iter()
            .filter(|t| matches!(t, Trigger::JobArrived(_)))
            .count();
        assert_eq!(
            arrived, due,
            "one round hears every arrival due: {triggers:?}"
        );
        assert_eq!(paced.now(), 49.5);
    }
}
