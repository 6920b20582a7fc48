"""least-loaded: a switchyard scheduling policy written in Python.

Places every waiting job's pending tasks, one job at a time in submission order, each
task on the schedulable node whose busiest resource (CPU, memory or GPUs, as a share of
what the node offers) would be least loaded after taking it. A job is placed whole or
not at all, so a distributed job never holds half its tasks. Nothing is ever moved,
re-weighted or scaled.

It is built into a WebAssembly component with componentize-py against the same WIT as
the Rust policies (see README.md in this folder) and runs unchanged in
`switchyard simulate` and in the controller.
"""

from typing import Dict, List, Optional, Set, Tuple

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    Action,
    Assignment,
    Decision,
    Description,
    Operation_Place,
    Operation_Wait,
    Parameter,
    Placement,
    Resources,
    Setting,
    Snapshot,
    TaskPhase,
)

NAME = "least-loaded"
VERSION = "0.2.0"
DEFAULT_RESOURCE = "any"
RESOURCES = ("any", "cpu", "memory", "gpu")


class Scheduler(exports.Scheduler):
    def describe(self) -> Description:
        return Description(
            name=NAME,
            version=VERSION,
            summary="places each job whole on the least-loaded nodes (written in Python)",
            parameters=[
                Parameter(
                    name="resource",
                    default_value=DEFAULT_RESOURCE,
                    doc="the load that is balanced: any (the busiest of cpu, memory "
                    "and gpu), cpu, memory or gpu",
                )
            ],
        )

    def configure(self, settings: List[Setting]) -> List[Setting]:
        return [Setting(name="resource", value=resource_of(settings))]

    def decide(self, settings: List[Setting], snapshot: Snapshot, state: bytes) -> Decision:
        resource = resource_of(settings)
        free: Dict[str, Resources] = {}
        offered: Dict[str, Resources] = {}
        for node in snapshot.nodes:
            if node.schedulable:
                offered[node.name] = node.allocatable
                free[node.name] = minus(node.allocatable, node.requested)
        # Where each eligibility set lets a task run (`task.eligible`; none: anywhere).
        allowed: Dict[int, Set[str]] = {
            s.id: {snapshot.nodes[i].name for i in s.nodes} for s in snapshot.node_sets
        }
        actions: List[Action] = []
        for job in snapshot.jobs:
            pending = [t for t in job.tasks if t.phase == TaskPhase.PENDING and t.node is None]
            if not pending:
                continue
            trial = dict(free)
            assignments: List[Assignment] = []
            for task in pending:
                where = None if task.eligible is None else allowed.get(task.eligible, set())
                best = least_loaded(trial, offered, task.requests, resource, where)
                if best is None:
                    break
                trial[best] = minus(trial[best], task.requests)
                assignments.append(Assignment(task=task.name, node=best))
            if len(assignments) < len(pending):
                actions.append(Action(
                    op=Operation_Wait(job.id),
                    reason=f"{len(pending)} pending tasks do not all fit now",
                ))
                continue
            free = trial
            nodes = sorted({a.node for a in assignments})
            actions.append(Action(
                op=Operation_Place(Placement(job=job.id, assignments=assignments)),
                reason=f"least {resource} load: {', '.join(nodes)}",
            ))
        host.log(host.LogLevel.DEBUG, f"{NAME}: {len(actions)} actions at t={snapshot.time:.0f}")
        return Decision(actions=actions, labels=[], next_call_after=None, state=state)


def resource_of(settings: List[Setting]) -> str:
    """The `resource` setting, checked; raises Err with a message an operator can act on."""
    resource = DEFAULT_RESOURCE
    for setting in settings:
        if setting.name != "resource":
            raise Err(f"unknown parameter `{setting.name}`; {NAME} knows only `resource`")
        if setting.value not in RESOURCES:
            raise Err(
                f"parameter `resource` must be one of {', '.join(RESOURCES)}, got `{setting.value}`"
            )
        resource = setting.value
    return resource


def minus(a: Resources, b: Resources) -> Resources:
    return Resources(
        cpu_millis=max(a.cpu_millis - b.cpu_millis, 0),
        memory_bytes=max(a.memory_bytes - b.memory_bytes, 0),
        gpus=max(a.gpus - b.gpus, 0),
    )


def fits(free: Resources, want: Resources) -> bool:
    return (
        free.cpu_millis >= want.cpu_millis
        and free.memory_bytes >= want.memory_bytes
        and free.gpus >= want.gpus
    )


def load_after(free: Resources, offered: Resources, want: Resources, resource: str) -> float:
    """Share of the node in use once `want` is taken from `free`."""
    shares = {
        "cpu": share(offered.cpu_millis, free.cpu_millis - want.cpu_millis),
        "memory": share(offered.memory_bytes, free.memory_bytes - want.memory_bytes),
        "gpu": share(offered.gpus, free.gpus - want.gpus),
    }
    return max(shares.values()) if resource == "any" else shares[resource]


def share(offered: int, left: int) -> float:
    return 0.0 if offered == 0 else 1.0 - left / offered


def least_loaded(
    free: Dict[str, Resources],
    offered: Dict[str, Resources],
    want: Resources,
    resource: str,
    where: Optional[Set[str]],
) -> Optional[str]:
    """The fitting node (among `where`, when given) with the lowest load after placing
    `want`; ties to the first."""
    best: Optional[Tuple[float, str]] = None
    for name, room in free.items():
        if (where is None or name in where) and fits(room, want):
            load = load_after(room, offered[name], want, resource)
            if best is None or load < best[0]:
                best = (load, name)
    return None if best is None else best[1]
