//! Tiresias's queues without a cluster: each job's attained service, its moves between
//! queues, and the order jobs are admitted in.

use serde::{Deserialize, Serialize};

/// The queue parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Queues {
    /// Service (width x seconds) at which a job leaves queue `k` for `k + 1`, ascending;
    /// there is one more queue than thresholds.
    pub thresholds: Vec<f64>,
    /// A waiting job that ran before returns to the top queue once it has waited this
    /// many times its service time in its queue; 0: never.
    pub promote_knob: f64,
}

/// What the policy remembers about one job (short field names: the blob holds one per
/// active job and travels every round).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Standing {
    /// Its queue, 0 the highest priority.
    #[serde(rename = "q")]
    pub queue: usize,
    /// When it entered that queue, as a ticket: first come, first served within it.
    #[serde(rename = "n")]
    pub ticket: u64,
    /// Seconds it has run since it entered the top queue last (what demotes it).
    #[serde(rename = "e")]
    pub executed: f64,
    /// Seconds it has run in all.
    #[serde(rename = "t")]
    pub total: f64,
    /// Seconds it has waited since it last ran (what promotes it).
    #[serde(rename = "p")]
    pub waited: f64,
    /// The host time of the last round that saw it. Not written per job: every job is
    /// brought to the round's time, so the blob holds that time once
    /// ([`crate::blob`]) and a waiting job's entry stays the same from round to round.
    /// A blob that still has it per job reads as well.
    #[serde(rename = "c", default, skip_serializing)]
    pub seen: f64,
    /// The queue label last handed to the host, so a label goes out only on a change.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<usize>,
}

/// A change of queue in one round, for the operator.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// Its service passed the threshold of the queue it was in.
    Demoted {
        /// The queue it left.
        from: usize,
        /// Its service then.
        service: f64,
    },
    /// It waited long enough to return to the top queue.
    Promoted {
        /// The queue it left.
        from: usize,
        /// How long it had waited.
        waited: f64,
    },
}

impl Standing {
    /// A job first seen at `now`, in the top queue with ticket `ticket`.
    pub fn new(now: f64, ticket: u64) -> Self {
        Self {
            ticket,
            seen: now,
            ..Self::default()
        }
    }

    /// Its attained service in its current queue: `width` (GPUs or cores) times the
    /// time it ran there.
    pub fn service(&self, width: f64) -> f64 {
        self.executed * width
    }

    /// Brings the standing to `now`: the time since the last round counts as run when
    /// the job held resources (`running`) and as waited otherwise; then the job moves
    /// down past every threshold its service passed, or back to the top when it starved.
    /// `tickets` hands out the next ticket for a job entering a queue.
    pub fn advance(
        &mut self,
        now: f64,
        running: bool,
        width: f64,
        queues: &Queues,
        tickets: &mut u64,
    ) -> Option<Transition> {
        let elapsed = (now - self.seen).max(0.0);
        self.seen = now;
        let mut ticket = || {
            *tickets += 1;
            *tickets - 1
        };
        if running {
            self.executed += elapsed;
            self.total += elapsed;
            self.waited = 0.0;
            let from = self.queue;
            while self
                .thresholds_from(queues)
                .is_some_and(|threshold| self.service(width) >= threshold)
            {
                self.queue += 1;
            }
            if self.queue != from {
                self.ticket = ticket();
                return Some(Transition::Demoted {
                    from,
                    service: self.service(width),
                });
            }
            return None;
        }
        if self.total > 0.0 {
            self.waited += elapsed;
        }
        let starved = queues.promote_knob > 0.0
            && self.queue > 0
            && self.executed > 0.0
            && self.waited >= self.executed * queues.promote_knob;
        if starved {
            let (from, waited) = (self.queue, self.waited);
            self.queue = 0;
            self.executed = 0.0;
            self.waited = 0.0;
            self.ticket = ticket();
            return Some(Transition::Promoted { from, waited });
        }
        None
    }

