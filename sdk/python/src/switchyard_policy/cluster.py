"""Views of the snapshot that placement decisions need: free resources per node, which
nodes fit a task, and packing a gang onto the fewest nodes.

A `Ledger` starts from the snapshot and is charged as the policy decides, so two
placements in one round never count the same free capacity twice (the host would
reject the second). It also knows where each task may run (`task.eligible`, the host's
eligibility sets): the helpers that take a task (`fits_task`, `rooms_for`,
`charge_task`, `pack_gang`) never offer a node outside the task's set, so a policy built
on them honours taints, node selectors and affinity without knowing they exist. The
rules are those of the Rust SDK's `cluster` module.

Capacities are kept as plain integers in lists indexed by node position rather than as
`Resources` records: a round on a thousand nodes then allocates nothing per node, and a
trial copy for all-or-nothing packing is three list copies.
"""

from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Set

from switchyard_policy.contract import Assignment, Job, Node, Resources, Snapshot, Task, TaskPhase

#: The job label the host sets (value `true`) when no two of a job's tasks may share a
#: node (required anti-affinity against its own pods per node, or a host port); the host
#: refuses a decision that puts two of them on one.
ONE_TASK_PER_NODE_LABEL = "switchyard.dev/one-task-per-node"


def zero() -> Resources:
    return Resources(cpu_millis=0, memory_bytes=0, gpus=0)


def plus(a: Resources, b: Resources) -> Resources:
    return Resources(
        cpu_millis=a.cpu_millis + b.cpu_millis,
        memory_bytes=a.memory_bytes + b.memory_bytes,
        gpus=a.gpus + b.gpus,
    )


def minus(a: Resources, b: Resources) -> Resources:
    """`a - b`, floored at zero in each resource."""
    return Resources(
        cpu_millis=max(a.cpu_millis - b.cpu_millis, 0),
        memory_bytes=max(a.memory_bytes - b.memory_bytes, 0),
        gpus=max(a.gpus - b.gpus, 0),
    )


def covers(a: Resources, b: Resources) -> bool:
    """Every resource of `b` is at most `a`'s: `b` fits in `a`."""
    return a.cpu_millis >= b.cpu_millis and a.memory_bytes >= b.memory_bytes and a.gpus >= b.gpus


def free_of(node: Node) -> Resources:
    """What the node still offers: allocatable minus requested, as the snapshot says."""
    return minus(node.allocatable, node.requested)


def one_task_per_node(job: Job) -> bool:
    """Whether no two tasks of `job` may share a node (`ONE_TASK_PER_NODE_LABEL`)."""
    return any(l.key == ONE_TASK_PER_NODE_LABEL and l.value == "true" for l in job.labels)


def pending_tasks(job: Job) -> List[Task]:
    """The tasks of `job` not yet on a node."""
    return [t for t in job.tasks if t.node is None and t.phase == TaskPhase.PENDING]


def total_requests(tasks: Iterable[Task]) -> Resources:
    """Sum of the requests of `tasks`."""
    total = zero()
    for task in tasks:
        total = plus(total, task.requests)
    return total


def nodes_of(job: Job) -> List[str]:
    """Names of the nodes `job` has tasks on, without repeats, in task order."""
    seen: List[str] = []
    for task in job.tasks:
        if task.node is not None and task.node not in seen:
            seen.append(task.node)
    return seen


class Room(NamedTuple):
    """A node as the ledger sees it now: a candidate for a task."""

    name: str
    allocatable: Resources
    free: Resources

    def least_allocated_score(self, request: Resources) -> float:
        """kube-scheduler's `LeastAllocated` score (0-100) after placing `request` here:
        the mean over CPU, memory (and GPUs when the node has any) of the free fraction
        left."""
        left = minus(self.free, request)
        cpu = _ratio(left.cpu_millis, self.allocatable.cpu_millis)
        memory = _ratio(left.memory_bytes, self.allocatable.memory_bytes)
        if self.allocatable.gpus > 0:
            gpus = _ratio(left.gpus, self.allocatable.gpus)
            return 100.0 * (cpu + memory + gpus) / 3.0
        return 100.0 * (cpu + memory) / 2.0


def _ratio(part: int, whole: int) -> float:
    return 0.0 if whole <= 0 else part / whole


