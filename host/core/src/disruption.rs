//! The disruption budget: how often the host lets a policy disrupt running jobs.
//!
//! A disruption is an action that stops a running job at a checkpoint: a migration that
//! moves a task to another node, a rescale, a preemption. The validator checks each one
//! on its own merits; the budget ([`DisruptionBudget`]) bounds them over time, so that a
//! policy which disrupts every job every round (each action valid alone), moves one job
//! back and forth, or preempts each job just before it finishes cannot keep a job from
//! making progress:
//!
//! - **disruptions per job per interval** (on by default): within any interval, one job
//!   is disrupted at most that many times, so of every interval a job holds nodes, all
//!   but that many restarts is run time;
//! - **minimum run time** (off by default): a job that was started, restarted, migrated,
//!   rescaled or preempted is not disrupted again until that many seconds of cluster
//!   time have passed since;
//! - **cap per interval** (off by default): within any interval, at most a share of the
//!   jobs holding nodes (never fewer than one job) is disrupted, across the whole cluster.
//!
//! Every rule reads the snapshot alone (each job's move history, which every backend
//! keeps with the host clock's times, and its start time), so they hold the same way on
//! the simulator and on Kubernetes, and across a controller restart or a change of leader.
//! The validator consults a [`Gate`] for every disruption it would otherwise accept
//! (`check_decision_within`); this module must not know about capacity, eligibility or
//! phases, which are the validator's rules.

use crate::model::{Job, JobMove, MOVE_HISTORY, MoveKind, Snapshot};

/// Limits on how often running jobs may be disrupted (migrated to another node, rescaled
/// or preempted). [`Default`] is the host's default, on; [`DisruptionBudget::OFF`]
/// lets every valid disruption through.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DisruptionBudget {
    /// Cluster seconds a job runs after it was started, restarted, migrated, rescaled or
    /// preempted before it may be disrupted again; 0 sets no minimum.
    pub min_run_time: f64,
    /// The most times one job may be disrupted within one
    /// [`DisruptionBudget::interval`]; 0 sets no bound.
    pub max_per_job: u32,
    /// The largest share of the jobs holding nodes that may be disrupted within one
    /// [`DisruptionBudget::interval`], in (0, 1]; at least one job per interval is
    /// always allowed. 1 sets no cap.
    pub max_share: f64,
    /// The interval disruptions are counted over, per job and across the cluster,
    /// cluster seconds; 0 counts none (no bound per job, no cap).
    pub interval: f64,
}

/// The default minimum run time, cluster seconds: none. The paper policies restart a
/// job within a second of starting it (DRAGON's and Tiresias' reallocations), so any
/// minimum would change what they do; the bound per job guarantees progress instead.
pub const DEFAULT_MIN_RUN_TIME: f64 = 0.0;
/// The default number of disruptions one job may have per interval.
pub const DEFAULT_MAX_DISRUPTIONS_PER_JOB: u32 = 8;
/// The default share of the jobs holding nodes that may be disrupted per interval: no
/// cap. A policy that makes room for an urgent job disrupts many jobs at once by design
/// (DRAGON's scale-downs), and the bound per job already keeps every job progressing.
pub const DEFAULT_MAX_DISRUPTED_SHARE: f64 = 1.0;
/// The default interval disruptions are counted over, cluster seconds.
pub const DEFAULT_DISRUPTION_INTERVAL: f64 = 600.0;

impl Default for DisruptionBudget {
    fn default() -> Self {
        Self {
            min_run_time: DEFAULT_MIN_RUN_TIME,
            max_per_job: DEFAULT_MAX_DISRUPTIONS_PER_JOB,
            max_share: DEFAULT_MAX_DISRUPTED_SHARE,
            interval: DEFAULT_DISRUPTION_INTERVAL,
        }
    }
}

/// A disruption budget setting out of range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DisruptionBudgetError {
    /// The minimum run time is negative or not a number.
    #[error("the minimum run time must be a number of seconds, 0 or more (0: no minimum); got {0}")]
    MinRunTime(f64),
    /// The share is outside (0, 1].
    #[error(
        "the share of jobs that may be disrupted per interval must be more than 0 and at most 1 (1: no cap); got {0}"
    )]
    Share(f64),
    /// The interval is negative or not a number.
    #[error(
        "the disruption interval must be a number of seconds, 0 or more (0: no bound per job and no cap); got {0}"
    )]
    Interval(f64),
}

impl DisruptionBudget {
    /// No limit: every disruption the validator accepts goes through.
    pub const OFF: DisruptionBudget = DisruptionBudget {
        min_run_time: 0.0,
        max_per_job: 0,
        max_share: 1.0,
        interval: 0.0,
    };

