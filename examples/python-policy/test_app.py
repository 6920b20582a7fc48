"""least-loaded's logic under pytest, no component built: `pytest` in this folder."""

import pytest

from switchyard_policy import PolicyError
from switchyard_policy.testing import Harness, distributed, job, node, only_on, res, snapshot

from app import LeastLoaded


def test_a_job_goes_to_the_node_least_loaded_after_taking_it():
    h = Harness(LeastLoaded())
    d = h.decide(snapshot(0, [node("busy", 4000, used=3000), node("idle", 4000)], [job("a")]))
    assert h.placements(d) == {"a": {"main": "idle"}}


def test_a_gang_that_does_not_fit_whole_waits_and_holds_nothing():
    h = Harness(LeastLoaded())
    gang = distributed("g", ps=1, workers=3, requests=res(3000))
    d = h.decide(snapshot(0, [node("n1", 4000), node("n2", 4000), node("n3", 4000)], [gang]))
    assert h.placements(d) == {}
    assert h.waiting(d) == ["g"]


def test_tasks_of_one_round_do_not_count_the_same_room_twice():
    h = Harness(LeastLoaded())
    d = h.decide(snapshot(0, [node("n1", 4000), node("n2", 4000)], [job("a", res(3000)), job("b", res(3000))]))
    assert h.placements(d) == {"a": {"main": "n1"}, "b": {"main": "n2"}}


def test_a_task_goes_only_where_its_eligibility_set_allows():
    h = Harness(LeastLoaded())
    s = only_on(snapshot(0, [node("big", 16000), node("small", 4000)], [job("a")]), "a", ["small"])
    assert h.placements(h.decide(s)) == {"a": {"main": "small"}}


def test_a_job_kept_one_task_per_node_spreads_its_tasks():
    h = Harness(LeastLoaded())
    spread = distributed("s", ps=0, workers=2, requests=res(500), one_task_per_node=True)
    d = h.decide(snapshot(0, [node("n1", 64000), node("n2", 4000)], [spread]))
    assert sorted(h.placements(d)["s"].values()) == ["n1", "n2"]


def test_later_rounds_see_the_cluster_the_deltas_describe():
    h = Harness(LeastLoaded())
    nodes = [node("n1", 4000), node("n2", 4000)]
    assert h.placements(h.decide(snapshot(0, nodes, [job("a", res(3000))]))) == {"a": {"main": "n1"}}
    running = snapshot(30, nodes, [job("a", res(3000), on="n1"), job("b", res(2000))])
    assert h.placements(h.decide(running)) == {"b": {"main": "n2"}}
    # Nothing waits: a round with only loss moving decides nothing.
    quiet = snapshot(60, nodes, [job("a", res(3000), on="n1", loss=[(60, 1.0)]), job("b", res(2000), on="n2")])
    assert h.decide(quiet).actions == []


def test_an_unknown_resource_is_refused_with_the_choices():
    with pytest.raises(PolicyError, match="must be one of any, cpu, memory, gpu, got `disk`"):
        Harness(LeastLoaded(), {"resource": "disk"}).configure()
    assert Harness(LeastLoaded()).configure() == {"resource": "any"}


def test_it_reads_no_loss_and_decides_as_it_would_with_every_series():
    assert LeastLoaded().describe().reads_loss is False

    class ReadingLoss(LeastLoaded):
        reads_loss = True

    nodes = [node("n1", 4000), node("n2", 4000, used=1000)]
    jobs = [job("a", res(1000), on="n1", loss=[(0, 3.0), (30, 2.0)]), job("b", res(500), loss=[(0, 9.0)]), job("c")]
    blind, reading = Harness(LeastLoaded()), Harness(ReadingLoss())
    assert blind.decide(snapshot(30, nodes, jobs)) == reading.decide(snapshot(30, nodes, jobs))
