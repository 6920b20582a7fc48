"""The contract's types, as componentize-py generates them from `wit/policy.wit`.

Inside a component componentize-py supplies `componentize_py_types` (the `Ok`/`Err`
records of WIT results); in a plain interpreter (a policy's pytest run) it does not
exist, so the identical module shipped here stands in for it. Every other module of
the SDK takes the WIT types from here, so they are the same classes in both places.
"""

import sys

try:
    import componentize_py_types  # noqa: F401  (inside a component)

    IN_COMPONENT = True
except ImportError:
    from switchyard_policy import _native_types

    sys.modules["componentize_py_types"] = _native_types
    IN_COMPONENT = False

from componentize_py_types import Err  # noqa: E402

from switchyard_policy.wit.imports import host  # noqa: E402
from switchyard_policy.wit.imports.types import (  # noqa: E402,F401
    Action,
    Assignment,
    CpuWeight,
    Decision,
    Description,
    Job,
    JobLabel,
    JobMove,
    JobPhase,
    Label,
    LossSeries,
    LossUpdates,
    Migration,
    MoveKind,
    Node,
    NodeSet,
    Operation,
    Operation_Migrate,
    Operation_Place,
    Operation_Preempt,
    Operation_Scale,
    Operation_SetCpuWeight,
    Operation_Wait,
    Parameter,
    Placement,
    Replicas,
    Resources,
    Scaling,
    Setting,
    Snapshot,
    SnapshotDelta,
    Task,
    TaskPhase,
    Trigger,
    Trigger_JobArrived,
    Trigger_JobFinished,
    Trigger_JobPreempted,
    Trigger_NodeChanged,
    Trigger_Tick,
)


class PolicyError(Exception):
    """A refusal the operator reads: bad settings in `configure`, an undecidable round
    in `decide`. The binding hands its message to the host as the WIT `result`'s error
    (a `Refused` on the host's side); any other exception traps the call."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def as_wit_error(error: PolicyError) -> Exception:
    """The exception componentize-py turns into the `err` of a WIT `result`."""
    return Err(error.message)
