//! Time passing in the simulator: the next event, what falls due (arrivals, tasks
//! created late, completions, evaluation reports, restarts done), each job's progress
//! settled at its rate, and the rates recomputed where the CPU share changed
//! ([`share::water_fill`]). It carries out no policy action (`actions.rs` does).

use std::sync::Arc;

use rand_distr::{Distribution, Normal};

use super::events::EventKind;
use super::state::JobState;
use super::{LOSS_HISTORY, Simulator, UtilPoint, share};
use switchyard_core::{JobPhase, LossSample, Resources, TaskPhase, Trigger};

impl Simulator {
    /// Moves the clock to `t`, accumulating utilisation; progress is settled lazily.
    pub(super) fn move_to(&mut self, t: f64) {
        if t > self.now {
            let dt = t - self.now;
            self.cpu_area += self.cores_in_use * dt;
            self.gpu_area += self.gpus_in_use * dt;
            self.now = t;
        }
    }

    pub(super) fn next_event_time(&mut self) -> Option<f64> {
        let arrival = self.jobs.get(self.next_arrival).map(|j| j.spec.submit_time);
        let creation = self.creations.last().map(|c| c.0);
        let jobs = &self.jobs;
        let queued = self
            .queue
            .peek_valid(|job, version| jobs[job].version == version);
        [arrival, creation, queued]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
    }

    /// Handles everything due at the current time; returns the triggers for the policy.
    pub(super) fn process_due(&mut self) -> Vec<Trigger> {
        let mut triggers = Vec::new();
        while let Some(j) = self.jobs.get(self.next_arrival)
            && j.spec.submit_time <= self.now
        {
            let index = self.next_arrival;
            self.next_arrival += 1;
            self.jobs[index].state = JobState::Active;
            self.active.push(index);
            triggers.push(Trigger::JobArrived(self.jobs[index].spec.id.clone()));
            let times = self.jobs[index].creation_times();
            if !times.is_empty() {
                self.creations.extend(times.into_iter().map(|t| (t, index)));
                self.creations.sort_by(|a, b| b.0.total_cmp(&a.0));
            }
        }
        // Tasks created after their job's submission: the WIT has no pod-created
        // trigger, so the policy hears of them as the job arriving again (its new pods
        // join the queue), which is when a scheduler would place them.
        while let Some(&(t, index)) = self.creations.last()
            && t <= self.now
        {
            self.creations.pop();
            if self.jobs[index].state != JobState::Active {
                continue;
            }
            // Its new tasks show from now on.
            self.jobs[index].view = None;
            let arrived = Trigger::JobArrived(self.jobs[index].spec.id.clone());
            if !triggers.contains(&arrived) {
                triggers.push(arrived);
            }
        }
        while let Some((job, kind)) = {
            let jobs = &self.jobs;
            self.queue
                .pop_due(self.now, |job, version| jobs[job].version == version)
        } {
            match kind {
                EventKind::Completion => {
                    self.finish(job);
                    triggers.push(Trigger::JobFinished(self.jobs[job].spec.id.clone()));
                }
                EventKind::Evaluation => self.evaluate(job),
                EventKind::RateChange => {
                    self.settle(job);
                    let j = &mut self.jobs[job];
                    // Settling in floating point may stop a hair short of the epoch's
                    // end, which would ask for the same change again.
                    if let Some(until) = j.rate_until {
                        j.work_done = j.work_done.max(until);
                    }
                    self.dirty_jobs.push(job);
                }
                EventKind::RestartDone if self.jobs[job].asked.is_some() => {
                    triggers.extend(self.end_checkpoint(job));
                }
                EventKind::RestartDone => {
                    let j = &mut self.jobs[job];
                    j.restart_until = None;
                    j.phase = JobPhase::Running;
                    for t in j.tasks.iter_mut().filter(|t| t.node.is_some()) {
                        t.phase = TaskPhase::Running;
                    }
                    self.touch_job(job);
                }
            }
        }
        triggers
    }

