"""Policy parameters: a spec with defaults and docs, checked once, read typed.

The host hands the effective settings to every `decide` call, so a policy never stores
them; it resolves them against its spec each time (a few string compares). The messages
are the Rust SDK's, so an operator reads the same sentence whatever language the policy
is written in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Sequence

from switchyard_policy.contract import Parameter, PolicyError, Setting


@dataclass(frozen=True)
class ParamSpec:
    """One parameter a policy accepts: the name an operator writes, the value used when
    the operator sets nothing, and one sentence for `policy inspect`."""

    name: str
    default: str
    doc: str

    def to_parameter(self) -> Parameter:
        return Parameter(name=self.name, default_value=self.default, doc=self.doc)


class Settings:
    """Settings resolved against a spec: every parameter present, unknown names refused."""

    def __init__(self, values: Dict[str, str]) -> None:
        self._values = values

    @staticmethod
    def resolve(spec: Sequence[ParamSpec], given: Sequence[Setting]) -> "Settings":
        """Fills defaults and refuses names the spec does not know, listing those it does."""
        known = [p.name for p in spec]
        for setting in given:
            if setting.name not in known:
                accepts = ", ".join(known) if known else "none"
                raise PolicyError(
                    f"unknown parameter `{setting.name}`; this policy accepts: {accepts}"
                )
        values = {p.name: p.default for p in spec}
        for setting in given:  # the last setting of a name wins
            values[setting.name] = setting.value.strip()
        return Settings(values)

    def to_settings(self) -> List[Setting]:
        """The effective settings in WIT form, for `configure`'s answer."""
        return [Setting(name=n, value=v) for n, v in self._values.items()]

    def _raw(self, name: str) -> str:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"parameter `{name}` is not in the policy's spec") from None

    def text(self, name: str) -> str:
        """A parameter as written (trimmed), for values the policy parses itself."""
        return self._raw(name)

    def float(self, name: str) -> float:
        """A finite floating-point parameter."""
        raw = self._raw(name)
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise PolicyError(f"parameter `{name}` must be a number, got `{raw}`")
        return value

    def float_in(self, name: str, low: float, high: float) -> float:
        """A floating-point parameter within `[low, high]`."""
        value = self.float(name)
        if value < low or value > high:
            raise PolicyError(f"parameter `{name}` must be between {low} and {high}, got {value}")
        return value

    def bool(self, name: str) -> bool:
        """A boolean parameter (`true`/`false`)."""
        raw = self._raw(name)
        if raw in ("true", "false"):
            return raw == "true"
        raise PolicyError(f"parameter `{name}` must be true or false, got `{raw}`")

    def choice(self, name: str, allowed: Sequence[str]) -> str:
        """A parameter that must be one of a fixed set of words."""
        raw = self._raw(name)
        if raw not in allowed:
            raise PolicyError(
                f"parameter `{name}` must be one of {', '.join(allowed)}, got `{raw}`"
            )
        return raw
