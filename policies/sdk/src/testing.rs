//! Fixture builders for the policies' native unit tests (feature `test-support`).
//!
//! `snapshot(t, nodes, jobs)` charges every bound task's requests to its node, so a
//! fixture never disagrees with itself about free capacity. Nothing here is used by a
//! policy at run time.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::{
    Job, JobMove, JobPhase, Label, LossSeries, LossUpdates, MoveKind, Node, NodeSet, Replicas,
    Resources, Setting, Snapshot, SnapshotDelta, Task, TaskPhase, Trigger, cluster::ResourcesExt,
};

/// One GiB in bytes.
pub const GIB: u64 = 1 << 30;

/// `cpu_millis` of CPU, 1 GiB of memory and `gpus` GPUs.
pub fn res(cpu_millis: u64, gpus: u32) -> Resources {
    Resources {
        cpu_millis,
        memory_bytes: GIB,
        gpus,
    }
}

/// A schedulable node with `cpu_millis` of CPU, 64 GiB of memory, no GPU, nothing bound.
pub fn node(name: &str, cpu_millis: u64) -> Node {
    Node {
        name: name.into(),
        allocatable: Resources {
            cpu_millis,
            memory_bytes: 64 * GIB,
            gpus: 0,
        },
        requested: Resources::zero(),
        usage: None,
        labels: vec![],
        schedulable: true,
    }
}

/// Chained changes to a [`node`] fixture.
pub trait NodeBuilder {
    /// Offers `gpus` GPUs.
    fn gpus(self, gpus: u32) -> Node;
    /// Reports `cpu_millis` of measured CPU usage.
    fn cpu_usage(self, cpu_millis: u64) -> Node;
    /// Already has `requested` charged by tasks outside the fixture's jobs.
    fn requested(self, requested: Resources) -> Node;
    /// Cordoned: nothing new may go there.
    fn cordoned(self) -> Node;
}

impl NodeBuilder for Node {
    fn gpus(mut self, gpus: u32) -> Node {
        self.allocatable.gpus = gpus;
        self
    }
    fn cpu_usage(mut self, cpu_millis: u64) -> Node {
        self.usage = Some(Resources {
            cpu_millis,
            memory_bytes: 0,
            gpus: 0,
        });
        self
    }
    fn requested(mut self, requested: Resources) -> Node {
        self.requested = requested;
        self
    }
    fn cordoned(mut self) -> Node {
        self.schedulable = false;
        self
    }
}

fn task(name: &str, role: &str) -> Task {
    Task {
        name: name.into(),
        role: role.into(),
        node: None,
        phase: TaskPhase::Pending,
        requests: res(1000, 0),
        cpu_weight: 1.0,
        usage: None,
        eligible: None,
    }
}

/// A waiting single-container job submitted at 0: one task `main` asking 1 CPU, 1 GiB.
pub fn job(id: &str) -> Job {
    Job {
        id: id.into(),
        phase: JobPhase::Waiting,
        submit_time: 0.0,
        start_time: None,
        priority: 0,
        utility: 1.0,
        tasks: vec![task("main", "main")],
        replicas: Replicas {
            role: "main".into(),
            current: 1,
            min: 1,
            max: 1,
        },
        loss: loss_series(&[]),
        metric_rises: false,
        moves: vec![],
        checkpointable: true,
        labels: vec![],
    }
}

/// Chained changes to a [`job`] fixture.
pub trait JobBuilder {
    /// Submitted at `time`.
    fn submitted_at(self, time: f64) -> Job;
    /// Every task asks `cpu_millis`, 1 GiB and `gpus`.
    fn requests(self, cpu_millis: u64, gpus: u32) -> Job;
    /// Replaces the tasks by `ps` parameter servers and `workers` workers (scalable
    /// between `min` and `max`), all pending.
    fn distributed(self, ps: u32, workers: u32, min: u32, max: u32) -> Job;
    /// Every task bound to `node` and running.
    fn running_on(self, node: &str) -> Job;
    /// Task `task` bound to `node` and running.
    fn task_on(self, task: &str, node: &str) -> Job;
    /// Evaluation samples `(time, value)`, oldest first.
    fn loss(self, points: &[(f64, f64)]) -> Job;
    /// Every task reports `cpu_millis` of measured usage.
    fn cpu_usage(self, cpu_millis: u64) -> Job;
    /// Every task runs at CPU weight `weight`.
    fn cpu_weight(self, weight: f64) -> Job;
    /// Has a `kind` move in its history at `time`, with `purpose` (a migration's tag),
    /// from and to the node its first task is on.
    fn moved(self, time: f64, kind: MoveKind, purpose: &str) -> Job;
    /// Cannot save a checkpoint (so cannot be migrated, rescaled or preempted).
    fn not_checkpointable(self) -> Job;
    /// Utility of finishing it.
    fn utility(self, utility: f64) -> Job;
    /// Carries the label `key=value`.
    fn label(self, key: &str, value: &str) -> Job;
}

