"""Settings, normalised progress and the state blob: the Rust SDK's rules and messages."""

import math

import pytest

from switchyard_policy import log
from switchyard_policy.contract import PolicyError, Setting
from switchyard_policy.progress import Normalisation, Scale, gain, value_at
from switchyard_policy.settings import ParamSpec, Settings
from switchyard_policy.state import decode, encode
from switchyard_policy.testing import loss_series as samples

SPEC = [ParamSpec("alpha", "0.01", "threshold"), ParamSpec("mode", "strict", "mode")]


def test_defaults_fill_what_the_operator_left_out():
    s = Settings.resolve(SPEC, [Setting(name="mode", value=" loose ")])
    assert s.float("alpha") == 0.01
    assert s.choice("mode", ["strict", "loose"]) == "loose"
    assert [(x.name, x.value) for x in s.to_settings()] == [("alpha", "0.01"), ("mode", "loose")]


def test_an_unknown_name_is_refused_with_the_known_ones_listed():
    with pytest.raises(PolicyError, match="unknown parameter `alhpa`; this policy accepts: alpha, mode"):
        Settings.resolve(SPEC, [Setting(name="alhpa", value="1")])
    with pytest.raises(PolicyError, match="accepts: none"):
        Settings.resolve([], [Setting(name="x", value="1")])


@pytest.mark.parametrize("raw", ["lots", "nan", "inf", ""])
def test_a_bad_number_names_the_parameter_and_the_value(raw):
    s = Settings.resolve(SPEC, [Setting(name="alpha", value=raw)])
    with pytest.raises(PolicyError, match=f"parameter `alpha` must be a number, got `{raw}`"):
        s.float("alpha")


def test_ranges_and_booleans_are_checked():
    s = Settings.resolve(SPEC, [Setting(name="alpha", value="2"), Setting(name="mode", value="yes")])
    with pytest.raises(PolicyError, match="between 0.0 and 1.0, got 2.0"):
        s.float_in("alpha", 0.0, 1.0)
    with pytest.raises(PolicyError, match="must be true or false, got `yes`"):
        s.bool("mode")


def test_initial_normalisation_keeps_the_first_non_zero_value_for_ever():
    scale = Scale()
    scale.observe(Normalisation.INITIAL, samples([(1, 0.0), (2, 4.0), (3, 8.0)]))
    scale.observe(Normalisation.INITIAL, samples([(4, 16.0)]))
    assert scale.normalise(2.0) == 0.5


def test_max_normalisation_follows_the_largest_magnitude_and_survives_the_state_blob():
    scale = Scale()
    scale.observe(Normalisation.MAX, samples([(1, 0.0), (2, -5.0), (3, 2.0), (4, math.inf)]))
    back = Scale.from_json(decode(encode(scale.to_json()), lambda: None))
    assert back.normalise(1.0) == 0.2
    assert Scale().normalise(1.0) is None
    assert Normalisation.parse("max") is Normalisation.MAX and Normalisation.parse("min") is None


def test_the_value_between_two_samples_is_the_earlier_one_and_gain_is_normalised():
    s = samples([(10, 3.0), (20, 2.0)])
    assert value_at(s, 15) == 3.0 and value_at(s, 20) == 2.0 and value_at(s, 5) is None
    scale = Scale()
    scale.observe(Normalisation.INITIAL, s)
    assert gain(scale, s, 10, 20) == pytest.approx(1 / 3)
    assert gain(scale, s, 5, 20) is None


def test_the_state_blob_is_json_that_reads_back_exactly():
    value = {"seen": [["a", 0.1 + 0.2]], "n": 3}
    blob = encode(value)
    assert decode(blob, dict) == value
    assert decode(b"", dict) == {}
    with pytest.raises(PolicyError, match="cannot decode the policy state"):
        decode(b"{not json", dict)


def test_natively_the_log_is_captured_for_tests():
    log.captured.clear()
    log.info("placed 3 jobs")
    assert log.captured == [("info", "placed 3 jobs")]
