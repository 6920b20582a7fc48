"""Write switchyard scheduling policies in Python.

A policy subclasses `Policy` and is exported from the app module componentize-py
builds:

```python
from switchyard_policy import Policy, export

class LeastLoaded(Policy):
    name = "least-loaded"
    def decide(self, settings, cluster, state): ...

IncrementalScheduler = export(LeastLoaded())
```

The component exports `switchyard:policy/incremental-policy@0.3.0`: the host keeps the
instance and sends only what changed, which the SDK applies to the snapshot it holds
(`incremental`), so `decide` always sees the whole cluster (`Cluster`).

Modules, as in the Rust SDK (`policies/sdk`):

- `contract`: the WIT types (`Node`, `Job`, `Task`, `LossSeries`, ...) and `PolicyError`;
- `policy`: `Policy` and `Cluster`, the round's snapshot with cached views;
- `decision`: one function per operation (`place`, `wait`, `migrate`, ...);
- `settings`: parameter specs with defaults and docs, checked and typed;
- `cluster`: resource arithmetic, `Ledger` (free capacity, fit, gang packing);
- `progress`: normalised evaluation series and gains;
- `state`: the state blob as JSON;
- `log`: the host's log, captured in native tests;
- `incremental`: applying the host's deltas;
- `testing`: fixtures and the `Harness` for pytest, no component needed.
"""

from switchyard_policy.binding import export
from switchyard_policy.cluster import Ledger, one_task_per_node, pending_tasks
from switchyard_policy.contract import (
    Decision,
    Job,
    LossSeries,
    Node,
    PolicyError,
    Resources,
    Snapshot,
    Task,
    TaskPhase,
)
from switchyard_policy.policy import Cluster, Policy
from switchyard_policy.settings import ParamSpec, Settings

__all__ = [
    "Cluster",
    "Decision",
    "Job",
    "Ledger",
    "LossSeries",
    "Node",
    "ParamSpec",
    "Policy",
    "PolicyError",
    "Resources",
    "Settings",
    "Snapshot",
    "Task",
    "TaskPhase",
    "export",
    "one_task_per_node",
    "pending_tasks",
]
