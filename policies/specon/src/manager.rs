//! The manager side: Algorithm 2 (speculative scheduling of one converged job) and
//! Algorithm 3 (rebalancing), over a [`View`] of which worker hosts which job.
//!
//! The view is updated as moves are decided, so the second decision of a round sees the
//! first one's effect on scores, job counts and free capacity. Building actions and
//! remembering anything between calls is `policy`'s business, not this module's.
//!
//! Jobs are named by their position in the snapshot's job list and workers by their name
//! as the snapshot spells it (borrowed, never copied): a round touches every job, and
//! hashing or cloning thousands of ids per round would be most of its cost.

use std::collections::HashMap;

use switchyard_policy_sdk::{Resources, Snapshot, Task, cluster::Ledger};

use crate::monitor::Category;

/// Algorithm 2's category weights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weights {
    /// w_pc (paper: 2).
    pub pc: f64,
    /// w_wc (paper: 1.5).
    pub wc: f64,
    /// w_cc (paper: 1).
    pub cc: f64,
}

impl Weights {
    /// The weight of one job of `category`.
    pub fn of(self, category: Category) -> f64 {
        match category {
            Category::PC => self.pc,
            Category::WC => self.wc,
            Category::CC => self.cc,
        }
    }
}

/// How Algorithm 2 scores the requesting job's current host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostScore {
    /// Without the job: every worker is scored as it is before the job lands on it, so
    /// the job moves only to a worker that stays below its host even after the move.
    WithoutJob,
    /// With the job, as line 3 of the pseudo-code computes it: the host carries the
    /// job's own weight and every other worker does not, so a CC job leaves for a
    /// worker up to w_cc lighter and makes it heavier than the host was.
    WithJob,
}

impl HostScore {
    /// The parameter's choices.
    pub const CHOICES: &'static [&'static str] = &["without-job", "with-job"];

    /// From the parameter's value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "without-job" => Some(Self::WithoutJob),
            "with-job" => Some(Self::WithJob),
            _ => None,
        }
    }
}

/// Where Algorithm 1's line 15 counts the progressing and watching jobs before a
/// converged job may ask to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyScope {
    /// Over the whole cluster, as line 15 is printed (`|PC| + |WC| > 1`, no worker
    /// subscript): a converged job moves while other jobs still learn anywhere.
    Cluster,
    /// On the requesting job's own worker, with the subscript that lines 7-13 carry.
    Worker,
}

impl BusyScope {
    /// The parameter's choices.
    pub const CHOICES: &'static [&'static str] = &["cluster", "worker"];

    /// From the parameter's value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "cluster" => Some(Self::Cluster),
            "worker" => Some(Self::Worker),
            _ => None,
        }
    }
}

/// One job with a worker: bound, restarting, or being placed this round.
#[derive(Clone, Debug)]
pub struct Hosted<'a> {
    /// The job's position in the snapshot's job list.
    pub job: usize,
    /// The worker it lives on (its first task's node).
    pub node: &'a str,
    /// Its current category.
    pub category: Category,
    /// Sum of its tasks' requests (what a move needs on the target).
    pub request: Resources,
    /// Its tasks, whose eligibility sets limit where it may move.
    pub tasks: &'a [Task],
}

/// Workers, the jobs they host and what is free, as decided so far this round.
///
/// Jobs are indexed by position and counted per worker and category as they move, so a
/// score or a count is a lookup, not a scan of every job: a round stays near-linear on
/// clusters of thousands of workers.
#[derive(Clone, Debug)]
pub struct View<'a> {
    snapshot: &'a Snapshot,
    /// Free capacity, charged by placements and moves of this round.
    pub ledger: Ledger,
    /// Hosted jobs in snapshot order.
    hosted: Vec<Hosted<'a>>,
    /// Job position -> its position in `hosted` (`NOT_HOSTED` when it has none).
    by_job: Vec<usize>,
    /// Worker -> its hosted jobs by category.
    tallies: HashMap<&'a str, Tally>,
    /// Worker -> its position in the snapshot's node list.
    nodes: HashMap<&'a str, usize>,
}

/// `View::by_job`'s mark for a job without a worker.
const NOT_HOSTED: usize = usize::MAX;

/// Jobs of each category on one worker.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    pc: usize,
    wc: usize,
    cc: usize,
}

impl Tally {
    fn of(&mut self, category: Category) -> &mut usize {
        match category {
            Category::PC => &mut self.pc,
            Category::WC => &mut self.wc,
            Category::CC => &mut self.cc,
        }
    }

    fn total(&self) -> usize {
        self.pc + self.wc + self.cc
    }
}