impl JobBuilder for Job {
    fn submitted_at(mut self, time: f64) -> Job {
        self.submit_time = time;
        self
    }
    fn requests(mut self, cpu_millis: u64, gpus: u32) -> Job {
        for t in &mut self.tasks {
            t.requests = res(cpu_millis, gpus);
        }
        self
    }
    fn distributed(mut self, ps: u32, workers: u32, min: u32, max: u32) -> Job {
        let requests = self.tasks[0].requests;
        self.tasks = (0..ps)
            .map(|i| task(&format!("ps-{i}"), "ps"))
            .chain((0..workers).map(|i| task(&format!("worker-{i}"), "worker")))
            .map(|mut t| {
                t.requests = requests;
                t
            })
            .collect();
        self.replicas = Replicas {
            role: "worker".into(),
            current: workers,
            min,
            max,
        };
        self
    }
    fn running_on(mut self, node: &str) -> Job {
        let names: Vec<String> = self.tasks.iter().map(|t| t.name.clone()).collect();
        for name in names {
            self = self.task_on(&name, node);
        }
        self
    }
    fn task_on(mut self, task: &str, node: &str) -> Job {
        let t = self
            .tasks
            .iter_mut()
            .find(|t| t.name == task)
            .expect("fixture task exists");
        t.node = Some(node.into());
        t.phase = TaskPhase::Running;
        self.phase = JobPhase::Running;
        self.start_time.get_or_insert(self.submit_time);
        self
    }
    fn loss(mut self, points: &[(f64, f64)]) -> Job {
        self.loss = loss_series(points);
        self
    }
    fn cpu_usage(mut self, cpu_millis: u64) -> Job {
        for t in &mut self.tasks {
            t.usage = Some(Resources {
                cpu_millis,
                memory_bytes: 0,
                gpus: 0,
            });
        }
        self
    }
    fn cpu_weight(mut self, weight: f64) -> Job {
        for t in &mut self.tasks {
            t.cpu_weight = weight;
        }
        self
    }
    fn moved(mut self, time: f64, kind: MoveKind, purpose: &str) -> Job {
        let at: Vec<String> = self.tasks.iter().filter_map(|t| t.node.clone()).collect();
        self.moves.push(JobMove {
            time,
            kind,
            purpose: purpose.into(),
            from_nodes: at.clone(),
            to_nodes: at,
        });
        self
    }
    fn not_checkpointable(mut self) -> Job {
        self.checkpointable = false;
        self
    }
    fn utility(mut self, utility: f64) -> Job {
        self.utility = utility;
        self
    }
    fn label(mut self, key: &str, value: &str) -> Job {
        self.labels.push(Label {
            key: key.into(),
            value: value.into(),
        });
        self
    }
}

/// The change a kept instance gets for a `tick` at `time`: with `reset`, the whole
/// cluster (`nodes` and `jobs` as given); otherwise nothing but the clock moved.
pub fn tick_delta(time: f64, reset: bool, nodes: &[Node], jobs: &[Job]) -> SnapshotDelta {
    SnapshotDelta {
        reset,
        time,
        triggers: vec![Trigger::Tick],
        nodes: if reset { nodes.to_vec() } else { vec![] },
        removed_nodes: vec![],
        jobs: if reset { jobs.to_vec() } else { vec![] },
        removed_jobs: vec![],
        loss_updates: LossUpdates {
            jobs: vec![],
            dropped: vec![],
            appended: vec![],
            samples: loss_series(&[]),
        },
        node_sets: None,
    }
}

/// A loss series of `(time, value)` points, oldest first, at steps 0, 1, 2...
pub fn loss_series(points: &[(f64, f64)]) -> LossSeries {
    LossSeries {
        times: points.iter().map(|&(time, _)| time).collect(),
        steps: (0..points.len() as u64).collect(),
        values: points.iter().map(|&(_, value)| value).collect(),
    }
}

