"""The delta application, property-tested against the whole snapshot.

Two properties, as the Rust SDK's tests (`host/runtime/tests/runtime/incremental.rs`) check them for the
Rust guests:

- random sequences of cluster changes (arrivals, departures, loss series moving on or
  replaced, tasks starting, node load changing, nodes joining and leaving, eligibility
  sets, reorders) sent as the host's deltas leave the kept instance holding exactly the
  whole snapshot after every round, and only the first round and reorders go as resets;
- a delta that does not fit what is held is refused with a message naming the fault,
  and the instance then holds nothing.
"""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard_policy.contract import LossSeries, LossUpdates, NodeSet, PolicyError, TaskPhase, Trigger_JobFinished
from switchyard_policy.incremental import Held
from switchyard_policy.testing import delta, job, loss_series, node, res, reset_of, snapshot, without_loss

STEPS = st.one_of(
    st.just(("arrive",)),
    st.tuples(st.just("finish"), st.integers(0, 7)),
    st.tuples(st.just("progress"), st.integers(0, 7), st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("new-loss"), st.integers(0, 7)),
    st.tuples(st.just("start"), st.integers(0, 7)),
    st.tuples(st.just("load"), st.integers(0, 7)),
    st.tuples(st.just("node-leaves"), st.integers(0, 7)),
    st.just(("node-joins",)),
    st.tuples(st.just("sets"), st.integers(0, 7)),
    st.just(("arrive-first",)),
    st.tuples(st.just("swap"), st.integers(0, 7), st.integers(0, 7)),
)


def apply_step(s, step, serial):
    """Changes `s` in place as the cluster would between two rounds."""
    kind, *args = step
    jobs, nodes = s.jobs, s.nodes
    new_id = f"job-{serial}"
    if kind == "arrive":
        jobs.append(job(new_id, loss=[(0.0, 3.0), (1.0, 2.0)]))
    elif kind == "arrive-first":
        jobs.insert(0, job(new_id))
    elif kind == "finish" and jobs:
        gone = jobs.pop(args[0] % len(jobs))
        s.triggers.append(Trigger_JobFinished(gone.id))
    elif kind == "progress" and jobs:
        loss = jobs[args[0] % len(jobs)].loss
        del loss.times[: args[1]], loss.steps[: args[1]], loss.values[: args[1]]
        last = loss.times[-1] if loss.times else 0.0
        for k in range(1, args[2] + 1):
            loss.times.append(last + k)
            loss.steps.append(serial * 10 + k)
            loss.values.append(1.0 / (serial + k))
    elif kind == "new-loss" and jobs:
        jobs[args[0] % len(jobs)].loss = LossSeries(times=[float(serial)], steps=[1], values=[9.0])
    elif kind == "start" and jobs and nodes:
        j = jobs[args[0] % len(jobs)]
        j.tasks[0].node = nodes[args[0] % len(nodes)].name
        j.tasks[0].phase = TaskPhase.RUNNING
    elif kind == "load" and nodes:
        nodes[args[0] % len(nodes)].requested = res(serial % 8 * 1000, 1, 0)
    elif kind == "node-leaves" and nodes:
        nodes.pop(args[0] % len(nodes))
        s.node_sets = [NodeSet(id=x.id, nodes=[p for p in x.nodes if p < len(nodes)]) for x in s.node_sets]
    elif kind == "node-joins":
        nodes.append(node(f"node-{serial}"))
    elif kind == "sets" and nodes:
        s.node_sets = [NodeSet(id=serial, nodes=sorted({args[0] % len(nodes), 0}))]
    elif kind == "swap" and jobs:
        a, b = args[0] % len(jobs), args[1] % len(jobs)
        jobs[a], jobs[b] = jobs[b], jobs[a]


