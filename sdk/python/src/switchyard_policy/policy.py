"""What a policy author writes against: `Policy` (describe, check settings, decide) and
`Cluster`, the view of the snapshot a round decides on.

`Cluster` is the whole snapshot (`cluster.snapshot`, or `nodes`, `jobs`, ... directly)
plus views derived from it that a kept instance need not recompute every round: the
jobs with pending tasks change only when a job arrives, leaves or changes, and the free
capacity per node only when a node changes, while a steady round moves loss series
alone. The views are recomputed when the held snapshot's jobs or nodes changed
(`incremental.Held` counts), so a policy that uses them pays for what moved.
"""

from typing import Any, List, Optional, Sequence, Tuple

from switchyard_policy.cluster import Ledger, pending_tasks
from switchyard_policy.contract import Decision, Description, Job, Snapshot, Task
from switchyard_policy.incremental import Held
from switchyard_policy.settings import ParamSpec, Settings


class Cluster:
    """One round's snapshot, with cached views of it."""

    def __init__(self, snapshot: Snapshot, held: Optional[Held] = None) -> None:
        if held is None:
            held = Held()
            held.snapshot = snapshot
        self.snapshot = snapshot
        self._held = held

    @property
    def time(self) -> float:
        return self.snapshot.time

    @property
    def triggers(self) -> list:
        return self.snapshot.triggers

    @property
    def nodes(self) -> list:
        return self.snapshot.nodes

    @property
    def jobs(self) -> List[Job]:
        return self.snapshot.jobs

    @property
    def node_sets(self) -> list:
        return self.snapshot.node_sets

    def _memo(self, name: str, version: int, compute) -> Any:
        memo = self._held.memo
        kept = memo.get(name)
        if kept is None or kept[0] != version:
            kept = (version, compute())
            memo[name] = kept
        return kept[1]

    def waiting(self) -> List[Tuple[Job, List[Task]]]:
        """Every job with tasks not yet on a node, with those tasks, in snapshot order.
        Computed again only when a job arrived, left or changed. Do not change the
        list: the next round may hand it out again."""
        return self._memo(
            "waiting",
            self._held.jobs_version,
            lambda: [(j, p) for j in self.snapshot.jobs for p in [pending_tasks(j)] if p],
        )

    def ledger(self) -> Ledger:
        """A fresh `Ledger` of this round: free capacity as the snapshot reports it and
        the eligibility sets, for the policy to charge. Indexed again only when a node
        or an eligibility set changed; each call is a copy of the capacities."""
        base = self._memo("ledger", self._held.nodes_version, lambda: Ledger.of(self.snapshot))
        return base.copy()


class Policy:
    """A scheduling policy. Subclasses set `name`, `version`, `summary`,
    `parameters` and `reads_loss`, and implement `decide`; `check` refuses bad
    parameter values.

    `reads_loss` says whether the policy reads jobs' loss series (`job.loss`). It is
    True unless a policy says otherwise, so a policy that reads them cannot be handed
    empty ones by forgetting it. A policy that never reads them should say False: the
    host then sends every series empty and no loss updates, so a round in which jobs
    only reported progress (a busy cluster's most frequent round) is, for it, a round
    in which nothing changed, and a fresh instance's first call carries no series. The
    host asks once, when it loads the component.

    Keep nothing on `self` between calls: the host may start a fresh instance whenever
    it likes (the first call, after a failure, a hot swap, a restart), and only the
    state blob `decide` returns survives. `switchyard_policy.testing.Harness` runs every
    round on a fresh instance too and fails a test whose decisions differ.
    """

    name: str = ""
    version: str = "0.1.0"
    summary: str = ""
    parameters: Sequence[ParamSpec] = ()
    reads_loss: bool = True

    def describe(self) -> Description:
        if not isinstance(self.reads_loss, bool):
            raise TypeError(f"{type(self).__name__}.reads_loss must be True or False, got {self.reads_loss!r}")
        return Description(
            name=self.name,
            version=self.version,
            summary=self.summary,
            parameters=[p.to_parameter() for p in self.parameters],
            reads_loss=self.reads_loss,
        )

    def check(self, settings: Settings) -> None:
        """Raises `PolicyError` for a parameter value the policy cannot use; called by
        `configure` (when the operator sets them) and before every round."""

    def decide(self, settings: Settings, cluster: Cluster, state: bytes) -> Decision:
        """One decision round: the effective settings, the cluster as it is now and the
        state this policy returned last time (empty on the first call)."""
        raise NotImplementedError
