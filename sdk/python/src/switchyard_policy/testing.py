"""The native test harness: a policy's logic unit-tested with pytest, no component built.

- Fixtures: `node`, `job`, `distributed`, `snapshot` (every bound task's requests
  charged to its node, as the host reports them), `only_on` (an eligibility set) and
  `loss_series` (a job's evaluations from (time, value) pairs).
- `delta(before, after)`: the change the host would send a kept instance holding
  `before` (the host's rules: changed items whole, removed ones by name, loss series
  that moved on as loss updates, a reset when the order rule cannot say it);
  `without_loss(s)`: the snapshot as a policy that reads no loss receives it.
- `Harness`: runs a policy through the same binding the component exports, round after
  round on one kept instance fed deltas, and checks every round against a fresh
  instance given the whole snapshot: a policy that keeps anything between calls outside
  its state blob fails its tests rather than the cluster. A policy whose `reads_loss`
  is False is sent what the host would send it: every loss series empty.

```python
from switchyard_policy.testing import Harness, job, node, snapshot

def test_a_job_goes_to_the_emptier_node():
    h = Harness(LeastLoaded())
    d = h.decide(snapshot(0, [node("busy", 4000, used=3000), node("idle", 4000)], [job("a")]))
    assert h.placements(d) == {"a": {"main": "idle"}}
```
"""

import copy
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from componentize_py_types import Err

from switchyard_policy.binding import export
from switchyard_policy.cluster import ONE_TASK_PER_NODE_LABEL, plus
from switchyard_policy.contract import (
    Decision,
    Job,
    JobPhase,
    Label,
    LossSeries,
    LossUpdates,
    Node,
    NodeSet,
    Operation_Place,
    Operation_Wait,
    PolicyError,
    Replicas,
    Resources,
    Setting,
    Snapshot,
    SnapshotDelta,
    Task,
    TaskPhase,
    Trigger,
    Trigger_Tick,
)
from switchyard_policy.policy import Policy

GIB = 1 << 30


def res(cpu_millis: int = 1000, memory_bytes: int = GIB, gpus: int = 0) -> Resources:
    return Resources(cpu_millis=cpu_millis, memory_bytes=memory_bytes, gpus=gpus)


def node(
    name: str,
    cpu_millis: int = 8000,
    memory_bytes: int = 32 * GIB,
    gpus: int = 0,
    used: int = 0,
    schedulable: bool = True,
    labels: Optional[Dict[str, str]] = None,
) -> Node:
    """A node offering the given resources, `used` millicores of it requested by tasks
    the snapshot does not show (another scheduler's)."""
    return Node(
        name=name,
        allocatable=res(cpu_millis, memory_bytes, gpus),
        requested=res(used, 0, 0),
        usage=None,
        labels=[Label(key=k, value=v) for k, v in (labels or {}).items()],
        schedulable=schedulable,
    )


def _task(name: str, role: str, requests: Resources, on: Optional[str]) -> Task:
    return Task(
        name=name,
        role=role,
        node=on,
        phase=TaskPhase.RUNNING if on else TaskPhase.PENDING,
        requests=requests,
        cpu_weight=1.0,
        usage=None,
        eligible=None,
    )


def job(
    id: str,
    requests: Optional[Resources] = None,
    on: Optional[str] = None,
    submitted: float = 0.0,
    priority: int = 0,
    loss: Sequence[Tuple[float, float]] = (),
    labels: Optional[Dict[str, str]] = None,
    one_task_per_node: bool = False,
) -> Job:
    """A single-task job (task `main`, 1 CPU and 1 GiB unless `requests` says), waiting,
    or running on `on`; `loss` as (time, value) pairs, oldest first."""
    task = _task("main", "main", requests or res(), on)
    return _job(id, [task], Replicas(role="main", current=1, min=1, max=1), submitted, priority, loss, labels, one_task_per_node)


def distributed(
    id: str,
    ps: int,
    workers: int,
    requests: Optional[Resources] = None,
    on: Optional[str] = None,
    max_workers: Optional[int] = None,
    submitted: float = 0.0,
    loss: Sequence[Tuple[float, float]] = (),
    one_task_per_node: bool = False,
) -> Job:
    """A parameter-server job: `ps` tasks `ps-i` and `workers` tasks `worker-i`, all
    waiting or all running on `on`; workers scale between 1 and `max_workers`."""
    request = requests or res()
    tasks = [_task(f"ps-{i}", "ps", request, on) for i in range(ps)]
    tasks += [_task(f"worker-{i}", "worker", request, on) for i in range(workers)]
    replicas = Replicas(role="worker", current=workers, min=1, max=max_workers or workers)
    return _job(id, tasks, replicas, submitted, 0, loss, None, one_task_per_node)


