//! One streaming pass over a recording, keeping per job only what estimating its model
//! needs: its spec when first seen, the states it ran in over time (merged while they do
//! not change), its loss samples, and when it finished. A round's snapshot is dropped
//! once read, so a long recording costs memory by its jobs' histories, not its rounds.
//!
//! The state a job ran in between two rounds is read from the later round's snapshot:
//! a round's snapshot is taken before its decision is applied, so the job placed in
//! round `k` shows as running only in round `k + 1`. A job that finished at round
//! `k + 1` is not in that snapshot; its last stretch is read from round `k`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use switchyard_control::{CutShort, Recording, RecordingError};
use switchyard_core::{Job, JobPhase, LossSample, MoveKind, Node, TaskPhase, Trigger};

use crate::simulator::UtilPoint;

/// What the recording says about its cluster and its jobs.
#[derive(Debug)]
pub(crate) struct History {
    /// The seed of the recorded policies' randomness (the first segment's).
    pub(crate) seed: u64,
    /// The recorded cluster (`sim:WORKLOAD.yaml`, `kube`).
    pub(crate) cluster: String,
    /// The active policy of the first round.
    pub(crate) policy: String,
    /// Every node seen, as first seen, in the order first seen.
    pub(crate) nodes: Vec<Node>,
    /// Node changes the workload format cannot express (added later, gone, cordoned).
    pub(crate) node_changes: Vec<String>,
    /// Every job seen, in the order first seen.
    pub(crate) jobs: Vec<JobHistory>,
    /// Time of the first and the last round.
    pub(crate) first_time: f64,
    /// Time of the last round.
    pub(crate) last_time: f64,
    /// Rounds read.
    pub(crate) rounds: u64,
    /// Rounds the fallback decided because the active policy failed.
    pub(crate) policy_failures: u64,
    /// Rounds after a gap (deleted or damaged segments, a restart).
    pub(crate) gaps: u64,
    /// Cluster utilisation over time (cores in use and GPUs of running jobs, shares).
    pub(crate) utilisation: Vec<UtilPoint>,
    /// Segments that ended early.
    pub(crate) cut_short: Vec<CutShort>,
}

/// One job's recorded life.
#[derive(Debug)]
pub(crate) struct JobHistory {
    /// The job as first seen (its spec: tasks, replicas, priority, labels, ...).
    pub(crate) first: Arc<Job>,
    /// Each role's tasks: when first seen, how many then, what they request.
    pub(crate) roles: Vec<RoleSeen>,
    /// The states it was in, from its arrival to its end, merged while unchanged.
    pub(crate) stretches: Vec<Stretch>,
    /// Its loss samples, oldest first, each once.
    pub(crate) samples: Vec<LossSample>,
    /// When it finished (a `job-finished` trigger), if it did.
    pub(crate) finished: Option<f64>,
    /// When it left the cluster without finishing (deleted), if it did.
    pub(crate) left: Option<f64>,
    /// When its first task started.
    pub(crate) start_time: Option<f64>,
    /// Moves applied to it, by kind.
    pub(crate) migrations: u32,
    /// Re-scales applied to it.
    pub(crate) rescales: u32,
    /// Preemptions applied to it.
    pub(crate) preemptions: u32,
    /// Whether its tasks were ever restricted to a set of nodes.
    pub(crate) constrained: bool,
    /// The last view read and the state read from it.
    last_view: Arc<Job>,
    last_state: RunState,
    last_move: f64,
}

/// A role of a job as recorded.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RoleSeen {
    /// Its name.
    pub(crate) name: String,
    /// When its first task was seen.
    pub(crate) first_seen: f64,
    /// How many of its tasks were seen then.
    pub(crate) count: u32,
    /// What one of its tasks requests.
    pub(crate) requests: switchyard_core::Resources,
    /// Most cores one of its tasks was seen using.
    pub(crate) max_cores_used: f64,
}

/// How a job ran from `from` to `to`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stretch {
    /// Start, seconds.
    pub(crate) from: f64,
    /// End, seconds.
    pub(crate) to: f64,
    /// The state.
    pub(crate) state: RunState,
}

/// What a job's progress rate depends on, as the recording shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunState {
    /// Every task is bound and none is restarting: the job makes progress.
    pub(crate) progressing: bool,
    /// Cores each task of the scalable role used (millicores, as recorded).
    pub(crate) cores_millis: Vec<u64>,
    /// Replicas of the scalable role.
    pub(crate) replicas: u32,
    /// Its tasks span more than one node.
    pub(crate) spans: bool,
    /// Roles with tasks in the view: a job whose later roles' tasks are not created yet
    /// does not run, however many of its tasks are bound.
    pub(crate) roles: usize,
}