    /// The threshold of its current queue; none in the last queue.
    fn thresholds_from(&self, queues: &Queues) -> Option<f64> {
        queues.thresholds.get(self.queue).copied()
    }
}

/// Positions of `standings` in admission order: by queue, then by ticket.
pub fn ranking(standings: &[Standing]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..standings.len()).collect();
    order.sort_by_key(|&i| (standings[i].queue, standings[i].ticket));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(thresholds: &[f64], promote_knob: f64) -> Queues {
        Queues {
            thresholds: thresholds.to_vec(),
            promote_knob,
        }
    }

    #[test]
    fn a_job_moves_down_one_queue_per_threshold_its_service_passes() {
        let q = queues(&[100.0, 1000.0], 0.0);
        let mut tickets = 10;
        let mut s = Standing::new(0.0, 0);
        // 4 GPUs for 20 s: 80 GPU-seconds, still in Q0.
        assert_eq!(s.advance(20.0, true, 4.0, &q, &mut tickets), None);
        assert_eq!(s.queue, 0);
        // 4 more seconds: 96; then 1 more: 100, the threshold itself.
        assert_eq!(s.advance(24.0, true, 4.0, &q, &mut tickets), None);
        assert_eq!(
            s.advance(25.0, true, 4.0, &q, &mut tickets),
            Some(Transition::Demoted {
                from: 0,
                service: 100.0
            })
        );
        assert_eq!(
            (s.queue, s.ticket),
            (1, 10),
            "a new ticket in the new queue"
        );
        // A long round passes both thresholds at once: the last queue, no further.
        let mut long = Standing::new(0.0, 1);
        long.advance(1000.0, true, 8.0, &q, &mut tickets);
        assert_eq!(long.queue, 2);
        long.advance(5000.0, true, 8.0, &q, &mut tickets);
        assert_eq!(long.queue, 2);
    }

    #[test]
    fn waiting_time_counts_only_after_a_job_first_ran() {
        let q = queues(&[100.0], 2.0);
        let mut tickets = 0;
        let mut never_ran = Standing::new(0.0, 0);
        never_ran.advance(10_000.0, false, 1.0, &q, &mut tickets);
        assert_eq!((never_ran.queue, never_ran.waited), (0, 0.0));
    }

    #[test]
    fn a_starved_job_returns_to_the_top_queue_with_its_time_there_reset() {
        let q = queues(&[100.0], 2.0);
        let mut tickets = 5;
        let mut s = Standing::new(0.0, 0);
        s.advance(150.0, true, 1.0, &q, &mut tickets); // 150 GPU-s: Q1
        assert_eq!(s.queue, 1);
        // Preempted: it must wait 2 x 150 s before it is promoted.
        assert_eq!(s.advance(400.0, false, 1.0, &q, &mut tickets), None);
        assert_eq!(
            s.advance(450.0, false, 1.0, &q, &mut tickets),
            Some(Transition::Promoted {
                from: 1,
                waited: 300.0
            })
        );
        assert_eq!((s.queue, s.executed, s.waited), (0, 0.0, 0.0));
        assert_eq!(s.total, 150.0, "the total is kept");
        // Off: the same job would wait forever.
        let mut off = Standing {
            queue: 1,
            executed: 150.0,
            total: 150.0,
            ..Standing::default()
        };
        off.advance(1e9, false, 1.0, &queues(&[100.0], 0.0), &mut tickets);
        assert_eq!(off.queue, 1);
    }

    #[test]
    fn the_ranking_is_by_queue_then_first_come_first_served() {
        let at = |queue, ticket| Standing {
            queue,
            ticket,
            ..Standing::default()
        };
        let standings = [at(1, 0), at(0, 7), at(0, 3), at(2, 1), at(1, 4)];
        assert_eq!(ranking(&standings), [2, 1, 0, 4, 3]);
    }
}
