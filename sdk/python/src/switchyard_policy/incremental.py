"""Taking the cluster as deltas: the snapshot an `incremental-policy` instance holds.

The host may keep a policy's instance between calls and send only what changed
(`snapshot-delta` in the WIT). The binding (`switchyard_policy.binding`) applies each
change here before calling the policy, so a policy is written against a whole
`Snapshot` and cannot tell the two apart. The rules are the Rust SDK's
(`policies/sdk/src/incremental.rs`), message for message: removed items leave, changed
ones replace the held ones in place, new ones follow; a change that does not fit what is
held is refused, and the instance then holds nothing (the host starts a fresh one).

Beside the snapshot, `Held` counts how often its jobs and nodes changed, so views
derived from them (which jobs wait, the free capacity per node) are recomputed only
when something they read moved: in a steady round only loss series move.
"""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from switchyard_policy.contract import Job, LossSeries, LossUpdates, PolicyError, Snapshot, SnapshotDelta

T = TypeVar("T")


class Held:
    """The snapshot this instance reached on its last call, and how often its job list
    and its node list (with the eligibility sets) changed."""

    def __init__(self) -> None:
        self.snapshot: Optional[Snapshot] = None
        self.jobs_version = 0
        self.nodes_version = 0
        #: Views derived from the snapshot, by name: (the version they were computed at,
        #: the value). `policy.Cluster` keeps them here so they live as long as the
        #: snapshot does.
        self.memo: Dict[str, Tuple[int, Any]] = {}

    def apply(self, change: SnapshotDelta) -> Snapshot:
        """Brings the held snapshot to the one `change` describes; on a refusal the
        instance holds nothing and the error says why."""
        try:
            return self._apply(change)
        except PolicyError:
            self.snapshot = None
            self.jobs_version += 1
            self.nodes_version += 1
            raise

    def _apply(self, change: SnapshotDelta) -> Snapshot:
        for job in change.jobs:
            _series_len(job.loss, job)
        if change.reset:
            self.snapshot = Snapshot(
                time=change.time,
                triggers=change.triggers,
                nodes=change.nodes,
                jobs=change.jobs,
                node_sets=change.node_sets if change.node_sets is not None else [],
            )
            self.jobs_version += 1
            self.nodes_version += 1
            return self.snapshot
        snapshot = self.snapshot
        if snapshot is None:
            raise PolicyError(
                "the host sent a change, but this instance holds no snapshot to apply it to"
            )
        snapshot.time = change.time
        snapshot.triggers = change.triggers
        if change.node_sets is not None:
            snapshot.node_sets = change.node_sets
            self.nodes_version += 1
        if change.nodes or change.removed_nodes:
            merge(snapshot.nodes, change.nodes, change.removed_nodes, _node_name, "node")
            self.nodes_version += 1
        if change.jobs or change.removed_jobs:
            merge(snapshot.jobs, change.jobs, change.removed_jobs, _job_id, "job")
            self.jobs_version += 1
        _apply_loss(snapshot.jobs, change.loss_updates)
        return snapshot


def _node_name(node) -> str:
    return node.name


def _job_id(job) -> str:
    return job.id


def _series_len(series: LossSeries, job: Optional[Job] = None) -> int:
    """The number of samples in `series`, whose three columns must be as long as each
    other (held series are checked once, when their job arrives whole)."""
    count = len(series.times)
    if len(series.steps) != count or len(series.values) != count:
        whose = f"job `{job.id}`: " if job is not None else "appended loss samples: "
        raise PolicyError(
            f"{whose}a loss series has {count} times, {len(series.steps)} steps and {len(series.values)} values"
        )
    return count


def _apply_loss(jobs: List[Job], updates: LossUpdates) -> None:
    # In a steady round every running job reported a sample: this loop is most of what
    # the SDK does then, so it touches each column once per job and checks by catching
    # rather than comparing where it can.
    positions, drops, counts = updates.jobs, updates.dropped, updates.appended
    if len(drops) != len(positions) or len(counts) != len(positions):
        raise PolicyError(
            f"loss updates name {len(positions)} jobs but give {len(drops)} drop counts and {len(counts)} append counts"
        )
    samples = updates.samples
    sent = _series_len(samples)
    times, steps, values = samples.times, samples.steps, samples.values
    at = 0
    previous = -1
    for position, dropped, count in zip(positions, drops, counts):
        if position <= previous:
            raise PolicyError(
                f"loss update for job #{position} follows one for job #{previous}: positions must increase"
            )
        previous = position
        try:
            job = jobs[position]
        except IndexError:
            raise PolicyError(f"loss update for job #{position}, but {len(jobs)} jobs are held") from None
        loss = job.loss
        held_times, held_steps, held_values = loss.times, loss.steps, loss.values
        if dropped > len(held_times):
            raise PolicyError(
                f"loss update drops {dropped} samples of job `{job.id}`, which has {len(held_times)}"
            )
        end = at + count
        if end > sent:
            raise PolicyError(f"loss update appends {count} samples to job `{job.id}`, more than were sent")
        if dropped:
            del held_times[:dropped], held_steps[:dropped], held_values[:dropped]
        if count == 1:
            held_times.append(times[at])
            held_steps.append(steps[at])
            held_values.append(values[at])
        elif count:
            held_times.extend(times[at:end])
            held_steps.extend(steps[at:end])
            held_values.extend(values[at:end])
        at = end
    if at != sent:
        raise PolicyError("more appended loss samples were sent than the loss updates use")


def merge(
    held: List[T],
    upserts: Sequence[T],
    removed: Sequence[str],
    key: Callable[[T], str],
    what: str,
) -> None:
    """Removes the `removed` keys (given in held order), replaces changed items in place
    and appends new ones. Both lists come in held order, so one forward walk finds each
    without a dictionary of every key."""
    if removed:
        gone = iter(removed)
        leaving = next(gone, None)
        kept: List[T] = []
        for item in held:
            if leaving is not None and key(item) == leaving:
                leaving = next(gone, None)
            else:
                kept.append(item)
        if leaving is not None:
            raise PolicyError(f"{what} `{leaving}` to remove is not held (or out of order)")
        held[:] = kept
    cursor = 0
    count = len(held)
    for item in upserts:
        wanted = key(item)
        while cursor < count and key(held[cursor]) != wanted:
            cursor += 1
        if cursor < count:
            held[cursor] = item
            cursor += 1
        else:
            held.append(item)
            count += 1
            cursor = count