class Ledger:
    """Free capacity per node, charged as the policy places tasks within one round."""

    def __init__(self, nodes: Sequence[Node], node_sets: Sequence = ()) -> None:
        self.names: List[str] = [n.name for n in nodes]
        self._position: Dict[str, int] = {}
        for at, name in enumerate(self.names):
            self._position.setdefault(name, at)
        self.allocatable: List[Resources] = [n.allocatable for n in nodes]
        self.schedulable: List[bool] = [n.schedulable for n in nodes]
        self.cpu: List[int] = [max(n.allocatable.cpu_millis - n.requested.cpu_millis, 0) for n in nodes]
        self.memory: List[int] = [
            max(n.allocatable.memory_bytes - n.requested.memory_bytes, 0) for n in nodes
        ]
        self.gpus: List[int] = [max(n.allocatable.gpus - n.requested.gpus, 0) for n in nodes]
        # Set id -> the node positions in it; a set the host did not send allows nothing,
        # as the host's validator would refuse it too.
        self._sets: Dict[int, Set[int]] = {s.id: set(s.nodes) for s in node_sets}
        self._in_order: Dict[int, List[int]] = {i: sorted(at) for i, at in self._sets.items()}

    @staticmethod
    def of(snapshot: Snapshot) -> "Ledger":
        """Free capacity as the snapshot reports it, and its eligibility sets."""
        return Ledger(snapshot.nodes, snapshot.node_sets)

    def copy(self) -> "Ledger":
        """An independent ledger with the same charges (the names and sets are shared:
        they never change within a round)."""
        other = Ledger.__new__(Ledger)
        other.names = self.names
        other._position = self._position
        other.allocatable = self.allocatable
        other.schedulable = self.schedulable
        other._sets = self._sets
        other._in_order = self._in_order
        other.cpu = self.cpu[:]
        other.memory = self.memory[:]
        other.gpus = self.gpus[:]
        return other

    def emptied(self) -> "Ledger":
        """The same nodes with nothing charged: whether a job could ever fit."""
        other = self.copy()
        other.cpu = [a.cpu_millis for a in self.allocatable]
        other.memory = [a.memory_bytes for a in self.allocatable]
        other.gpus = [a.gpus for a in self.allocatable]
        return other

    def node_count(self) -> int:
        return len(self.names)

    def position(self, node: str) -> Optional[int]:
        """The node's position in the snapshot, or None for an unknown node."""
        return self._position.get(node)

    def free(self, node: str) -> Optional[Resources]:
        """What is still free on `node`, or None for an unknown node."""
        at = self._position.get(node)
        if at is None:
            return None
        return Resources(cpu_millis=self.cpu[at], memory_bytes=self.memory[at], gpus=self.gpus[at])

    def allows(self, task: Task, at: int) -> bool:
        """True when `task` may run on the node at position `at` (its eligibility set)."""
        if task.eligible is None:
            return True
        allowed = self._sets.get(task.eligible)
        return allowed is not None and at in allowed

    def _fits_at(self, at: int, request: Resources) -> bool:
        return (
            self.schedulable[at]
            and self.cpu[at] >= request.cpu_millis
            and self.memory[at] >= request.memory_bytes
            and self.gpus[at] >= request.gpus
        )

    def fits(self, node: str, request: Resources) -> bool:
        """True when `node` is schedulable with room for `request`. Knows nothing of
        where a task may run: for a task, `fits_task`."""
        at = self._position.get(node)
        return at is not None and self._fits_at(at, request)

    def fits_task(self, node: str, task: Task) -> bool:
        """True when `task` may run on `node` and the node has room for it."""
        at = self._position.get(node)
        return at is not None and self.allows(task, at) and self._fits_at(at, task.requests)

    def may_run(self, node: str, task: Task) -> bool:
        """True when `task` may run on `node`, whatever is free there."""
        if task.eligible is None:
            return True
        at = self._position.get(node)
        return at is not None and self.allows(task, at)

    def positions_for(self, task: Task) -> List[int]:
        """Positions of the nodes `task` may run on with room for it, in snapshot order."""
        request = task.requests
        cpu, memory, gpus = request.cpu_millis, request.memory_bytes, request.gpus
        fcpu, fmem, fgpu, ok = self.cpu, self.memory, self.gpus, self.schedulable
        candidates: Iterable[int] = range(len(self.names))
        if task.eligible is not None:
            candidates = self._in_order.get(task.eligible, [])
        return [
            at
            for at in candidates
            if at < len(fcpu) and ok[at] and fcpu[at] >= cpu and fmem[at] >= memory and fgpu[at] >= gpus
        ]

    def nodes_for(self, task: Task) -> List[str]:
        """Names of the nodes `task` may run on with room for it, in snapshot order."""
        return [self.names[at] for at in self.positions_for(task)]

    def rooms_for(self, task: Task) -> Iterator[Room]:
        """The nodes `task` may run on with room for it, with their capacity."""
        for at in self.positions_for(task):
            free = Resources(cpu_millis=self.cpu[at], memory_bytes=self.memory[at], gpus=self.gpus[at])
            yield Room(self.names[at], self.allocatable[at], free)

    def least_allocated_score(self, node: str, request: Resources) -> float:
        """`Room.least_allocated_score` of `node`; 0 for an unknown node."""
        at = self._position.get(node)
        if at is None:
            return 0.0
        free = Resources(cpu_millis=self.cpu[at], memory_bytes=self.memory[at], gpus=self.gpus[at])
        return Room(node, self.allocatable[at], free).least_allocated_score(request)

    def _take(self, at: int, request: Resources) -> None:
        self.cpu[at] -= request.cpu_millis
        self.memory[at] -= request.memory_bytes
        self.gpus[at] -= request.gpus

    def charge(self, node: str, request: Resources) -> bool:
        """Charges `request` to `node`; False (and nothing charged) when it does not fit.
        Knows nothing of where a task may run: for a task, `charge_task`."""
        at = self._position.get(node)
        if at is None or not self._fits_at(at, request):
            return False
        self._take(at, request)
        return True

    def charge_task(self, node: str, task: Task) -> bool:
        """Charges `task`'s requests to `node`; False when it may not run there or does
        not fit."""
        return self.may_run(node, task) and self.charge(node, task.requests)

    def charge_tasks(self, node: str, tasks: Sequence[Task]) -> bool:
        """Charges every one of `tasks` to `node`, or nothing (False) when they do not
        all fit there together or one may not run there."""
        at = self._position.get(node)
        if at is None or not self.schedulable[at]:
            return False
        if not all(self.allows(t, at) for t in tasks):
            return False
        total = total_requests(tasks)
        if not self._fits_at(at, total):
            return False
        self._take(at, total)
        return True

    def release(self, node: str, request: Resources) -> None:
        """Gives `request` back to `node` (a task leaving it), up to what it offers."""
        at = self._position.get(node)
        if at is None:
            return
        offered = self.allocatable[at]
        self.cpu[at] = min(self.cpu[at] + request.cpu_millis, offered.cpu_millis)
        self.memory[at] = min(self.memory[at] + request.memory_bytes, offered.memory_bytes)
        self.gpus[at] = min(self.gpus[at] + request.gpus, offered.gpus)

    def _how_many_fit(self, at: int, tasks: Sequence[Task]) -> int:
        """How many of `tasks`, in order, fit on the node at `at` together (greedy),
        counting only those allowed there."""
        if not self.schedulable[at]:
            return 0
        cpu, memory, gpus = self.cpu[at], self.memory[at], self.gpus[at]
        count = 0
        for task in tasks:
            r = task.requests
            if self.allows(task, at) and cpu >= r.cpu_millis and memory >= r.memory_bytes and gpus >= r.gpus:
                cpu -= r.cpu_millis
                memory -= r.memory_bytes
                gpus -= r.gpus
                count += 1
        return count

    def pack_gang(self, tasks: Sequence[Task]) -> Optional[List[Assignment]]:
        """Packs `tasks` onto as few nodes as possible: repeatedly fill the node that can
        take the most of the remaining tasks (ties: snapshot order), each task only on a
        node it may run on. All or nothing: on success the ledger is charged and the
        assignments returned; on failure nothing changes and the answer is None."""
        trial = self.copy()
        remaining = list(tasks)
        assignments: List[Assignment] = []
        while remaining:
            best_at, best_count = -1, 0
            for at in range(len(trial.names)):
                count = trial._how_many_fit(at, remaining)
                if count > best_count:
                    best_at, best_count = at, count
                    if count == len(remaining):
                        break
            if best_at < 0:
                return None
            left: List[Task] = []
            for task in remaining:
                if trial.allows(task, best_at) and trial._fits_at(best_at, task.requests):
                    trial._take(best_at, task.requests)
                    assignments.append(Assignment(task=task.name, node=trial.names[best_at]))
                else:
                    left.append(task)
            remaining = left
        self.cpu, self.memory, self.gpus = trial.cpu, trial.memory, trial.gpus
        return assignments

    def pack_gang_of(self, job: Job, tasks: Sequence[Task]) -> Optional[List[Assignment]]:
        """`pack_gang` for the pending `tasks` of `job`, except that a job whose tasks may
        not share a node (`one_task_per_node`) goes one task to a node, each on a node
        none of its tasks is on yet (first fit, in snapshot order). All or nothing."""
        if not one_task_per_node(job):
            return self.pack_gang(tasks)
        taken = {self._position[n] for n in nodes_of(job) if n in self._position}
        trial = self.copy()
        assignments: List[Assignment] = []
        for task in tasks:
            found = next(
                (
                    at
                    for at in range(len(trial.names))
                    if at not in taken and trial.allows(task, at) and trial._fits_at(at, task.requests)
                ),
                None,
            )
            if found is None:
                return None
            trial._take(found, task.requests)
            taken.add(found)
            assignments.append(Assignment(task=task.name, node=trial.names[found]))
        self.cpu, self.memory, self.gpus = trial.cpu, trial.memory, trial.gpus
        return assignments
