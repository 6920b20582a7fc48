"""The native harness runs a policy as the host would, and catches what the host would
punish: a policy that keeps memory outside its state blob, a refusal."""

import pytest

from switchyard_policy import Policy, PolicyError, export
from switchyard_policy.contract import Err
from switchyard_policy.decision import decision, place, wait
from switchyard_policy.settings import ParamSpec
from switchyard_policy.state import decode, encode
from switchyard_policy.testing import Harness, job, node, reset_of, snapshot


class FirstFit(Policy):
    name = "first-fit"
    parameters = [ParamSpec("limit", "10", "jobs placed per round at most")]

    def check(self, settings):
        settings.float_in("limit", 1, 1000)

    def decide(self, settings, cluster, state):
        rounds = decode(state, lambda: 0) + 1
        ledger = cluster.ledger()
        actions = []
        for j, pending in cluster.waiting()[: int(settings.float("limit"))]:
            placed = ledger.pack_gang(pending)
            actions.append(place(j.id, placed, "first fit") if placed else wait(j.id, "no room"))
        return decision(actions, encode(rounds))


class Forgetful(FirstFit):
    """Counts rounds in an attribute: a fresh instance starts again at zero."""

    def __init__(self):
        self.rounds = 0

    def decide(self, settings, cluster, state):
        self.rounds += 1
        return decision([], encode(self.rounds))


def test_the_state_goes_round_to_round_and_the_views_follow_the_deltas():
    h = Harness(FirstFit())
    nodes = [node("n1", 2000)]
    d = h.decide(snapshot(0, nodes, [job("a"), job("b"), job("c")]))
    assert h.placements(d) == {"a": {"main": "n1"}, "b": {"main": "n1"}} and h.waiting(d) == ["c"]
    d = h.decide(snapshot(30, nodes, [job("c")]))
    assert h.placements(d) == {"c": {"main": "n1"}}
    assert decode(h.state, int) == 2


def test_a_policy_that_remembers_outside_its_state_fails_its_tests():
    h = Harness(Forgetful())
    h.decide(snapshot(0, [node("n1")], []))
    with pytest.raises(AssertionError, match="kept instance than on a fresh one"):
        h.decide(snapshot(30, [node("n1")], []))


def test_a_refusal_reaches_the_test_as_the_operators_message():
    with pytest.raises(PolicyError, match="parameter `limit` must be between 1 and 1000, got 0.0"):
        Harness(FirstFit(), {"limit": "0"}).configure()
    with pytest.raises(PolicyError, match="unknown parameter `limt`"):
        Harness(FirstFit(), {"limt": "3"}).decide(snapshot(0, [], []))


def test_the_binding_answers_refusals_as_wit_errors_and_describes_the_policy():
    binding = export(FirstFit())()
    assert binding.describe().parameters[0].name == "limit"
    with pytest.raises(Err) as refused:
        binding.configure([])  # fine
        binding.decide([], reset_of(snapshot(0, [], [])).__class__(**{**vars(reset_of(snapshot(0, [], []))), "reset": False}), b"")
    assert "holds no snapshot" in refused.value.value
    with pytest.raises(TypeError, match="takes a Policy instance"):
        export(FirstFit)


class CountsSamples(FirstFit):
    """Hands back how many loss samples each job showed it, so a test sees what it was sent."""

    def decide(self, settings, cluster, state):
        return decision([], encode({j.id: len(j.loss.values) for j in cluster.jobs}))


class CountsSamplesWithoutReading(CountsSamples):
    reads_loss = False


def test_a_policy_says_it_reads_loss_unless_it_says_otherwise():
    assert export(FirstFit())().describe().reads_loss is True
    assert export(CountsSamplesWithoutReading())().describe().reads_loss is False

    class Vague(FirstFit):
        reads_loss = "no"

    with pytest.raises(TypeError, match="reads_loss must be True or False, got 'no'"):
        export(Vague())().describe()


def test_the_harness_sends_a_policy_that_reads_no_loss_every_series_empty():
    s = snapshot(0, [node("n1")], [job("a", loss=[(0, 3.0), (30, 2.0)]), job("b")])
    assert decode(Harness(CountsSamples()).decide(s).state, dict) == {"a": 2, "b": 0}
    h = Harness(CountsSamplesWithoutReading())
    assert decode(h.decide(s).state, dict) == {"a": 0, "b": 0}
    s.jobs[0].loss.values.append(1.0)
    s.jobs[0].loss.times.append(60.0)
    s.jobs[0].loss.steps.append(2)
    assert decode(h.decide(s).state, dict) == {"a": 0, "b": 0}