def loss_series(points: Sequence[Tuple[float, float]] = ()) -> LossSeries:
    """A loss series of (time, value) pairs, oldest first, at steps 0, 1, 2..."""
    return LossSeries(times=[float(t) for t, _ in points], steps=list(range(len(points))), values=[float(v) for _, v in points])


def no_loss_updates() -> LossUpdates:
    """The loss updates of a change in which no loss series moved."""
    return LossUpdates(jobs=[], dropped=[], appended=[], samples=loss_series())


def _job(id, tasks, replicas, submitted, priority, loss, labels, apart) -> Job:
    running = any(t.node for t in tasks)
    all_labels = [Label(key=k, value=v) for k, v in (labels or {}).items()]
    if apart:
        all_labels.append(Label(key=ONE_TASK_PER_NODE_LABEL, value="true"))
    return Job(
        id=id,
        phase=JobPhase.RUNNING if running else JobPhase.WAITING,
        submit_time=submitted,
        start_time=submitted if running else None,
        priority=priority,
        utility=1.0,
        tasks=tasks,
        replicas=replicas,
        loss=loss_series(loss),
        metric_rises=False,
        moves=[],
        checkpointable=True,
        labels=all_labels,
    )


def snapshot(
    time: float, nodes: Sequence[Node], jobs: Sequence[Job], triggers: Optional[List[Trigger]] = None
) -> Snapshot:
    """A snapshot at `time` (a `tick` unless `triggers` says), with every bound task's
    requests added to its node's `requested`, as the host reports it."""
    nodes = [copy.deepcopy(n) for n in nodes]
    by_name = {n.name: n for n in nodes}
    for j in jobs:
        for t in j.tasks:
            if t.node in by_name:
                n = by_name[t.node]
                n.requested = plus(n.requested, t.requests)
    return Snapshot(
        time=float(time),
        triggers=list(triggers) if triggers is not None else [Trigger_Tick()],
        nodes=nodes,
        jobs=list(jobs),
        node_sets=[],
    )


def only_on(s: Snapshot, job_id: str, nodes: Sequence[str]) -> Snapshot:
    """Every task of `job_id` may run only on `nodes` (a new eligibility set, as the host
    sends for a node selector or an untolerated taint)."""
    set_id = len(s.node_sets)
    positions = [i for i, n in enumerate(s.nodes) if n.name in nodes]
    s.node_sets.append(NodeSet(id=set_id, nodes=positions))
    target = next((j for j in s.jobs if j.id == job_id), None)
    if target is None:
        raise KeyError(f"no job `{job_id}` in the snapshot")
    for t in target.tasks:
        t.eligible = set_id
    return s


def without_loss(s: Snapshot) -> Snapshot:
    """`s` as the host sends it to a policy that reads no loss (`Policy.reads_loss`
    False): every job's loss series empty, the rest as it is (the jobs are copies; the
    nodes and tasks are shared with `s`)."""
    return dataclasses.replace(s, jobs=[dataclasses.replace(j, loss=loss_series()) for j in s.jobs])


def reset_of(s: Snapshot, reads_loss: bool = True) -> SnapshotDelta:
    """The whole snapshot as a reset: what a fresh instance receives (every loss series
    empty unless the policy `reads_loss`)."""
    if not reads_loss:
        s = without_loss(s)
    return SnapshotDelta(
        reset=True,
        time=s.time,
        triggers=list(s.triggers),
        nodes=list(s.nodes),
        removed_nodes=[],
        jobs=list(s.jobs),
        removed_jobs=[],
        loss_updates=no_loss_updates(),
        node_sets=list(s.node_sets),
    )


def _removed(held: list, now: list, key) -> Optional[List[str]]:
    """The keys of the held items that left, or None when the order rule (held items
    keep their places, new ones follow) cannot say how `held` became `now`."""
    now_keys = [key(x) for x in now]
    held_keys = [key(x) for x in held]
    if len(set(now_keys)) != len(now_keys) or len(set(held_keys)) != len(held_keys):
        return None
    present = set(now_keys)
    kept = [k for k in held_keys if k in present]
    if now_keys[: len(kept)] != kept:
        return None
    return [k for k in held_keys if k not in present]


def _samples(series: LossSeries) -> List[Tuple[float, int, float]]:
    return list(zip(series.times, series.steps, series.values))


def _loss_shift(old: List[Tuple[float, int, float]], new: List[Tuple[float, int, float]]) -> int:
    """The fewest oldest samples to drop from `old` so that what is left starts `new`."""
    for d in range(len(old) + 1):
        rest = old[d:]
        if len(rest) <= len(new) and rest == new[: len(rest)]:
            return d
    return len(old)


