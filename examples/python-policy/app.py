"""least-loaded: a switchyard scheduling policy written in Python on the SDK.

Places every waiting job's pending tasks, one job at a time in submission order, each
task on the schedulable node whose busiest resource (CPU, memory or GPUs, as a share of
what the node offers) would be least loaded after taking it. A job is placed whole or
not at all, so a distributed job never holds half its tasks; a job whose tasks may not
share a node gets a different node for each. Nothing is ever moved, re-weighted or
scaled.

Built with componentize-py into a component of the `incremental-policy` world (see
README.md): the host keeps the instance and sends only what changed, and a round in
which no job waits costs next to nothing.
"""

from typing import List, Optional, Set

from switchyard_policy import Cluster, Ledger, ParamSpec, Policy, Settings, Task, export
from switchyard_policy import log, one_task_per_node
from switchyard_policy.contract import Assignment, Decision
from switchyard_policy.decision import decision, place, wait

RESOURCES = ("any", "cpu", "memory", "gpu")


class LeastLoaded(Policy):
    name = "least-loaded"
    version = "0.3.0"
    summary = "places each job whole on the least-loaded nodes (written in Python)"
    parameters = [
        ParamSpec(
            name="resource",
            default="any",
            doc="the load that is balanced: any (the busiest of cpu, memory and gpu), "
            "cpu, memory or gpu",
        )
    ]
    # It places by the nodes' load and never looks at a job's loss series. Saying so
    # (the SDK's default is True) spares it the most frequent change of a busy cluster,
    # every job reporting progress: the host then sends no loss at all, so such a round
    # costs this policy nothing and a fresh instance's first call is smaller.
    reads_loss = False

    def check(self, settings: Settings) -> None:
        settings.choice("resource", RESOURCES)

    def decide(self, settings: Settings, cluster: Cluster, state: bytes) -> Decision:
        resource = settings.choice("resource", RESOURCES)
        waiting = cluster.waiting()
        if not waiting:
            return decision([], state)
        ledger = cluster.ledger()
        actions = []
        for job, pending in waiting:
            trial = ledger.copy()
            taken: Optional[Set[int]] = None
            if one_task_per_node(job):
                taken = {trial.position(t.node) for t in job.tasks if t.node is not None}
            assignments: List[Assignment] = []
            for task in pending:
                at = least_loaded(trial, task, resource, taken)
                if at is None:
                    break
                trial.charge_task(trial.names[at], task)
                if taken is not None:
                    taken.add(at)
                assignments.append(Assignment(task=task.name, node=trial.names[at]))
            if len(assignments) < len(pending):
                actions.append(wait(job.id, f"{len(pending)} pending tasks do not all fit now"))
                continue
            ledger = trial
            nodes = sorted({a.node for a in assignments})
            actions.append(place(job.id, assignments, f"least {resource} load: {', '.join(nodes)}"))
        log.debug(f"{self.name}: {len(actions)} actions at t={cluster.time:.0f}")
        return decision(actions, state)


def least_loaded(ledger: Ledger, task: Task, resource: str, taken: Optional[Set[int]]) -> Optional[int]:
    """Position of the node `task` may run on, with room for it and not in `taken`,
    whose load after taking it is lowest; ties go to the first in snapshot order."""
    want = task.requests
    best, best_load = None, 0.0
    for at in ledger.positions_for(task):
        if taken is not None and at in taken:
            continue
        offered = ledger.allocatable[at]
        cpu = share(offered.cpu_millis, ledger.cpu[at] - want.cpu_millis)
        memory = share(offered.memory_bytes, ledger.memory[at] - want.memory_bytes)
        gpu = share(offered.gpus, ledger.gpus[at] - want.gpus)
        if resource == "any":
            load = max(cpu, memory, gpu)
        else:
            load = {"cpu": cpu, "memory": memory, "gpu": gpu}[resource]
        if best is None or load < best_load:
            best, best_load = at, load
    return best


def share(offered: int, left: int) -> float:
    """The share of a resource in use when `left` of `offered` remains."""
    return 0.0 if offered == 0 else 1.0 - left / offered


IncrementalScheduler = export(LeastLoaded())