    /// A budget of these settings, each checked against its range.
    pub fn new(
        min_run_time: f64,
        max_per_job: u32,
        max_share: f64,
        interval: f64,
    ) -> Result<Self, DisruptionBudgetError> {
        let seconds = |s: f64| s.is_finite() && s >= 0.0;
        if !seconds(min_run_time) {
            return Err(DisruptionBudgetError::MinRunTime(min_run_time));
        }
        if !(max_share > 0.0 && max_share <= 1.0) {
            return Err(DisruptionBudgetError::Share(max_share));
        }
        if !seconds(interval) {
            return Err(DisruptionBudgetError::Interval(interval));
        }
        Ok(Self {
            min_run_time,
            max_per_job,
            max_share,
            interval,
        })
    }

    fn bounds_each_job(&self) -> bool {
        self.interval > 0.0 && self.max_per_job > 0
    }

    fn caps(&self) -> bool {
        self.interval > 0.0 && self.max_share < 1.0
    }
}

/// Why the budget turned a disruption down.
#[derive(Clone, Debug, PartialEq, thiserror::Error, serde::Serialize)]
#[serde(tag = "budget", rename_all = "kebab-case")]
pub enum DisruptionRefusal {
    /// The job started, restarted or was disrupted less than the minimum run time ago.
    #[error(
        "job `{job}` was {what} at t={since:.3}s; the disruption budget lets it run {min_run_time}s before it is migrated, rescaled or preempted again (from t={until:.3}s)"
    )]
    MinRunTime {
        /// Job id.
        job: String,
        /// What happened last (`started`, `restarted`, `migrated`, ...).
        what: &'static str,
        /// When, cluster seconds.
        since: f64,
        /// The minimum run time, seconds.
        min_run_time: f64,
        /// The earliest time it may be disrupted again.
        until: f64,
    },
    /// The job already had its disruptions in the current interval.
    #[error(
        "job `{job}` was disrupted {disrupted} times in the last {interval}s; the disruption budget allows {allowed} per job per interval, so it runs undisturbed until t={until:.3}s"
    )]
    PerJob {
        /// Job id.
        job: String,
        /// Its disruptions in the last interval (as far as its move history reaches).
        disrupted: usize,
        /// Disruptions allowed per job per interval.
        allowed: u32,
        /// The interval, seconds.
        interval: f64,
        /// The earliest time it may be disrupted again.
        until: f64,
    },
    /// The job moved more often within the interval than its move history keeps, so its
    /// disruptions there cannot be counted: it is treated as having had them all.
    #[error(
        "job `{job}` moved {moves} times in the last {interval}s, more than its move history keeps; the disruption budget cannot count its disruptions there, so it runs undisturbed until t={until:.3}s"
    )]
    History {
        /// Job id.
        job: String,
        /// Moves in its history, all within the interval.
        moves: usize,
        /// The interval, seconds.
        interval: f64,
        /// When the oldest of them leaves the interval.
        until: f64,
    },
    /// The cluster already had its share of disruptions in the current interval.
    #[error(
        "job `{job}`: {disrupted} of the {holding} jobs holding nodes were disrupted in the last {interval}s; the disruption budget allows {allowed} per interval ({share} of them, at least one)"
    )]
    Cap {
        /// Job id.
        job: String,
        /// Disruptions in the last interval, this decision's included.
        disrupted: usize,
        /// Jobs holding nodes.
        holding: usize,
        /// Disruptions allowed per interval.
        allowed: usize,
        /// The share the budget allows.
        share: f64,
        /// The interval, seconds.
        interval: f64,
    },
}

impl DisruptionRefusal {
    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            DisruptionRefusal::MinRunTime { .. } => "disruption-min-run-time",
            DisruptionRefusal::PerJob { .. } | DisruptionRefusal::History { .. } => {
                "disruption-per-job"
            }
            DisruptionRefusal::Cap { .. } => "disruption-cap",
        }
    }
}

impl JobMove {
    /// Whether this move stopped the job or started it: a migration that only marked the
    /// job (no task changed node) did neither.
    pub fn restarts(&self) -> bool {
        !(self.kind == MoveKind::Migrated && self.from_nodes == self.to_nodes)
    }

    /// Whether this move disrupted a running job (a migration to another node, a
    /// rescale, a preemption): what the disruption budget counts.
    pub fn disrupts(&self) -> bool {
        self.kind != MoveKind::Placed && self.restarts()
    }
}

/// The last time `job` started or restarted, and what happened then.
fn last_restart(job: &Job) -> Option<(f64, &'static str)> {
    let moved = job.moves.iter().rev().find(|m| m.restarts());
    let from_history = moved.map(|m| {
        let what = match m.kind {
            // A placement after a preemption resumes the job from its checkpoint.
            MoveKind::Placed if job.moves.iter().any(|m| m.kind == MoveKind::Preempted) => {
                "restarted"
            }
            MoveKind::Placed => "started",
            MoveKind::Migrated => "migrated",
            MoveKind::Rescaled => "rescaled",
            MoveKind::Preempted => "preempted",
        };
        (m.time, what)
    });
    // A job whose history was lost (or is older than the history kept) still has the
    // time it started.
    match (from_history, job.start_time) {
        (Some(last), _) => Some(last),
        (None, Some(start)) => Some((start, "started")),
        (None, None) => None,
    }
}