def delta(before: Optional[Snapshot], after: Snapshot, reads_loss: bool = True) -> SnapshotDelta:
    """The change the host sends an instance holding `before` to bring it to `after`.
    For a policy that reads no loss the host leaves loss series out of both: no loss
    updates, and a job whose only change is its loss series is not sent."""
    if not reads_loss:
        before = None if before is None else without_loss(before)
        after = without_loss(after)
    if before is None:
        return reset_of(after)
    removed_nodes = _removed(before.nodes, after.nodes, lambda n: n.name)
    removed_jobs = _removed(before.jobs, after.jobs, lambda j: j.id)
    if removed_nodes is None or removed_jobs is None:
        return reset_of(after)
    old_nodes = {n.name: n for n in before.nodes}
    changed_nodes = [n for n in after.nodes if old_nodes.get(n.name) != n]
    old_jobs = {j.id: j for j in before.jobs}
    changed_jobs: List[Job] = []
    updates = no_loss_updates()
    for at, j in enumerate(after.jobs):
        old = old_jobs.get(j.id)
        if old == j:
            continue
        if old is None or {**vars(old), "loss": None} != {**vars(j), "loss": None}:
            changed_jobs.append(j)
            continue
        old_samples, new_samples = _samples(old.loss), _samples(j.loss)
        dropped = _loss_shift(old_samples, new_samples)
        kept = len(old_samples) - dropped
        updates.jobs.append(at)
        updates.dropped.append(dropped)
        updates.appended.append(len(new_samples) - kept)
        updates.samples.times.extend(j.loss.times[kept:])
        updates.samples.steps.extend(j.loss.steps[kept:])
        updates.samples.values.extend(j.loss.values[kept:])
    # Sets name nodes by position: a node leaving moves the positions after it.
    sets_changed = before.node_sets != after.node_sets or (
        bool(after.node_sets) and bool(removed_nodes)
    )
    return SnapshotDelta(
        reset=False,
        time=after.time,
        triggers=list(after.triggers),
        nodes=changed_nodes,
        removed_nodes=removed_nodes,
        jobs=changed_jobs,
        removed_jobs=removed_jobs,
        loss_updates=updates,
        node_sets=list(after.node_sets) if sets_changed else None,
    )


class Harness:
    """Runs a policy round after round as the host would: `configure` first, then each
    `decide` on one kept instance fed the delta from the previous round's snapshot.
    Every round is also decided by a fresh instance given the whole snapshot (and the
    same state); a difference fails the test, since the host may start a fresh instance
    at any time. The state the policy returns is handed to the next round unless a test
    passes its own.

    A refusal (`PolicyError`) comes back as `PolicyError`, with the operator's message.
    """

    def __init__(self, policy: Policy, settings: Optional[Dict[str, str]] = None) -> None:
        self.policy = policy
        # What a fresh instance starts from: the policy as the module built it.
        self._pristine = copy.deepcopy(policy)
        self.settings = [Setting(name=k, value=v) for k, v in (settings or {}).items()]
        self._kept = export(policy)()
        self._held: Optional[Snapshot] = None
        self.state = b""

    def configure(self) -> Dict[str, str]:
        """The effective settings, as `policy inspect` and the controller see them."""
        return {s.name: s.value for s in _unwrap(lambda: self._kept.configure(self.settings))}

    def decide(self, s: Snapshot, state: Optional[bytes] = None) -> Decision:
        """One round on `s` (without its loss series when the policy reads none); the
        snapshot is copied, so a test may change and reuse it."""
        s = copy.deepcopy(s)
        if not self._kept.describe().reads_loss:
            s = without_loss(s)
        given = self.state if state is None else state
        change = delta(self._held, s)
        kept = _unwrap(lambda: self._kept.decide(self.settings, copy.deepcopy(change), given))
        fresh = _unwrap(lambda: export(copy.deepcopy(self._pristine))().decide(self.settings, reset_of(copy.deepcopy(s)), given))
        if kept != fresh:
            raise AssertionError(
                f"{self.policy.name} decided differently on a kept instance than on a fresh one "
                f"at t={s.time}: does it keep something between calls outside its state?\n"
                f"kept:  {kept}\nfresh: {fresh}"
            )
        self._held = s
        self.state = kept.state
        return kept

    @staticmethod
    def placements(d: Decision) -> Dict[str, Dict[str, str]]:
        """Job -> task -> node of every placement in `d`."""
        return {
            a.op.value.job: {x.task: x.node for x in a.op.value.assignments}
            for a in d.actions
            if isinstance(a.op, Operation_Place)
        }

    @staticmethod
    def waiting(d: Decision) -> List[str]:
        """The jobs `d` leaves waiting."""
        return [a.op.value for a in d.actions if isinstance(a.op, Operation_Wait)]


def _unwrap(call):
    try:
        return call()
    except Err as e:
        raise PolicyError(e.value) from None