impl RunState {
    fn of(job: &Job) -> Self {
        let all_bound = !job.tasks.is_empty() && job.tasks.iter().all(|t| t.node.is_some());
        let restarting = job.phase == JobPhase::Restarting
            || job.tasks.iter().any(|t| t.phase == TaskPhase::Restarting);
        let first = job.tasks.first().and_then(|t| t.node.as_deref());
        Self {
            progressing: all_bound && !restarting,
            cores_millis: job
                .tasks
                .iter()
                .filter(|t| t.role == job.replicas.role)
                .map(|t| t.usage.map_or(0, |u| u.cpu_millis))
                .collect(),
            replicas: job.replicas.current,
            spans: job.tasks.iter().any(|t| t.node.as_deref() != first),
            roles: roles_of(job),
        }
    }

    /// The state of a job bound whole with every task using its CPU request: what a job
    /// placed and finished between two rounds is taken to have run in.
    fn as_requested(job: &Job) -> Self {
        let first = job.tasks.first().and_then(|t| t.node.as_deref());
        Self {
            progressing: true,
            cores_millis: job
                .tasks
                .iter()
                .filter(|t| t.role == job.replicas.role)
                .map(|t| t.requests.cpu_millis)
                .collect(),
            replicas: job.replicas.current,
            spans: job.tasks.iter().any(|t| t.node.as_deref() != first),
            roles: roles_of(job),
        }
    }
}

/// How many roles have tasks in the job's view.
fn roles_of(job: &Job) -> usize {
    let mut roles: Vec<&str> = job.tasks.iter().map(|t| t.role.as_str()).collect();
    roles.sort_unstable();
    roles.dedup();
    roles.len()
}

impl JobHistory {
    fn new(view: &Arc<Job>, time: f64) -> Self {
        let mut history = Self {
            first: Arc::clone(view),
            roles: Vec::new(),
            stretches: Vec::new(),
            samples: Vec::new(),
            finished: None,
            left: None,
            start_time: None,
            migrations: 0,
            rescales: 0,
            preemptions: 0,
            constrained: false,
            last_state: RunState::of(view),
            last_view: Arc::clone(view),
            last_move: f64::NEG_INFINITY,
        };
        history.read(view, time);
        history
    }

    /// Takes in what a new view of the job shows: roles, samples, moves, usage.
    fn read(&mut self, view: &Arc<Job>, time: f64) {
        for task in view.tasks.iter() {
            let cores = task.usage.map_or(0.0, |u| u.cpu_millis as f64 / 1000.0);
            match self.roles.iter_mut().find(|r| r.name == task.role) {
                Some(role) => role.max_cores_used = role.max_cores_used.max(cores),
                None => self.roles.push(RoleSeen {
                    name: task.role.clone(),
                    first_seen: time,
                    count: view.tasks.iter().filter(|t| t.role == task.role).count() as u32,
                    requests: task.requests,
                    max_cores_used: cores,
                }),
            }
            self.constrained |= task.eligible.is_some();
        }
        let newest = self.samples.last().map(|s| (s.time, s.step));
        self.samples.extend(
            view.loss
                .iter()
                .filter(|s| newest.is_none_or(|n| (s.time, s.step) > n)),
        );
        for moved in view.moves.iter().filter(|m| m.time > self.last_move) {
            match moved.kind {
                MoveKind::Migrated if moved.from_nodes != moved.to_nodes => self.migrations += 1,
                MoveKind::Rescaled => self.rescales += 1,
                MoveKind::Preempted => self.preemptions += 1,
                _ => {}
            }
        }
        if let Some(last) = view.moves.last() {
            self.last_move = self.last_move.max(last.time);
        }
        if self.start_time.is_none() {
            self.start_time = view.start_time;
        }
        self.last_state = RunState::of(view);
        self.last_view = Arc::clone(view);
    }

    fn push(&mut self, from: f64, to: f64, state: RunState) {
        if to <= from {
            return;
        }
        match self.stretches.last_mut() {
            Some(last) if last.state == state && last.to == from => last.to = to,
            _ => self.stretches.push(Stretch { from, to, state }),
        }
    }
}

