//! The leader's pass between rounds and the wait for the next round: which jobs to look
//! at (what the watch events marked, and what an earlier pass left work on), what
//! changed for the policy (jobs that arrived or finished, nodes that came, went or
//! changed schedulability, jobs queued again), and the loop that waits for an event, the
//! policy's tick or the next poll. It must not act on a job itself: the pass hands that
//! to the drive and logs modules.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::runtime::reflector::ObjectRef;
use switchyard_control::Advance;
use switchyard_core::Trigger;

use super::controller::{KubeCluster, Visit};
use crate::adopt::parse_adopted_id;
use crate::changes::{Dirty, Reader};
use crate::crd::Phase;
use crate::gang;
use crate::loss::status_loss;
use crate::pods::{job_id, schedulable};

/// The longest a wait lasts before the driver's commands are served again.
const WAIT: Duration = Duration::from_millis(50);
/// Without a watch event, the leader still looks at the caches this often (restart
/// deadlines, loss to write, logs to follow).
const POLL: Duration = Duration::from_secs(1);

impl KubeCluster {
    /// The jobs this pass looks at: every job when `dirty.all` (the first pass as
    /// leader, or a relist), else those whose object or pods changed, those a follower
    /// of stopped, and those an earlier pass left work on (`revisit`).
    /// Each comes with the pods labelled with it, read once for the whole pass.
    fn jobs_to_visit(&mut self, dirty: &Dirty, followers_done: Vec<String>) -> Vec<Visit> {
        let revisit = std::mem::take(&mut self.revisit);
        if dirty.all {
            return self
                .caches
                .managed_jobs()
                .into_iter()
                .map(|job| Visit::of(job_id(&job), Some(job), &self.caches))
                .collect();
        }
        let mut ids: Vec<String> = dirty
            .jobs
            .iter()
            .cloned()
            .chain(revisit)
            .chain(followers_done)
            .collect();
        ids.sort();
        ids.dedup();
        ids.into_iter()
            .map(|id| {
                let job = self.caches.training_job(&id);
                Visit::of(id, job, &self.caches)
            })
            .collect()
    }

    /// Whether the visited job is still active (not finished); a job whose pods say it
    /// succeeded gets its final phase and loss samples (and is looked at again next
    /// pass while that write fails).
    fn still_active(&mut self, visit: &Visit) -> bool {
        let Some(job) = &visit.job else {
            return false;
        };
        let phase = job.status.as_ref().and_then(|s| s.phase);
        if matches!(phase, Some(Phase::Succeeded | Phase::Failed)) {
            return false;
        }
        if !gang::succeeded(job, &visit.own) {
            return true;
        }
        let id = &visit.id;
        let loss = self
            .caches
            .loss
            .lock()
            .expect("loss lock")
            .samples(id)
            .map(|s| status_loss(&s));
        let outcome = self.handle.block_on(self.actor.update_status(job, |s| {
            s.phase = Some(Phase::Succeeded);
            if let Some(loss) = &loss {
                s.loss = loss.clone();
            }
        }));
        match outcome {
            Ok(_) => {
                self.finished += 1;
                self.caches.loss.lock().expect("loss lock").forget(id);
            }
            Err(error) => {
                tracing::warn!(%error, job = id, "recording the end of a job");
                self.revisit.insert(id.clone());
            }
        }
        false
    }

