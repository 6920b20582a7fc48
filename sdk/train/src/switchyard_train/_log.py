"""The log transport: one line on standard output per report or acknowledgement, which
the controller reads from the container's log.

It owns the exact text of the two lines; the controller's default progress pattern
matches the report line, and its checkpoint reader the acknowledgement line, so neither
may change without the other. It never asks the controller anything: a checkpoint
request reaches a process using it through SIGTERM or the annotations file.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, TextIO

from ._errors import OutputError

#: What starts every line this transport writes.
PREFIX = "switchyard: "


def report_line(step: int, value: float) -> str:
    """`switchyard: step=<int> loss=<float repr>` (repr round-trips the float)."""
    return f"{PREFIX}step={step} loss={value!r}"


def acknowledge_line(path: str, step: Optional[int]) -> str:
    """`switchyard: checkpoint-complete step=<int or -> path=<path>`; the path runs to
    the end of the line, so it may hold spaces."""
    return f"{PREFIX}checkpoint-complete step={'-' if step is None else step} path={path}"


class LogTransport:
    """Writes the lines to `stream`, or to whatever `sys.stdout` is at each call (so a
    framework or test that replaces it still gets them)."""

    name = "log"

    def __init__(self, stream: Optional[TextIO] = None) -> None:
        self._stream = stream
        #: Start each line with a line break: set while a progress bar draws on the same
        #: stream without ending its line (Keras's `verbose=1`), which would otherwise
        #: hold the start of this transport's line and hide it from the controller.
        self.newline_first = False

    def push_loss(self, step: int, value: float) -> Dict[str, Any]:
        """Writes the report line."""
        self._write(report_line(step, value))
        return {"outcome": "accepted"}

    def checkpoint_status(self) -> None:
        """The log transport has no request of its own to poll."""
        return None

    def acknowledge(self, path: str, step: Optional[int], task: Optional[str]) -> None:
        """Writes the acknowledgement line (the log it lands in names the task)."""
        self._write(acknowledge_line(path, step))

    def _write(self, line: str) -> None:
        stream = self._stream if self._stream is not None else sys.stdout
        if stream is None:
            raise OutputError("there is no standard output (sys.stdout is None)", line)
        try:
            # One write of the whole line, so another thread's output cannot land inside it.
            stream.write(("\n" if self.newline_first else "") + line + "\n")
            stream.flush()
        except (OSError, ValueError) as e:
            raise OutputError(e, line) from e
