"""The ledger: free capacity charged as a round decides, eligibility honoured, gangs
packed all or nothing on the fewest nodes (the Rust SDK's `cluster` rules)."""

from switchyard_policy.cluster import Ledger, covers, minus, nodes_of, one_task_per_node, pending_tasks, total_requests
from switchyard_policy.testing import distributed, job, node, only_on, res, snapshot


def ledger_of(s):
    return Ledger.of(s)


def test_free_capacity_is_what_the_snapshot_reports_less_what_the_round_charged():
    s = snapshot(0, [node("n1", 4000, used=1000)], [job("a", res(500), on="n1")])
    ledger = ledger_of(s)
    assert ledger.free("n1").cpu_millis == 2500
    assert ledger.charge("n1", res(2000))
    assert not ledger.charge("n1", res(1000)), "only 500 millicores are left"
    assert ledger.free("n1").cpu_millis == 500
    ledger.release("n1", res(9000))
    assert ledger.free("n1").cpu_millis == 4000, "release stops at what the node offers"
    assert ledger.free("nowhere") is None


def test_an_unschedulable_node_fits_nothing():
    ledger = ledger_of(snapshot(0, [node("n1", schedulable=False), node("n2")], []))
    assert not ledger.fits("n1", res(1))
    assert ledger.nodes_for(job("a").tasks[0]) == ["n2"]


def test_a_task_is_offered_only_the_nodes_of_its_eligibility_set():
    s = only_on(snapshot(0, [node("n1"), node("n2"), node("n3")], [job("a"), job("b")]), "a", ["n3"])
    ledger = ledger_of(s)
    a, b = s.jobs[0].tasks[0], s.jobs[1].tasks[0]
    assert ledger.nodes_for(a) == ["n3"]
    assert ledger.nodes_for(b) == ["n1", "n2", "n3"]
    assert not ledger.charge_task("n1", a) and ledger.charge_task("n3", a)
    assert not ledger.fits_task("n1", a)


def test_a_gang_is_packed_on_the_fewest_nodes_or_not_at_all():
    s = snapshot(0, [node("small", 2000), node("big", 6000), node("mid", 4000)], [])
    gang = distributed("g", ps=1, workers=3, requests=res(1600))
    ledger = ledger_of(s)
    placed = ledger.pack_gang(pending_tasks(gang))
    assert [(a.task, a.node) for a in placed] == [("ps-0", "big"), ("worker-0", "big"), ("worker-1", "big"), ("worker-2", "small")], "the first node taking the most, ties in snapshot order"
    before = [ledger.free(n).cpu_millis for n in ("small", "big", "mid")]
    too_big = distributed("h", ps=0, workers=3, requests=res(1600))
    assert ledger.pack_gang(pending_tasks(too_big)) is None
    assert [ledger.free(n).cpu_millis for n in ("small", "big", "mid")] == before, "a failed gang charges nothing"


def test_a_job_kept_one_task_per_node_gets_a_node_for_each_task_beside_its_running_ones():
    s = snapshot(0, [node("n0"), node("n1"), node("n2")], [])
    apart = distributed("a", ps=0, workers=3, requests=res(1000), one_task_per_node=True)
    apart.tasks[0].node = "n0"
    ledger = ledger_of(s)
    placed = ledger.pack_gang_of(apart, pending_tasks(apart))
    assert [a.node for a in placed] == ["n1", "n2"]
    assert one_task_per_node(apart) and not one_task_per_node(job("b"))
    assert ledger.pack_gang_of(apart, pending_tasks(apart) + [apart.tasks[0]]) is None


def test_a_copy_is_charged_apart_from_its_original():
    ledger = ledger_of(snapshot(0, [node("n1", 4000)], []))
    trial = ledger.copy()
    trial.charge("n1", res(3000))
    assert ledger.free("n1").cpu_millis == 4000
    assert ledger.emptied().free("n1").cpu_millis == 4000


def test_resource_arithmetic_and_job_helpers():
    assert minus(res(1000, 5, 1), res(2000, 1, 0)) == res(0, 4, 1)
    assert covers(res(2, 2, 2), res(1, 2, 0)) and not covers(res(2, 2, 2), res(3, 0, 0))
    g = distributed("g", ps=1, workers=2, requests=res(700), on="n1")
    assert total_requests(g.tasks).cpu_millis == 2100
    assert nodes_of(g) == ["n1"]
    assert pending_tasks(g) == []


def test_the_least_allocated_score_is_kube_schedulers():
    ledger = ledger_of(snapshot(0, [node("n1", 4000, memory_bytes=8)], []))
    # Half the CPU and a quarter of the memory left: (50 + 25) / 2.
    assert ledger.least_allocated_score("n1", res(2000, 6)) == 37.5