/// The times of `job`'s disruptions after `since`, oldest first, and whether its move
/// history may hide more of them: it is full ([`MOVE_HISTORY`]) and reaches no further
/// back than `since`.
fn disruptions_since(job: &Job, since: f64) -> (Vec<f64>, bool) {
    let recent = job.moves.iter().rev().take_while(|m| m.time > since);
    let mut times: Vec<f64> = recent
        .clone()
        .filter(|m| m.disrupts())
        .map(|m| m.time)
        .collect();
    times.reverse();
    let truncated = job.moves.len() >= MOVE_HISTORY && recent.count() == job.moves.len();
    (times, truncated)
}

/// The budget applied to one decision: the minimum run time per job, and the cap with
/// the disruptions this decision has accepted so far. What the cap counts is read from
/// the snapshot only when a decision holds a disruption.
pub(crate) struct Gate<'a> {
    budget: DisruptionBudget,
    snapshot: &'a Snapshot,
    /// Disruptions in the interval so far (the snapshot's and this decision's), and
    /// jobs holding nodes.
    counted: Option<(usize, usize)>,
}

impl<'a> Gate<'a> {
    pub(crate) fn new(budget: DisruptionBudget, snapshot: &'a Snapshot) -> Self {
        Self {
            budget,
            snapshot,
            counted: None,
        }
    }

    /// Whether `job` may be disrupted now. Counts nothing: [`Gate::disrupted`] does,
    /// once the validator accepted the action.
    pub(crate) fn admit(&mut self, job: &Job) -> Result<(), DisruptionRefusal> {
        let now = self.snapshot.time;
        let min_run_time = self.budget.min_run_time;
        if min_run_time > 0.0
            && let Some((since, what)) = last_restart(job)
            && now - since < min_run_time
        {
            return Err(DisruptionRefusal::MinRunTime {
                job: job.id.clone(),
                what,
                since,
                min_run_time,
                until: since + min_run_time,
            });
        }
        if self.budget.bounds_each_job() {
            self.admit_per_job(job, now)?;
        }
        if !self.budget.caps() {
            return Ok(());
        }
        let (disrupted, holding) = *self
            .counted
            .get_or_insert_with(|| count(self.snapshot, now - self.budget.interval));
        let allowed = ((self.budget.max_share * holding as f64).floor() as usize).max(1);
        if disrupted >= allowed {
            return Err(DisruptionRefusal::Cap {
                job: job.id.clone(),
                disrupted,
                holding,
                allowed,
                share: self.budget.max_share,
                interval: self.budget.interval,
            });
        }
        Ok(())
    }

    /// The bound per job: `job`'s disruptions within the interval before `now`, from its
    /// own history (the validator lets a job move once per decision, so none of this
    /// decision's can be among them).
    fn admit_per_job(&self, job: &Job, now: f64) -> Result<(), DisruptionRefusal> {
        let interval = self.budget.interval;
        let allowed = self.budget.max_per_job;
        let (times, truncated) = disruptions_since(job, now - interval);
        if times.len() >= allowed as usize {
            let excess = times.len() + 1 - allowed as usize;
            return Err(DisruptionRefusal::PerJob {
                job: job.id.clone(),
                disrupted: times.len(),
                allowed,
                interval,
                // Once `excess` of them have left the interval, one more fits.
                until: times[excess - 1] + interval,
            });
        }
        if truncated {
            return Err(DisruptionRefusal::History {
                job: job.id.clone(),
                moves: job.moves.len(),
                interval,
                until: job.moves[0].time + interval,
            });
        }
        Ok(())
    }

    /// Counts an accepted disruption against the cap.
    pub(crate) fn disrupted(&mut self) {
        if let Some((disrupted, _)) = self.counted.as_mut() {
            *disrupted += 1;
        }
    }
}

/// Disruptions after `since` in the move histories of the snapshot's jobs, and the
/// jobs holding nodes.
fn count(snapshot: &Snapshot, since: f64) -> (usize, usize) {
    let mut disrupted = 0;
    let mut holding = 0;
    for job in &snapshot.jobs {
        if job.tasks.iter().any(|t| t.node.is_some()) {
            holding += 1;
        }
        disrupted += job
            .moves
            .iter()
            .rev()
            .take_while(|m| m.time > since)
            .filter(|m| m.disrupts())
            .count();
    }
    (disrupted, holding)
}
