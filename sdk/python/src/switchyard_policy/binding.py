"""The component's export: `export(policy)` gives the class componentize-py looks for
(`IncrementalScheduler` in the app module), implementing the `incremental-scheduler`
interface of `wit/policy.wit` on top of a `Policy`.

It keeps the snapshot this instance holds (`incremental.Held`), applies each call's
delta to it, resolves the settings against the policy's spec, and turns a
`PolicyError` into the WIT `result`'s error. Native tests call the same class through
`switchyard_policy.testing.Harness`, so what runs under pytest is what runs in the
component.
"""

from typing import List

from switchyard_policy.contract import (
    Decision,
    Description,
    PolicyError,
    Setting,
    SnapshotDelta,
    as_wit_error,
)
from switchyard_policy.incremental import Held
from switchyard_policy.policy import Cluster, Policy
from switchyard_policy.settings import Settings


def export(policy: Policy) -> type:
    """The `IncrementalScheduler` class for `policy`:

        IncrementalScheduler = switchyard_policy.export(LeastLoaded())
    """
    if not isinstance(policy, Policy):
        raise TypeError(f"export() takes a Policy instance, got {policy!r}")
    held = Held()

    def settings_of(given: List[Setting]) -> Settings:
        settings = Settings.resolve(policy.parameters, given)
        policy.check(settings)
        return settings

    class IncrementalScheduler:
        def describe(self) -> Description:
            return policy.describe()

        def configure(self, settings: List[Setting]) -> List[Setting]:
            try:
                return settings_of(settings).to_settings()
            except PolicyError as e:
                raise as_wit_error(e) from None

        def decide(self, settings: List[Setting], change: SnapshotDelta, state: bytes) -> Decision:
            try:
                snapshot = held.apply(change)
                return policy.decide(settings_of(settings), Cluster(snapshot, held), state)
            except PolicyError as e:
                raise as_wit_error(e) from None

    IncrementalScheduler.__qualname__ = f"IncrementalScheduler[{policy.name}]"
    return IncrementalScheduler