    /// What changed since the last look: jobs that arrived or finished, nodes that
    /// appeared, left or changed schedulability. Finished jobs get their final phase
    /// and loss samples. Only the visited jobs and the dirty nodes are looked at, but
    /// every one of both after a relist.
    fn changes(&mut self, visits: &[Visit], dirty: &Dirty) -> Vec<Trigger> {
        let mut triggers = Vec::new();
        let mut arrived: Vec<String> = Vec::new();
        let mut finished: Vec<String> = Vec::new();
        if dirty.all {
            let mut active = HashSet::new();
            for visit in visits {
                if self.still_active(visit) {
                    active.insert(visit.id.clone());
                }
            }
            // Hash sets, not ordered ones: a pass over thousands of jobs compares
            // strings only for what changed; the triggers are sorted below.
            arrived.extend(active.difference(&self.known_jobs).cloned());
            finished.extend(self.known_jobs.difference(&active).cloned());
            self.known_jobs = active;
        } else {
            for visit in visits {
                let active = self.still_active(visit);
                match (active, self.known_jobs.contains(&visit.id)) {
                    (true, false) => {
                        self.known_jobs.insert(visit.id.clone());
                        arrived.push(visit.id.clone());
                    }
                    (false, true) => {
                        self.known_jobs.remove(&visit.id);
                        finished.push(visit.id.clone());
                    }
                    _ => {}
                }
            }
        }
        arrived.sort();
        finished.sort();
        triggers.extend(arrived.into_iter().map(Trigger::JobArrived));
        triggers.extend(finished.into_iter().map(Trigger::JobFinished));
        let mut changed: Vec<String> = Vec::new();
        let mut look = |known_nodes: &mut HashMap<String, bool>,
                        name: &str,
                        node: Option<&KubeNode>| {
            match (node.map(schedulable), known_nodes.get_mut(name)) {
                (Some(now), Some(known)) if *known == now => {}
                (Some(now), Some(known)) => {
                    *known = now;
                    changed.push(name.to_string());
                }
                (Some(now), None) => {
                    known_nodes.insert(name.to_string(), now);
                    changed.push(name.to_string());
                }
                (None, Some(_)) => {
                    known_nodes.remove(name);
                    changed.push(name.to_string());
                }
                (None, None) => {}
            }
        };
        if dirty.all {
            let nodes = self.caches.nodes.state();
            for node in &nodes {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                look(&mut self.known_nodes, name, Some(&**node));
            }
            let present: HashSet<&str> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.as_deref())
                .collect();
            let gone: Vec<String> = self
                .known_nodes
                .keys()
                .filter(|name| !present.contains(name.as_str()))
                .cloned()
                .collect();
            for name in gone {
                look(&mut self.known_nodes, &name, None);
            }
        } else {
            for name in &dirty.nodes {
                let node = self.caches.nodes.get(&ObjectRef::new(name));
                look(&mut self.known_nodes, name, node.as_deref());
            }
        }
        changed.sort();
        triggers.extend(changed.into_iter().map(Trigger::NodeChanged));
        triggers
    }

    /// The leader's work between rounds; returns the triggers of a round, if one is due.
    /// It looks at what the watch events marked since the last pass, and at the jobs
    /// that an earlier pass left work on (`revisit`).
    fn leader_pass(&mut self) -> Vec<Trigger> {
        let mut dirty = self.caches.changes.take(Reader::Pass);
        if !self.was_leading {
            // What this replica saw while it followed (or led before) may be stale: the
            // first round as leader hears of every job and node again.
            self.was_leading = true;
            self.known_jobs.clear();
            self.known_nodes.clear();
            self.restarts_done.clear();
            self.unconfirmed_warned.clear();
            self.adopted.new_term();
            dirty.all = true;
        }
        self.last_pass = Some(Instant::now());
        let mut followers_done = self.reap_followers();
        // An adopted job's followers are started again by its own pass.
        followers_done.retain(|id| parse_adopted_id(id).is_none());
        let visits = self.jobs_to_visit(&dirty, followers_done);
        self.drive_gangs(&visits);
        self.drive_restarts(&visits);
        self.drive_volume_conditions(&visits, dirty.all);
        self.write_loss();
        self.follow_logs(&visits, dirty.all);
        let mut triggers = self.changes(&visits, &dirty);
        triggers.extend(self.requeued.drain(..).map(Trigger::JobPreempted));
        triggers.extend(self.adopted_pass());
        triggers
    }

    pub(super) fn wait(
        &mut self,
        until: Option<f64>,
        stop: &AtomicBool,
        between: &mut dyn FnMut(&mut Self),
    ) -> Advance {
        let mut dirty = true;
        loop {
            between(self);
            if stop.load(Ordering::Relaxed) || self.stop.load(Ordering::Relaxed) {
                return Advance::Stopped;
            }
            let tick_due = until.is_some_and(|t| (self.clock)() >= t);
            let poll_due = self.last_pass.is_none_or(|t| t.elapsed() >= POLL);
            let leading = self.may_act();
            if !leading {
                self.was_leading = false;
            }
            if leading && (dirty || tick_due || poll_due || !self.was_leading) {
                let triggers = self.leader_pass();
                if !triggers.is_empty() {
                    return Advance::Events(triggers);
                }
                if tick_due {
                    return Advance::Reached { quiescent: false };
                }
            }
            let wait = until
                .map(|t| Duration::from_secs_f64((t - (self.clock)()).max(0.0)))
                .unwrap_or(WAIT)
                .min(WAIT);
            let changed = self.caches.changed.clone();
            dirty = self.handle.block_on(async move {
                tokio::select! {
                    _ = changed.notified() => true,
                    _ = tokio::time::sleep(wait) => false,
                }
            });
        }
    }
}