    fn finish(&mut self, job: usize) {
        self.settle(job);
        let j = &mut self.jobs[job];
        j.work_done = j.spec.work;
        j.finish_time = Some(self.now);
        // Nobody asks a finished job's history; a long trace would keep it all.
        j.moves = Arc::default();
        j.state = JobState::Finished;
        j.view = None;
        j.rate = 0.0;
        j.version += 1;
        // `recompute` skips finished jobs, so their GPUs leave the busy count here.
        let freed_gpus = std::mem::take(&mut j.gpus_busy);
        self.gpus_in_use -= freed_gpus;
        let placed: Vec<(usize, usize, Resources)> = j
            .tasks
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.node.map(|n| (n, i, t.requests)))
            .collect();
        for t in &mut j.tasks {
            t.node = None;
            t.cores = 0.0;
        }
        for (n, t, r) in placed {
            self.release(n, job, t, r);
        }
        self.active.retain(|&a| a != job);
        self.finished += 1;
    }

    /// Brings a job's work up to now at its current rate.
    pub(super) fn settle(&mut self, job: usize) {
        let now = self.now;
        let j = &mut self.jobs[job];
        j.work_done = (j.work_done + j.rate * (now - j.settled_at)).min(j.spec.work);
        j.settled_at = now;
    }

    fn evaluate(&mut self, job: usize) {
        self.settle(job);
        let now = self.now;
        let j = &mut self.jobs[job];
        if let Some(curve) = &j.spec.curve {
            let p = j.work_done / j.spec.work;
            let clean = curve.value(p);
            let noise = if j.spec.noise > 0.0 {
                Normal::new(0.0, j.spec.noise).map_or(0.0, |n| n.sample(&mut self.rng))
            } else {
                0.0
            };
            let sample = LossSample {
                time: now,
                step: j.work_done.round() as u64,
                value: clean * (1.0 + noise),
            };
            // A new list rather than the old one changed: the job's views (and a
            // snapshot a policy instance still holds) share the old one.
            let kept = &j.loss[j.loss.len().saturating_sub(LOSS_HISTORY - 1)..];
            j.loss = kept.iter().copied().chain([sample]).collect();
        }
        j.next_eval += j.spec.eval_every;
        self.dirty_jobs.push(job);
    }

    /// Re-shares dirty nodes and recomputes the rates of the jobs on them.
    pub(super) fn recompute(&mut self) {
        let mut jobs = std::mem::take(&mut self.dirty_jobs);
        for node in std::mem::take(&mut self.dirty_nodes) {
            self.nodes[node].dirty = false;
            let demands: Vec<(f64, f64)> = self.nodes[node]
                .tasks
                .iter()
                .map(|&(j, t)| {
                    let job = &self.jobs[j];
                    let task = &job.tasks[t];
                    let demand = if job.progressing() {
                        task.max_cores
                    } else {
                        0.0
                    };
                    (demand, task.cpu_weight)
                })
                .collect();
            let capacity = self.nodes[node].spec.allocatable.cpu_millis as f64 / 1000.0;
            let shares = share::water_fill(capacity, &demands);
            let cpu_active = self.nodes[node]
                .tasks
                .iter()
                .zip(&demands)
                .filter(|&(&(j, _), d)| d.0 > 0.0 && self.jobs[j].cpu_bound())
                .count();
            let efficiency =
                1.0 / (1.0 + self.config.interference * cpu_active.saturating_sub(1) as f64);
            let used: f64 = shares.iter().sum();
            self.cores_in_use += used - self.nodes[node].cores_in_use;
            self.nodes[node].cores_in_use = used;
            let placed = self.nodes[node].tasks.clone();
            for (&(j, t), share) in placed.iter().zip(shares) {
                let task = &mut self.jobs[j].tasks[t];
                task.cores = share;
                task.efficiency = efficiency;
                jobs.push(j);
            }
        }
        jobs.sort_unstable();
        jobs.dedup();
        let mut gpus_delta = 0.0;
        for job in jobs {
            // Touched, re-shared or evaluated: its view is out of date.
            self.jobs[job].view = None;
            if self.jobs[job].state != JobState::Active {
                continue;
            }
            self.settle(job);
            let old_gpus = self.jobs[job].gpus_busy;
            let j = &mut self.jobs[job];
            (j.rate, j.rate_until) = j.compute_rate();
            j.gpus_busy = if j.progressing() {
                j.tasks
                    .iter()
                    .filter(|t| t.node.is_some())
                    .map(|t| t.requests.gpus as f64)
                    .sum()
            } else {
                0.0
            };
            gpus_delta += j.gpus_busy - old_gpus;
            j.version += 1;
            let version = j.version;
            if let Some(until) = j.restart_until {
                self.queue.push(until, job, version, EventKind::RestartDone);
            }
            if j.rate > 0.0 {
                let left = (j.spec.work - j.work_done).max(0.0);
                self.queue.push(
                    self.now + left / j.rate,
                    job,
                    version,
                    EventKind::Completion,
                );
                if j.spec.curve.is_some() && j.next_eval < j.spec.work {
                    let due = self.now + (j.next_eval - j.work_done).max(0.0) / j.rate;
                    self.queue.push(due, job, version, EventKind::Evaluation);
                }
                if let Some(until) = j.rate_until {
                    let due = self.now + (until - j.work_done).max(0.0) / j.rate;
                    self.queue.push(due, job, version, EventKind::RateChange);
                }
            }
        }
        self.gpus_in_use += gpus_delta;
        let jobs = &self.jobs;
        self.queue
            .drop_stale(|job, version| jobs[job].version == version);
        let point = UtilPoint {
            time: self.now,
            cpu: if self.total_cores > 0.0 {
                self.cores_in_use / self.total_cores
            } else {
                0.0
            },
            gpu: if self.total_gpus > 0.0 {
                self.gpus_in_use / self.total_gpus
            } else {
                0.0
            },
        };
        match self.series.last_mut() {
            Some(last) if last.time == point.time => *last = point,
            Some(last) if last.cpu == point.cpu && last.gpu == point.gpu => {}
            _ => self.series.push(point),
        }
    }
}