/// The change the host sends a kept instance that saw `before` and must now see
/// `after`: the jobs of `before` missing from `after` leave, the jobs of `after` that
/// differ from their `before` (compared whole, loss series included) or are new come
/// whole, and the nodes come whole when any differs.
pub fn change_between(before: &Snapshot, after: &Snapshot) -> SnapshotDelta {
    let same = |a: &Job, b: &Job| format!("{a:?}") == format!("{b:?}");
    let find = |jobs: &[Job], id: &str| jobs.iter().position(|j| j.id == id);
    let nodes_changed = format!("{:?}", before.nodes) != format!("{:?}", after.nodes)
        || format!("{:?}", before.node_sets) != format!("{:?}", after.node_sets);
    SnapshotDelta {
        reset: false,
        time: after.time,
        triggers: after.triggers.clone(),
        nodes: if nodes_changed {
            after.nodes.clone()
        } else {
            vec![]
        },
        removed_nodes: if nodes_changed {
            before.nodes.iter().map(|n| n.name.clone()).collect()
        } else {
            vec![]
        },
        jobs: after
            .jobs
            .iter()
            .filter(|j| find(&before.jobs, &j.id).is_none_or(|at| !same(&before.jobs[at], j)))
            .cloned()
            .collect(),
        removed_jobs: before
            .jobs
            .iter()
            .filter(|j| find(&after.jobs, &j.id).is_none())
            .map(|j| j.id.clone())
            .collect(),
        loss_updates: LossUpdates {
            jobs: vec![],
            dropped: vec![],
            appended: vec![],
            samples: loss_series(&[]),
        },
        node_sets: nodes_changed.then(|| after.node_sets.clone()),
    }
}

/// `s` after the host applied the placements and migrations of `d`: the tasks bound
/// where the actions say, running, their requests charged to their nodes (and taken
/// from the nodes they left).
pub fn applied(s: &Snapshot, d: &crate::Decision) -> Snapshot {
    use crate::Operation;
    let mut s = s.clone();
    let mut moves: Vec<(String, Option<String>, String)> = Vec::new();
    for action in &d.actions {
        match &action.op {
            Operation::Place(p) => moves.extend(
                p.assignments
                    .iter()
                    .map(|a| (p.job.clone(), Some(a.task.clone()), a.node.clone())),
            ),
            Operation::Migrate(m) => moves.push((m.job.clone(), m.task.clone(), m.node.clone())),
            _ => {}
        }
    }
    for (job, task, node) in moves {
        let Some(job) = s.jobs.iter_mut().find(|j| j.id == job) else {
            continue;
        };
        job.phase = JobPhase::Running;
        for t in job
            .tasks
            .iter_mut()
            .filter(|t| task.as_ref().is_none_or(|name| *name == t.name))
        {
            if let Some(from) = s
                .nodes
                .iter_mut()
                .find(|n| Some(&n.name) == t.node.as_ref())
            {
                from.requested = from.requested.saturating_minus(&t.requests);
            }
            if let Some(to) = s.nodes.iter_mut().find(|n| n.name == node) {
                to.requested = to.requested.plus(&t.requests);
            }
            t.node = Some(node.clone());
            t.phase = TaskPhase::Running;
        }
    }
    s
}

/// What happens to the cluster between two rounds of a [`kept_against_fresh`] run.
pub type Change<'a> = &'a dyn Fn(&mut Snapshot);

/// `id` finished: it leaves `s`, its requests leave its nodes, and the call is about it.
pub fn finish(s: &mut Snapshot, id: &str) {
    let at = s
        .jobs
        .iter()
        .position(|j| j.id == id)
        .unwrap_or_else(|| panic!("no job `{id}` to finish"));
    let job = s.jobs.remove(at);
    for t in &job.tasks {
        if let Some(n) = s
            .nodes
            .iter_mut()
            .find(|n| Some(&n.name) == t.node.as_ref())
        {
            n.requested = n.requested.saturating_minus(&t.requests);
        }
    }
    s.triggers = vec![Trigger::JobFinished(id.into())];
}