/// Reads the whole recording once, streaming.
pub(crate) fn read(recording: &Recording) -> Result<History, RecordingError> {
    let mut rounds = recording.rounds();
    let mut history = History {
        seed: 0,
        cluster: String::new(),
        policy: String::new(),
        nodes: Vec::new(),
        node_changes: Vec::new(),
        jobs: Vec::new(),
        first_time: 0.0,
        last_time: 0.0,
        rounds: 0,
        policy_failures: 0,
        gaps: 0,
        utilisation: Vec::new(),
        cut_short: Vec::new(),
    };
    let mut job_at: HashMap<String, usize> = HashMap::new();
    let mut node_at: HashMap<String, usize> = HashMap::new();
    // The previous round's jobs (by index into `history.jobs`) and time.
    let mut previous: Option<(f64, Vec<usize>)> = None;
    let mut present_nodes: BTreeMap<String, bool> = BTreeMap::new();
    for round in rounds.by_ref() {
        let round = round?;
        let snapshot = &round.snapshot;
        let time = snapshot.time;
        if history.rounds == 0 {
            history.seed = round.header.seed;
            history.cluster = round.header.cluster.clone();
            history.policy = round.policy.active.name.clone();
            history.first_time = time;
        } else if !round.continues {
            history.gaps += 1;
        }
        if time < history.last_time {
            return Err(RecordingError::Malformed {
                path: recording.segments()[0].clone(),
                line: 0,
                message: format!(
                    "time goes back from {} s to {time} s at round {} of run {}: a recording of several runs of a simulator, each counting from 0, cannot be one workload; keep one run's segments",
                    history.last_time, round.record.decision.round, round.header.run
                ),
            });
        }
        history.rounds += 1;
        history.last_time = time;
        if round.record.decision.arm_a.failure.is_some() {
            history.policy_failures += 1;
        }
        read_nodes(
            &mut history,
            &mut node_at,
            &mut present_nodes,
            &snapshot.nodes,
            time,
        );
        let finished: Vec<&str> = snapshot
            .triggers
            .iter()
            .filter_map(|t| match t {
                Trigger::JobFinished(id) => Some(id.as_str()),
                _ => None,
            })
            .collect();
        let mut now: Vec<usize> = Vec::with_capacity(snapshot.jobs.len());
        for view in &snapshot.jobs {
            let index = match job_at.get(view.id.as_str()) {
                Some(&i) => i,
                None => {
                    job_at.insert(view.id.clone(), history.jobs.len());
                    history.jobs.push(JobHistory::new(view, time));
                    history.jobs.len() - 1
                }
            };
            now.push(index);
        }
        // Jobs that left at this round, as the previous one showed them: they ran until
        // it, though this snapshot no longer has them.
        let mut gone: Vec<Arc<Job>> = Vec::new();
        if let Some((before, jobs_before)) = &previous {
            // Nodes that jobs finishing now left: their neighbours' cores in this
            // snapshot are those after the finish, not those they ran with until it.
            let freed: HashSet<&str> = jobs_before
                .iter()
                .map(|&i| &history.jobs[i])
                .filter(|j| finished.contains(&j.first.id.as_str()))
                .filter(|j| !now.iter().any(|&n| history.jobs[n].first.id == j.first.id))
                .flat_map(|j| j.last_view.tasks.iter().filter_map(|t| t.node.as_deref()))
                .collect();
            let freed: HashSet<String> = freed.into_iter().map(str::to_string).collect();
            let mut here = vec![false; history.jobs.len()];
            let mut ran_in: Vec<Option<RunState>> = vec![None; history.jobs.len()];
            for (&i, view) in now.iter().zip(&snapshot.jobs) {
                here[i] = true;
                let job = &mut history.jobs[i];
                if !Arc::ptr_eq(&job.last_view, view) {
                    let before = job.last_state.clone();
                    job.read(view, time);
                    let beside_freed = view
                        .tasks
                        .iter()
                        .any(|t| t.node.as_deref().is_some_and(|n| freed.contains(n)));
                    // Running before and after with the same tasks: until the finish
                    // it had the cores the previous snapshot showed.
                    if beside_freed
                        && before.progressing
                        && job.last_state.progressing
                        && before.cores_millis.len() == job.last_state.cores_millis.len()
                    {
                        ran_in[i] = Some(before);
                    }
                }
            }
            for &i in jobs_before {
                let job = &mut history.jobs[i];
                if !here[i] {
                    gone.push(job.last_view.clone());
                }
                if here[i] {
                    let state = ran_in[i].take().unwrap_or_else(|| job.last_state.clone());
                    job.push(*before, time, state);
                    continue;
                }
                // Gone since the previous round: its last stretch as the previous
                // snapshot showed it, or, when it finished without any snapshot showing
                // it run (placed in the previous round), as bound whole at its requests.
                let finished_now = finished.contains(&job.first.id.as_str());
                let state = if finished_now && !job.last_state.progressing {
                    RunState::as_requested(&job.last_view)
                } else {
                    job.last_state.clone()
                };
                job.push(*before, time, state);
                if finished_now {
                    job.finished = Some(time);
                } else {
                    job.left = Some(time);
                }
            }
        }
        // The cluster between the previous round and this one, as this one shows it
        // (the previous round's decision applied).
        let since = previous.as_ref().map_or(time, |(before, _)| *before);
        utilisation(&mut history, snapshot, &gone, since);
        previous = Some((time, now));
    }
    history.cut_short = rounds.cut_short().to_vec();
    // A job runs only with every role's tasks created and bound: a stretch in which
    // some role had no task yet made no progress.
    for job in &mut history.jobs {
        let roles = job.roles.len();
        for stretch in &mut job.stretches {
            stretch.state.progressing &= stretch.state.roles == roles;
        }
    }
    Ok(history)
}