def reorders(before, after):
    """True when `after`'s jobs or nodes cannot be reached from `before`'s by removals,
    in-place changes and appends: the host must send a reset."""

    def reachable(old, new):
        old_keys, new_keys = [k for k in old], [k for k in new]
        kept = [k for k in old_keys if k in new_keys]
        return new_keys[: len(kept)] == kept

    return not (
        reachable([j.id for j in before.jobs], [j.id for j in after.jobs])
        and reachable([n.name for n in before.nodes], [n.name for n in after.nodes])
    )


ROUNDS = st.lists(st.lists(STEPS, max_size=4), min_size=1, max_size=12)


def each_round(rounds, reads_loss=True):
    """Plays `rounds` on two nodes and two jobs, as the host would: for each round, its
    number, its steps, the snapshot before and after them, and the delta sent for it."""
    s = snapshot(0, [node("n1"), node("n2")], [job("j1", loss=[(0, 5.0), (1, 4.0), (2, 3.0)]), job("j2")])
    sent, serial = None, 0
    for number, steps in enumerate(rounds):
        s.time = number * 30.0
        s.triggers = []
        before = copy.deepcopy(s)
        for step in steps:
            serial += 1
            apply_step(s, step, serial)
        yield (number, steps), before, s, delta(sent, s, reads_loss=reads_loss)
        sent = copy.deepcopy(s)


@settings(max_examples=200, deadline=None)
@given(ROUNDS)
def test_a_kept_instance_holds_exactly_the_whole_snapshot_every_round(rounds):
    held = Held()
    for (number, steps), before, s, change in each_round(rounds):
        assert change.reset == (number == 0 or reorders(before, s)), (number, steps)
        # The instance gets its own copy, as it would through the component boundary.
        assert held.apply(copy.deepcopy(change)) == s, (number, steps)


@settings(max_examples=100, deadline=None)
@given(ROUNDS)
def test_a_policy_that_reads_no_loss_holds_the_snapshot_without_it_and_is_sent_no_loss(rounds):
    """The host's rules for a policy whose `reads_loss` is False: every series empty, no
    loss updates, and only the jobs that changed in more than their loss come whole."""
    held = Held()
    for (number, steps), before, s, change in each_round(rounds, reads_loss=False):
        assert change.reset == (number == 0 or reorders(before, s)), (number, steps)
        assert not change.loss_updates.jobs and not change.loss_updates.samples.times
        assert all(not j.loss.times for j in change.jobs)
        if not change.reset:
            old = {j.id: without_loss(snapshot(0, [], [j])).jobs[0] for j in before.jobs}
            moved = [j.id for j in without_loss(s).jobs if old.get(j.id) != j]
            assert [j.id for j in change.jobs] == moved, (number, steps)
        assert held.apply(copy.deepcopy(change)) == without_loss(s), (number, steps)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text("abcdef", min_size=1, max_size=3), unique=True, max_size=8),
    st.data(),
)
def test_removals_changes_and_arrivals_keep_the_order_rule(ids, data):
    """Random removals, in-place changes and arrivals, built directly as a delta, give
    the list a dictionary of the jobs would: the held order less the removed ones, the
    changed ones in place, the new ones last in the order sent."""
    held = Held()
    held.apply(reset_of(snapshot(0, [], [job(i) for i in ids])))
    removed = [i for i in ids if data.draw(st.booleans())]
    staying = [i for i in ids if i not in removed]
    changed = [i for i in staying if data.draw(st.booleans())]
    arrivals = data.draw(st.lists(st.text("uvwxyz", min_size=1, max_size=3), unique=True, max_size=4))
    upserts = [job(i, priority=7) for i in changed] + [job(i, priority=9) for i in arrivals]
    change = reset_of(snapshot(1, [], upserts))
    change.reset, change.jobs, change.removed_jobs, change.node_sets = False, upserts, removed, None
    result = held.apply(change)
    assert [j.id for j in result.jobs] == staying + arrivals
    assert {j.id: j.priority for j in result.jobs} == {**{i: 0 for i in staying}, **{i: 7 for i in changed}, **{i: 9 for i in arrivals}}