/// Where Algorithm 2 sends a job.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice<'a> {
    /// The chosen worker.
    pub target: &'a str,
    /// The chosen worker is the current host: stay and mark migrated (lines 8-10).
    pub stay: bool,
    /// Score of the current host (without the job under [`HostScore::WithoutJob`]).
    pub from_score: f64,
    /// Score of the chosen worker.
    pub to_score: f64,
    /// The candidate set T.
    pub candidates: Vec<&'a str>,
}

/// A rebalancing move decided by Algorithm 3.
#[derive(Clone, Debug, PartialEq)]
pub struct Move<'a> {
    /// The job's position in the snapshot.
    pub job: usize,
    /// Worker it leaves.
    pub from: &'a str,
    /// Worker it goes to.
    pub to: &'a str,
    /// Its converged duration d.
    pub duration: f64,
    /// Balance factor bf of the round.
    pub bf: usize,
    /// Which branch of Algorithm 3 chose it: true for "an idle worker exists".
    pub idle_branch: bool,
}

impl<'a> View<'a> {
    /// A view of `snapshot` with `ledger` as the free capacity and `hosted` jobs.
    pub fn new(snapshot: &'a Snapshot, ledger: Ledger, hosted: Vec<Hosted<'a>>) -> Self {
        let jobs = hosted.iter().map(|h| h.job + 1).max().unwrap_or(0);
        let mut by_job = vec![NOT_HOSTED; jobs.max(snapshot.jobs.len())];
        let mut tallies: HashMap<&'a str, Tally> = HashMap::with_capacity(snapshot.nodes.len());
        for (i, h) in hosted.iter().enumerate() {
            if by_job[h.job] == NOT_HOSTED {
                by_job[h.job] = i;
            }
            *tallies.entry(h.node).or_default().of(h.category) += 1;
        }
        let mut nodes = HashMap::with_capacity(snapshot.nodes.len());
        for (i, n) in snapshot.nodes.iter().enumerate() {
            nodes.entry(n.name.as_str()).or_insert(i);
        }
        Self {
            snapshot,
            ledger,
            hosted,
            by_job,
            tallies,
            nodes,
        }
    }

    /// Hosted jobs in snapshot order.
    pub fn hosted(&self) -> &[Hosted<'a>] {
        &self.hosted
    }

    /// Worker names in snapshot order (W).
    pub fn workers(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        self.snapshot.nodes.iter().map(|n| n.name.as_str())
    }

    /// The hosted entry of the job at position `job`.
    pub fn get(&self, job: usize) -> Option<&Hosted<'a>> {
        self.slot(job).map(|i| &self.hosted[i])
    }

    /// The position in `hosted` of the job at position `job`.
    fn slot(&self, job: usize) -> Option<usize> {
        self.by_job.get(job).copied().filter(|&i| i != NOT_HOSTED)
    }

    /// Number of active jobs on `node` (|w_i|).
    pub fn count(&self, node: &str) -> usize {
        self.tallies.get(node).map_or(0, Tally::total)
    }

    /// Number of jobs of `category` on `node`.
    pub fn count_of(&self, node: &str, category: Category) -> usize {
        self.tallies
            .get(node)
            .map_or(0, |t| *t.clone().of(category))
    }

    /// Number of hosted jobs of `category` on every worker.
    pub fn total_of(&self, category: Category) -> usize {
        self.tallies.values().map(|t| *t.clone().of(category)).sum()
    }

    /// S_w = |PC| w_pc + |WC| w_wc + |CC| w_cc (Algorithm 2, line 3).
    pub fn score(&self, node: &str, w: Weights) -> f64 {
        let t = self.tallies.get(node).copied().unwrap_or_default();
        t.pc as f64 * w.pc + t.wc as f64 * w.wc + t.cc as f64 * w.cc
    }

    /// R(w, t): the CPU share of `node` in use, measured when the node reports usage,
    /// else requested (including this round's placements and moves).
    pub fn consumption(&self, node: &str) -> f64 {
        let Some(n) = self.nodes.get(node).map(|&i| &self.snapshot.nodes[i]) else {
            return f64::INFINITY;
        };
        let total = n.allocatable.cpu_millis.max(1) as f64;
        let used = match n.usage {
            Some(u) => u.cpu_millis as f64,
            None => {
                let free = self.ledger.free(node).map_or(0, |f| f.cpu_millis);
                n.allocatable.cpu_millis.saturating_sub(free) as f64
            }
        };
        used / total
    }

    /// Moves the job at position `job` to `to` in the view: frees its request on the
    /// old host, charges the new one. Returns false (and changes nothing) when it does
    /// not fit there.
    pub fn relocate(&mut self, job: usize, to: &'a str) -> bool {
        let Some(i) = self.slot(job) else {
            return false;
        };
        let request = self.hosted[i].request;
        if self.hosted[i].node == to {
            return true;
        }
        if !self.may_run(to, &self.hosted[i]) || !self.ledger.charge(to, &request) {
            return false;
        }
        let category = self.hosted[i].category;
        let from = std::mem::replace(&mut self.hosted[i].node, to);
        self.ledger.release(from, &request);
        if let Some(t) = self.tallies.get_mut(from) {
            *t.of(category) -= 1;
        }
        *self.tallies.entry(to).or_default().of(category) += 1;
        true
    }

    /// True when every task of `job` may run on `node` and the job fits there whole.
    fn fits(&self, node: &str, job: &Hosted) -> bool {
        self.may_run(node, job) && self.ledger.fits(node, &job.request)
    }

    fn may_run(&self, node: &str, job: &Hosted) -> bool {
        job.tasks.iter().all(|t| self.ledger.may_run(node, t))
    }
}