fn read_nodes(
    history: &mut History,
    node_at: &mut HashMap<String, usize>,
    present: &mut BTreeMap<String, bool>,
    nodes: &[Arc<Node>],
    time: f64,
) {
    let first_round = history.rounds == 1;
    for node in nodes {
        match node_at.get(node.name.as_str()) {
            None => {
                if !first_round {
                    history
                        .node_changes
                        .push(format!("node {} joined at {time} s", node.name));
                }
                node_at.insert(node.name.clone(), history.nodes.len());
                history.nodes.push(Node::clone(node));
                present.insert(node.name.clone(), node.schedulable);
                if !node.schedulable {
                    history
                        .node_changes
                        .push(format!("node {} unschedulable at {time} s", node.name));
                }
            }
            Some(_) => {
                let was = present.insert(node.name.clone(), node.schedulable);
                if was != Some(node.schedulable) {
                    let what = match (was, node.schedulable) {
                        (None, _) => "back",
                        (Some(_), true) => "schedulable again",
                        (Some(_), false) => "unschedulable",
                    };
                    history
                        .node_changes
                        .push(format!("node {} {what} at {time} s", node.name));
                }
            }
        }
    }
    if present.len() > nodes.len() {
        let here: HashSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let gone: Vec<String> = present
            .keys()
            .filter(|name| !here.contains(name.as_str()))
            .cloned()
            .collect();
        for name in gone {
            present.remove(&name);
            history
                .node_changes
                .push(format!("node {name} left at {time} s"));
        }
    }
}

/// The cluster's use from `time` (the previous round) to this round, as `snapshot` shows
/// it, with the jobs `gone` at this round (their last views) added: they ran until it.
fn utilisation(
    history: &mut History,
    snapshot: &switchyard_core::Snapshot,
    gone: &[Arc<Job>],
    time: f64,
) {
    let (mut cores, mut total_cores, mut gpus, mut total_gpus) = (0.0, 0.0, 0.0, 0.0);
    for node in &snapshot.nodes {
        total_cores += node.allocatable.cpu_millis as f64 / 1000.0;
        total_gpus += node.allocatable.gpus as f64;
        cores += node.usage.map_or(0.0, |u| u.cpu_millis as f64 / 1000.0);
    }
    let running_gpus = |job: &Job| match RunState::of(job).progressing {
        true => job.tasks.iter().map(|t| t.requests.gpus as f64).sum(),
        false => 0.0,
    };
    gpus += snapshot.jobs.iter().map(|j| running_gpus(j)).sum::<f64>();
    for job in gone {
        gpus += running_gpus(job);
        cores += job
            .tasks
            .iter()
            .filter_map(|t| t.usage)
            .map(|u| u.cpu_millis as f64 / 1000.0)
            .sum::<f64>();
    }
    let share = |used: f64, total: f64| if total > 0.0 { used / total } else { 0.0 };
    let point = UtilPoint {
        time,
        cpu: share(cores, total_cores),
        gpu: share(gpus, total_gpus),
    };
    match history.utilisation.last_mut() {
        Some(last) if last.time == time => *last = point,
        Some(last) if last.cpu == point.cpu && last.gpu == point.gpu => {}
        _ => history.utilisation.push(point),
    }
}