def updates(entries, samples=()):
    """Loss updates of (position, dropped, appended) entries, appending `samples`."""
    return LossUpdates(
        jobs=[e[0] for e in entries],
        dropped=[e[1] for e in entries],
        appended=[e[2] for e in entries],
        samples=loss_series(samples),
    )


def test_loss_updates_drop_the_oldest_samples_and_append_the_new_ones_in_order():
    held = held_with(["a", "b"])
    change = quiet()
    change.loss_updates = updates([(0, 2, 1), (1, 0, 2)], [(2, 0.25), (3, 0.5), (4, 0.75)])
    jobs = held.apply(change).jobs
    assert jobs[0].loss == LossSeries(times=[2.0], steps=[0], values=[0.25])
    assert jobs[1].loss == LossSeries(times=[0.0, 1.0, 3.0, 4.0], steps=[0, 1, 1, 2], values=[1.0, 0.5, 0.5, 0.75])


def held_with(ids):
    held = Held()
    held.apply(reset_of(snapshot(0, [node("n1")], [job(i, loss=[(0, 1.0), (1, 0.5)]) for i in ids])))
    return held


def quiet(s=None):
    change = reset_of(snapshot(1, [], []))
    change.reset, change.node_sets = False, None
    return change


def test_a_change_to_nothing_held_is_refused():
    with pytest.raises(PolicyError, match="holds no snapshot"):
        Held().apply(quiet())


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda c: setattr(c, "removed_jobs", ["zz"]), "job `zz` to remove is not held"),
        (lambda c: setattr(c, "removed_jobs", ["b", "a"]), "job `a` to remove is not held (or out of order)"),
        (lambda c: setattr(c, "removed_nodes", ["gone"]), "node `gone` to remove is not held"),
        (lambda c: setattr(c, "loss_updates", updates([(5, 0, 0)])), "loss update for job #5, but 2 jobs are held"),
        (lambda c: setattr(c, "loss_updates", updates([(0, 3, 0)])), "drops 3 samples of job `a`, which has 2"),
        (lambda c: setattr(c, "loss_updates", updates([(1, 0, 2)], [(1, 1)])), "appends 2 samples to job `b`, more than were sent"),
        (lambda c: setattr(c, "loss_updates", updates([], [(1, 1)])), "more appended loss samples were sent"),
        (lambda c: setattr(c, "loss_updates", updates([(1, 0, 0), (0, 0, 0)])), "job #0 follows one for job #1: positions must increase"),
        (lambda c: setattr(c, "loss_updates", updates([(1, 0, 0), (1, 0, 0)])), "positions must increase"),
        (lambda c: setattr(c, "loss_updates", LossUpdates(jobs=[0], dropped=[], appended=[0], samples=loss_series())), "name 1 jobs but give 0 drop counts"),
        (lambda c: setattr(c, "loss_updates", LossUpdates(jobs=[0], dropped=[0], appended=[1], samples=LossSeries(times=[1.0], steps=[], values=[1.0]))), "1 times, 0 steps and 1 values"),
        (lambda c: setattr(c, "jobs", [job("a", loss=[(0, 1.0)])]) or c.jobs[0].loss.values.clear(), "job `a`: a loss series has 1 times, 1 steps and 0 values"),
    ],
)
def test_a_change_that_does_not_fit_is_refused_and_forgets_everything(break_it, message):
    held = held_with(["a", "b"])
    change = quiet()
    break_it(change)
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        held.apply(change)
    assert held.snapshot is None
    with pytest.raises(PolicyError, match="holds no snapshot"):
        held.apply(quiet())


def test_node_sets_are_kept_until_the_host_sends_new_ones():
    held = Held()
    first = reset_of(snapshot(0, [node("n1"), node("n2")], []))
    first.node_sets = [NodeSet(id=0, nodes=[1])]
    held.apply(first)
    assert held.apply(quiet()).node_sets == [NodeSet(id=0, nodes=[1])]
    replaced = quiet()
    replaced.node_sets = [NodeSet(id=3, nodes=[0, 1])]
    assert held.apply(replaced).node_sets == [NodeSet(id=3, nodes=[0, 1])]