/// Runs a policy's kept instance against fresh ones, the check every policy that keeps
/// memory between calls needs: from `round` and `blob`, `decide` is called on a kept
/// instance given only what changed each round (the first round a reset; then the
/// snapshot as `host` leaves it after the decision, with each of `changes` in turn
/// applied, and one round more). Each round, `fresh` decides on the whole snapshot and
/// the same blob as a fresh instance would (it sets the policy's kept memory aside for
/// the call and puts it back; it is handed the kept decision for that), and the two
/// must give the same actions, labels, next call and blob; `check` then sees the round
/// and the kept decision.
pub fn kept_against_fresh(
    mut round: Snapshot,
    mut blob: Vec<u8>,
    changes: &[Change],
    decide: impl Fn(&Snapshot, &[u8]) -> crate::Decision,
    fresh: impl Fn(&Snapshot, &[u8], &crate::Decision) -> crate::Decision,
    host: impl Fn(&Snapshot, &crate::Decision) -> Snapshot,
    mut check: impl FnMut(&Snapshot, &crate::Decision),
) {
    let mut before: Option<Snapshot> = None;
    for change in changes.iter().map(Some).chain([None]) {
        let delta = match &before {
            None => tick_delta(round.time, true, &round.nodes, &round.jobs),
            Some(b) => change_between(b, &round),
        };
        let kept = crate::changes::with_applied(delta, |s| decide(s, &blob))
            .expect("the kept instance takes the change");
        let other = fresh(&round, &blob, &kept);
        let t = round.time;
        assert_eq!(
            format!("{:?}", kept.actions),
            format!("{:?}", other.actions),
            "t={t}"
        );
        assert_eq!(
            format!("{:?}", kept.labels),
            format!("{:?}", other.labels),
            "t={t}"
        );
        assert_eq!(kept.next_call_after, other.next_call_after, "t={t}");
        assert_eq!(
            String::from_utf8(kept.state.clone()),
            String::from_utf8(other.state),
            "t={t}"
        );
        check(&round, &kept);
        blob = kept.state.clone();
        let mut next = host(&round, &kept);
        if let Some(change) = change {
            change(&mut next);
        }
        before = Some(round);
        round = next;
    }
}

/// [`kept_against_fresh`] for a policy that keeps its memory in one thread-local slot,
/// `memory`, and needs no check of its own: the host applies each decision as
/// [`applied`] does, and the fresh instance is `decide` called with the slot emptied
/// ([`as_fresh_instance`]).
pub fn kept_decides_as_fresh<M: 'static>(
    memory: &'static LocalKey<RefCell<Option<M>>>,
    round: Snapshot,
    blob: Vec<u8>,
    changes: &[Change],
    decide: impl Fn(&Snapshot, &[u8]) -> crate::Decision,
) {
    kept_against_fresh(
        round,
        blob,
        changes,
        &decide,
        |s, blob, _| as_fresh_instance(memory, || decide(s, blob)),
        applied,
        |_, _| {},
    );
}

/// Runs `call` as a fresh instance would: the memory a kept instance holds in `memory`
/// is set aside for the call and put back after it, for the kept instance's next call.
pub fn as_fresh_instance<M: 'static, R>(
    memory: &'static LocalKey<RefCell<Option<M>>>,
    call: impl FnOnce() -> R,
) -> R {
    let kept = memory.with(|m| m.borrow_mut().take());
    let answer = call();
    memory.with(|m| *m.borrow_mut() = kept);
    answer
}

/// The operator's setting `name=value`.
pub fn setting(name: &str, value: &str) -> Setting {
    Setting {
        name: name.into(),
        value: value.into(),
    }
}

/// A snapshot at `time` triggered by a `tick`, with every bound task's requests charged
/// to its node.
pub fn snapshot(time: f64, mut nodes: Vec<Node>, jobs: Vec<Job>) -> Snapshot {
    for job in &jobs {
        for t in &job.tasks {
            if let Some(n) = t
                .node
                .as_deref()
                .and_then(|n| nodes.iter_mut().find(|x| x.name == n))
            {
                n.requested = n.requested.plus(&t.requests);
            }
        }
    }
    Snapshot {
        time,
        triggers: vec![Trigger::Tick],
        nodes,
        jobs,
        node_sets: vec![],
    }
}

/// Chained changes to a [`snapshot`] fixture.
pub trait SnapshotBuilder {
    /// Called for `triggers` instead of a tick.
    fn triggered_by(self, triggers: Vec<Trigger>) -> Snapshot;
    /// Every task of job `job` may only run on `nodes` (a new eligibility set, as the
    /// host would send for a node selector or an untolerated taint).
    fn only_on(self, job: &str, nodes: &[&str]) -> Snapshot;
}

impl SnapshotBuilder for Snapshot {
    fn triggered_by(mut self, triggers: Vec<Trigger>) -> Snapshot {
        self.triggers = triggers;
        self
    }
    fn only_on(mut self, job: &str, nodes: &[&str]) -> Snapshot {
        let id = self.node_sets.len() as u32;
        let positions = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| nodes.contains(&n.name.as_str()))
            .map(|(i, _)| i as u32)
            .collect();
        self.node_sets.push(NodeSet {
            id,
            nodes: positions,
        });
        let job = self
            .jobs
            .iter_mut()
            .find(|j| j.id == job)
            .expect("fixture job exists");
        for t in &mut job.tasks {
            t.eligible = Some(id);
        }
        self
    }
}