/// Algorithm 2 for the job at position `job`: score every worker (the current host
/// with or without the job, `host_score`), keep the minimum-score ones (T), stay when
/// the current host is in T, else the only candidate, else the candidate with the
/// lowest R(w, t) (ties: snapshot order). Workers the job does not fit on are not
/// candidates (the paper ignores capacity; the host would refuse the move). `None` when
/// the job is not hosted.
pub fn speculative_host<'a>(
    view: &View<'a>,
    job: usize,
    weights: Weights,
    host_score: HostScore,
) -> Option<Choice<'a>> {
    let me = view.get(job)?;
    let own = match host_score {
        HostScore::WithoutJob => weights.of(me.category),
        HostScore::WithJob => 0.0,
    };
    let score = |w: &str| view.score(w, weights) - if w == me.node { own } else { 0.0 };
    let eligible: Vec<&'a str> = view
        .workers()
        .filter(|w| *w == me.node || view.fits(w, me))
        .collect();
    let scores: Vec<(&'a str, f64)> = eligible.iter().map(|w| (*w, score(w))).collect();
    let min = scores.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
    let candidates: Vec<&'a str> = scores
        .iter()
        .filter(|s| (s.1 - min).abs() < 1e-9)
        .map(|s| s.0)
        .collect();
    let from_score = score(me.node);
    let target = if candidates.contains(&me.node) {
        me.node
    } else if candidates.len() == 1 {
        candidates[0]
    } else {
        candidates
            .iter()
            .copied()
            .fold(None::<(&'a str, f64)>, |best, w| {
                let r = view.consumption(w);
                match best {
                    Some(b) if b.1 <= r => Some(b),
                    _ => Some((w, r)),
                }
            })?
            .0
    };
    Some(Choice {
        target,
        stay: target == me.node,
        from_score,
        to_score: score(target),
        candidates,
    })
}

