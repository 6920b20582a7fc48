"""The library's errors: what went wrong, named so a person can fix it.

Only `acknowledge` and the set-up (`Session.from_environment`) raise them to the
training script; `report` and `checkpoint_requested` log them instead, because a
monitoring hiccup must never stop training.
"""

from __future__ import annotations

from typing import Optional


class SwitchyardError(Exception):
    """Base of every error this library raises."""

    #: A short, stable name of the failure, used to log each kind once.
    kind = "error"


class ConfigurationError(SwitchyardError):
    """The environment (or the arguments) do not describe a usable session."""

    kind = "configuration"


class TokenFileError(SwitchyardError):
    """The bearer-token file named by `SWITCHYARD_TOKEN_FILE` cannot be used."""

    kind = "token-file"

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"the token file {path} {problem}")
        #: The file at fault.
        self.path = path


class ControllerError(SwitchyardError):
    """The controller answered with an error status."""

    def __init__(self, method: str, url: str, status: int, message: str) -> None:
        super().__init__(f"{method} {url}: the controller answered {status}: {message}")
        #: The HTTP status.
        self.status = status
        #: The controller's own explanation (its `{"error": ...}` body).
        self.message = message
        self.kind = f"http-{status}"


class ControllerUnreachable(SwitchyardError):
    """No answer came from the controller (refused, reset, timed out, bad address)."""

    kind = "unreachable"

    def __init__(self, method: str, url: str, reason: object) -> None:
        super().__init__(f"{method} {url}: no answer from the controller: {reason}")
        #: The request's URL.
        self.url = url


class OutputError(SwitchyardError):
    """The log line could not be written to standard output."""

    kind = "stdout"

    def __init__(self, reason: object, line: Optional[str] = None) -> None:
        what = f" ({line!r})" if line is not None else ""
        super().__init__(f"cannot write the switchyard line to standard output{what}: {reason}")
