"""The controller's answers as typed values, parsed strictly enough that a changed API
shows as an error naming the field rather than as a wrong decision in training."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ._errors import SwitchyardError


class AnswerError(SwitchyardError):
    """An answer of the controller lacks a field or has one of the wrong type."""

    kind = "answer"


def _field(answer: Dict[str, Any], name: str, types: Tuple[type, ...], what: str) -> Any:
    value = answer.get(name)
    if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
        raise AnswerError(f"the controller's answer has {name}={value!r}; expected {what}")
    return value


def _names(answer: Dict[str, Any], name: str) -> Tuple[str, ...]:
    value = _field(answer, name, (list,), "a list of task names")
    if not all(isinstance(v, str) for v in value):
        raise AnswerError(f"the controller's answer has {name}={value!r}; expected task names")
    return tuple(value)


@dataclass(frozen=True)
class CheckpointStatus:
    """`GET /v1/jobs/{id}/checkpoint`: whether the job is asked to checkpoint now."""

    #: A checkpoint is requested and not yet complete or timed out.
    requested: bool
    #: When it was requested (RFC 3339), if it is.
    requested_at: Optional[str]
    #: When the grace period ends (RFC 3339), if a checkpoint is requested.
    deadline: Optional[str]
    #: The tasks that already acknowledged this request.
    acknowledged: Tuple[str, ...]

    @classmethod
    def from_json(cls, answer: Dict[str, Any]) -> "CheckpointStatus":
        """Parses the endpoint's JSON object."""
        return cls(
            requested=_field(answer, "requested", (bool,), "true or false"),
            requested_at=_field(answer, "requested_at", (str, type(None)), "a time or null"),
            deadline=_field(answer, "deadline", (str, type(None)), "a time or null"),
            acknowledged=_names(answer, "acknowledged"),
        )


@dataclass(frozen=True)
class Acknowledgement:
    """`POST /v1/jobs/{id}/checkpoint` accepted: the controller recorded the checkpoint."""

    #: Seconds from the request to this acknowledgement.
    after_seconds: float
    #: Tasks of the job still to acknowledge; empty once the job's checkpoint is complete
    #: (the controller then stops the job's pods).
    waiting_for: Tuple[str, ...]

    @classmethod
    def from_json(cls, answer: Dict[str, Any]) -> "Acknowledgement":
        """Parses the endpoint's JSON object."""
        if answer.get("acknowledged") is not True:
            raise AnswerError(
                f"the controller's answer has acknowledged={answer.get('acknowledged')!r}; "
                f"expected true"
            )
        return cls(
            after_seconds=float(_field(answer, "after_seconds", (int, float), "seconds")),
            waiting_for=_names(answer, "waiting_for"),
        )
