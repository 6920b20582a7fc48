"""The host's log import, usable from native tests too.

In a component a line goes to the controller's log, tagged with the policy's name. In
a plain interpreter there is no host: lines are kept in `captured` (level, message) so
a test can assert on what a policy said.
"""

from typing import List, Tuple

from switchyard_policy.contract import IN_COMPONENT, host

#: Lines logged outside a component, oldest first.
captured: List[Tuple[str, str]] = []


def _write(level: "host.LogLevel", message: str) -> None:
    if IN_COMPONENT:
        host.log(level, message)
    else:
        captured.append((level.name.lower(), message))


def trace(message: str) -> None:
    _write(host.LogLevel.TRACE, message)


def debug(message: str) -> None:
    _write(host.LogLevel.DEBUG, message)


def info(message: str) -> None:
    _write(host.LogLevel.INFO, message)


def warn(message: str) -> None:
    _write(host.LogLevel.WARN, message)


def error(message: str) -> None:
    _write(host.LogLevel.ERROR, message)