/// Algorithm 3. `durations` are the rebalance candidates D: hosted jobs (by snapshot
/// position) that converged (were marked migrated) and were never rebalanced, with
/// d = now - t_cj. Applies the moves to `view` and returns them.
///
/// bf = floor(active jobs / |W|). With idle workers: each idle worker with fewer than
/// bf jobs receives the job of smallest d. Without: each worker with fewer than bf - 1
/// jobs receives the job of smallest d among those on workers outside that set. One job
/// per receiving worker per run, as in the pseudo-code. A candidate that is the only job
/// on its worker is not taken (moving it only moves the idle worker), and a worker the
/// job does not fit on does not receive it.
pub fn rebalance<'a>(view: &mut View<'a>, durations: &[(usize, f64)]) -> Vec<Move<'a>> {
    let workers: Vec<&'a str> = view.workers().collect();
    if workers.is_empty() {
        return vec![];
    }
    let active = view.hosted().len();
    let bf = active / workers.len();
    let mut pool: Vec<(usize, f64)> = durations.to_vec();
    pool.sort_by(|a, b| a.1.total_cmp(&b.1));
    let idle: Vec<&'a str> = workers
        .iter()
        .copied()
        .filter(|w| view.count(w) == 0)
        .collect();
    let mut moves = Vec::new();
    let idle_branch = !idle.is_empty();
    let receivers: Vec<&'a str> = if idle_branch {
        idle.into_iter().filter(|w| view.count(w) < bf).collect()
    } else {
        workers
            .iter()
            .copied()
            .filter(|w| view.count(w) + 1 < bf)
            .collect()
    };
    let receiving: std::collections::HashSet<&str> = receivers.iter().copied().collect();
    for &to in &receivers {
        let pick = pool.iter().position(|&(job, _)| {
            view.get(job).is_some_and(|h| {
                !receiving.contains(h.node) && view.count(h.node) > 1 && view.fits(to, h)
            })
        });
        let Some(i) = pick else { continue };
        let (job, duration) = pool.remove(i);
        let from = view.get(job).map_or("", |h| h.node);
        if view.relocate(job, to) {
            moves.push(Move {
                job,
                from,
                to,
                duration,
                bf,
                idle_branch,
            });
        }
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;
    use Category::*;
    use switchyard_policy_sdk::testing::*;
    use switchyard_policy_sdk::{Node, Snapshot};

    const W: Weights = Weights {
        pc: 2.0,
        wc: 1.5,
        cc: 1.0,
    };

    // Jobs are snapshot positions; these name the ones the tests use.
    const A: usize = 0;
    const B: usize = 1;
    const C: usize = 2;
    const D: usize = 3;
    const E: usize = 4;
    const X: usize = 5;
    const P: usize = 6;
    const Q: usize = 7;

    fn hosted(job: usize, node: &'static str, category: Category) -> Hosted<'static> {
        Hosted {
            job,
            node,
            category,
            request: res(1000, 0),
            tasks: &[],
        }
    }

    fn snap(nodes: Vec<Node>) -> Snapshot {
        snapshot(0.0, nodes, vec![])
    }

    fn view<'a>(s: &'a Snapshot, hosted: Vec<Hosted<'a>>) -> View<'a> {
        let mut ledger = Ledger::new(s);
        for h in &hosted {
            assert!(ledger.charge(h.node, &h.request));
        }
        View::new(s, ledger, hosted)
    }

    #[test]
    fn a_worker_scores_its_categories_times_their_weights() {
        let s = snap(vec![node("w1", 8000)]);
        let v = view(
            &s,
            vec![
                hosted(A, "w1", PC),
                hosted(B, "w1", WC),
                hosted(C, "w1", CC),
            ],
        );
        assert_eq!(v.score("w1", W), 4.5);
    }

    #[test]
    fn a_single_min_score_worker_gets_the_job() {
        let s = snap(vec![node("w1", 8000), node("w2", 8000), node("w3", 8000)]);
        let v = view(
            &s,
            vec![
                hosted(X, "w1", CC),
                hosted(P, "w1", PC),
                hosted(Q, "w2", WC),
            ],
        );
        let c = speculative_host(&v, X, W, HostScore::WithJob).unwrap();
        assert_eq!(
            (c.target, c.stay, c.from_score, c.to_score),
            ("w3", false, 3.0, 0.0)
        );
    }

    #[test]
    fn several_min_score_candidates_are_ranked_by_resource_consumption() {
        let s = snap(vec![
            node("w1", 8000),
            node("w2", 8000).cpu_usage(6000),
            node("w3", 8000).cpu_usage(1000),
        ]);
        let v = view(&s, vec![hosted(X, "w1", CC), hosted(P, "w1", PC)]);
        let c = speculative_host(&v, X, W, HostScore::WithJob).unwrap();
        assert_eq!(c.candidates, ["w2", "w3"]);
        assert_eq!(c.target, "w3");
    }

    #[test]
    fn without_usage_the_least_requested_candidate_wins() {
        let s = snap(vec![
            node("w1", 8000),
            node("w2", 8000).requested(res(4000, 0)),
            node("w3", 8000),
        ]);
        let v = view(&s, vec![hosted(X, "w1", CC), hosted(P, "w1", PC)]);
        assert_eq!(
            speculative_host(&v, X, W, HostScore::WithJob)
                .unwrap()
                .target,
            "w3"
        );
    }

    #[test]
    fn the_current_host_among_the_candidates_means_stay() {
        let s = snap(vec![node("w1", 8000), node("w2", 8000)]);
        let v = view(&s, vec![hosted(X, "w1", CC), hosted(P, "w2", CC)]);
        let c = speculative_host(&v, X, W, HostScore::WithJob).unwrap();
        assert!(c.stay);
        assert_eq!(c.target, "w1");
    }

    #[test]
    fn without_the_job_its_host_is_scored_as_the_others_would_be_before_it_lands() {
        // w1: X (CC) and a PC job, 3 with X and 2 without; w2: a WC and a CC job, 2.5.
        let s = snap(vec![node("w1", 8000), node("w2", 8000)]);
        let v = view(
            &s,
            vec![
                hosted(X, "w1", CC),
                hosted(P, "w1", PC),
                hosted(Q, "w2", WC),
                hosted(A, "w2", CC),
            ],
        );
        // The pseudo-code's line 3 moves X to w2, which then scores 3.5, above the 3 its
        // host had.
        let literal = speculative_host(&v, X, W, HostScore::WithJob).unwrap();
        assert_eq!((literal.target, literal.from_score), ("w2", 3.0));
        // Without X its host scores 2, below w2's 2.5: X stays.
        let c = speculative_host(&v, X, W, HostScore::WithoutJob).unwrap();
        assert_eq!((c.target, c.stay, c.from_score), ("w1", true, 2.0));
        // A worker lighter than the host even with X on it still receives it.
        let s = snap(vec![node("w1", 8000), node("w2", 8000)]);
        let v = view(
            &s,
            vec![
                hosted(X, "w1", CC),
                hosted(P, "w1", PC),
                hosted(Q, "w2", CC),
            ],
        );
        let c = speculative_host(&v, X, W, HostScore::WithoutJob).unwrap();
        assert_eq!((c.target, c.from_score, c.to_score), ("w2", 2.0, 1.0));
    }

    #[test]
    fn a_worker_the_job_does_not_fit_on_is_no_candidate() {
        let s = snap(vec![
            node("w1", 8000),
            node("w2", 8000).requested(res(7500, 0)),
            node("w3", 8000),
        ]);
        let v = view(
            &s,
            vec![
                hosted(X, "w1", CC),
                hosted(P, "w1", PC),
                hosted(Q, "w3", CC),
            ],
        );
        // w2 (score 0) is full; w3 (score 1) is the minimum among the workers with room.
        assert_eq!(
            speculative_host(&v, X, W, HostScore::WithJob)
                .unwrap()
                .target,
            "w3"
        );
    }

    #[test]
    fn an_idle_worker_receives_the_most_recently_converged_job() {
        let s = snap(vec![node("w1", 8000), node("w2", 8000), node("w3", 8000)]);
        let mut v = view(
            &s,
            vec![
                hosted(A, "w1", CC),
                hosted(B, "w1", CC),
                hosted(C, "w1", PC),
                hosted(D, "w2", PC),
                hosted(E, "w2", PC),
            ],
        );
        let moves = rebalance(&mut v, &[(A, 100.0), (B, 10.0)]);
        assert_eq!(moves.len(), 1);
        assert_eq!((moves[0].job, moves[0].to, moves[0].bf), (B, "w3", 1));
        assert!(moves[0].idle_branch);
        assert_eq!(v.count("w3"), 1);
    }

    #[test]
    fn an_idle_worker_receives_nothing_when_bf_is_zero() {
        let s = snap(vec![node("w1", 8000), node("w2", 8000), node("w3", 8000)]);
        let mut v = view(&s, vec![hosted(A, "w1", CC), hosted(B, "w1", CC)]);
        assert!(rebalance(&mut v, &[(A, 1.0)]).is_empty());
    }

    #[test]
    fn without_idle_workers_a_worker_below_bf_minus_one_receives_from_outside_the_set() {
        let s = snap(vec![
            node("w1", 16000),
            node("w2", 16000),
            node("w3", 16000),
        ]);
        // Jobs 0-4 on w1, job 5 on w2, jobs 6-8 on w3.
        let mut hosts: Vec<Hosted> = (0..5).map(|i| hosted(i, "w1", CC)).collect();
        hosts.push(hosted(5, "w2", CC));
        hosts.extend((6..9).map(|i| hosted(i, "w3", CC)));
        let mut v = view(&s, hosts);
        // 9 jobs on 3 workers: bf = 3; only w2 (1 job) is below bf - 1 = 2.
        let d = [(5, 1.0), (6, 5.0), (0, 50.0)];
        let moves = rebalance(&mut v, &d);
        assert_eq!(moves.len(), 1);
        assert_eq!((moves[0].job, moves[0].from, moves[0].to), (6, "w3", "w2"));
        assert!(!moves[0].idle_branch);
    }

    #[test]
    fn a_balanced_cluster_is_left_alone() {
        let s = snap(vec![node("w1", 8000), node("w2", 8000)]);
        let mut v = view(
            &s,
            vec![
                hosted(A, "w1", CC),
                hosted(B, "w1", CC),
                hosted(C, "w2", CC),
            ],
        );
        assert!(rebalance(&mut v, &[(A, 1.0), (C, 2.0)]).is_empty());
    }
}
