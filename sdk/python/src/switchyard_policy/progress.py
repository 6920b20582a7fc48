"""Normalised evaluation series: what SpeCon's gain and FlowCon's progress are computed
from, as in the Rust SDK's `progress` module.

The papers compare the change of a job's evaluation function with a threshold given as
a percentage, so the value is divided by a per-job scale first. The snapshot only
carries the most recent samples, so the scale is remembered in the policy's state
(`Scale.to_json` / `Scale.from_json`). This module owns the arithmetic only; when to
evaluate is the policy's business.
"""

import math
from enum import Enum
from typing import Optional

from switchyard_policy.contract import LossSeries


class Normalisation(Enum):
    """What a job's evaluation values are divided by."""

    #: The first evaluation value seen for the job (its first non-zero one when the
    #: first is zero, as an accuracy curve starting at 0 would be).
    INITIAL = "initial"
    #: The largest |value| seen so far for the job.
    MAX = "max"

    @staticmethod
    def parse(word: str) -> Optional["Normalisation"]:
        """One of `initial`, `max`; None for anything else."""
        return next((n for n in Normalisation if n.value == word), None)


class Scale:
    """The per-job divisor, kept in the policy's state between calls."""

    def __init__(self, base: Optional[float] = None) -> None:
        self.base = base

    def observe(self, mode: Normalisation, samples: LossSeries) -> None:
        """Takes the job's current samples into account (idempotent for repeats)."""
        # An initial base never changes, and policies call this for every job every round.
        if mode is Normalisation.INITIAL and self.base is not None:
            return
        for value in samples.values:
            magnitude = abs(value)
            if not math.isfinite(magnitude) or magnitude == 0.0:
                continue
            if mode is Normalisation.INITIAL:
                self.base = magnitude
                return
            self.base = magnitude if self.base is None else max(self.base, magnitude)

    def normalise(self, value: float) -> Optional[float]:
        """`value / base`, or None until a non-zero value has been seen."""
        return None if self.base is None else value / self.base

    def to_json(self) -> Optional[float]:
        return self.base

    @staticmethod
    def from_json(value: Optional[float]) -> "Scale":
        return Scale(None if value is None else float(value))


def value_at(samples: LossSeries, time: float) -> Optional[float]:
    """The evaluation value as of `time`: the latest sample taken at or before it (the
    papers: "when queried in the middle of an iteration, the previous value is
    returned")."""
    times = samples.times
    for i in range(len(times) - 1, -1, -1):
        if times[i] <= time + 1e-9:
            return samples.values[i]
    return None


def gain(scale: Scale, samples: LossSeries, since: float, now: float) -> Optional[float]:
    """SpeCon's gain: the magnitude of the change of the normalised evaluation value
    between its values as of `since` and as of `now`. None while either end has no
    value yet or the scale has seen no non-zero value."""
    before, after = value_at(samples, since), value_at(samples, now)
    if before is None or after is None:
        return None
    a, b = scale.normalise(before), scale.normalise(after)
    return None if a is None or b is None else abs(b - a)
