"""Building a decision: one function per operation of the contract, each with the
reason the operator reads, and the decision that carries them."""

from typing import Optional, Sequence

from switchyard_policy.contract import (
    Action,
    Assignment,
    CpuWeight,
    Decision,
    JobLabel,
    Migration,
    Operation_Migrate,
    Operation_Place,
    Operation_Preempt,
    Operation_Scale,
    Operation_SetCpuWeight,
    Operation_Wait,
    Placement,
    Scaling,
)


def place(job: str, assignments: Sequence[Assignment], reason: str) -> Action:
    """Bind pending tasks of `job`, all or none (a gang is one placement)."""
    return Action(op=Operation_Place(Placement(job=job, assignments=list(assignments))), reason=reason)


def wait(job: str, reason: str) -> Action:
    """Leave `job` waiting this round (recorded only)."""
    return Action(op=Operation_Wait(job), reason=reason)


def migrate(job: str, node: str, reason: str, task: Optional[str] = None, purpose: str = "") -> Action:
    """Checkpoint, stop and restore `task` (every task when None) of `job` on `node`;
    `purpose` is kept in the job's move history."""
    return Action(op=Operation_Migrate(Migration(job=job, task=task, node=node, purpose=purpose)), reason=reason)


def set_cpu_weight(job: str, task: str, weight: float, reason: str) -> Action:
    """Set one task's relative CPU weight, in (0, 1]."""
    return Action(op=Operation_SetCpuWeight(CpuWeight(job=job, task=task, weight=weight)), reason=reason)


def scale(job: str, replicas: int, nodes: Sequence[str], reason: str) -> Action:
    """Restart `job` with `replicas` replicas of its scalable role; `nodes` names where
    each added replica goes."""
    return Action(op=Operation_Scale(Scaling(job=job, replicas=replicas, nodes=list(nodes))), reason=reason)


def preempt(job: str, reason: str) -> Action:
    """Checkpoint a running job and release its tasks; it waits again."""
    return Action(op=Operation_Preempt(job), reason=reason)


def label(job: str, key: str, value: str) -> JobLabel:
    """A label shown on `job` (replaces this policy's previous labels on it)."""
    return JobLabel(job=job, key=key, value=value)


def decision(
    actions: Sequence[Action],
    state: bytes = b"",
    labels: Sequence[JobLabel] = (),
    next_call_after: Optional[float] = None,
) -> Decision:
    """The answer to one call; `state` is handed back on the next one."""
    return Decision(
        actions=list(actions), labels=list(labels), next_call_after=next_call_after, state=bytes(state)
    )
