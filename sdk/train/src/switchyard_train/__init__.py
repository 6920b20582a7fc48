"""The training side of switchyard: what a training script calls so the controller can
follow it and move it without losing work.

```python
import switchyard_train as sy

sy.session()                      # at start: SIGTERM now means "checkpoint", not "die"
for step, batch in enumerate(data):
    loss = train_step(batch)
    sy.report(step, loss)         # the job's loss series
    if sy.checkpoint_requested():  # the controller wants to move or stop the job
        save(path)
        sy.acknowledge(path, step)  # written: the controller stops the pod now
        break
```

Two transports, chosen from the environment the controller gives the container: HTTP
to the controller's API when `SWITCHYARD_URL` is set, else lines on standard output
that the controller reads from the container's log. A checkpoint request arrives as the
pod annotation `switchyard.dev/checkpoint-requested` (the file
`SWITCHYARD_ANNOTATIONS_FILE`), as SIGTERM, or over the API.

Modules:

- `_session`: `Session`, the three calls and what a failure means for training;
- `_log`, `_http`: the two transports and their wire formats;
- `_requests`: the SIGTERM handler and the annotations file;
- `_types`: the controller's answers (`CheckpointStatus`, `Acknowledgement`);
- `_errors`: the errors `acknowledge` and the set-up raise;
- `lightning`, `huggingface`, `keras`: framework callbacks, each importing its
  framework only when imported itself.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Optional

from ._errors import (
    ConfigurationError,
    ControllerError,
    ControllerUnreachable,
    OutputError,
    SwitchyardError,
    TokenFileError,
)
from ._http import HttpTransport
from ._log import LogTransport
from ._requests import CHECKPOINT_ANNOTATION
from ._session import PathLike, Session, Transport
from ._types import Acknowledgement, AnswerError, CheckpointStatus

__all__ = [
    "CHECKPOINT_ANNOTATION",
    "Acknowledgement",
    "AnswerError",
    "CheckpointStatus",
    "ConfigurationError",
    "ControllerError",
    "ControllerUnreachable",
    "HttpTransport",
    "LogTransport",
    "OutputError",
    "Session",
    "SwitchyardError",
    "TokenFileError",
    "Transport",
    "acknowledge",
    "checkpoint_requested",
    "report",
    "session",
    "set_session",
]

_default: Optional[Session] = None
_default_lock = threading.Lock()


def session() -> Session:
    """The process's session, made from the environment at the first call.

    Call it at the start of the script: from then on SIGTERM asks for a checkpoint
    instead of ending the process. Raises `ConfigurationError` when the environment
    names an unusable controller (a malformed `SWITCHYARD_URL`, no `SWITCHYARD_JOB`).
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = Session.from_environment()
        return _default


def set_session(new: Optional[Session]) -> None:
    """Makes `new` the session the module functions use (None: the environment's again,
    at the next call)."""
    global _default
    with _default_lock:
        _default = new


def report(step: Any, loss: Any) -> bool:
    """Reports the training loss at `step`; never raises (see `Session.report`)."""
    try:
        current = session()
    except SwitchyardError as e:
        _unusable(e)
        return False
    return current.report(step, loss)


def checkpoint_requested() -> bool:
    """True once a checkpoint is requested, until acknowledged; never raises."""
    try:
        current = session()
    except SwitchyardError as e:
        _unusable(e)
        return False
    return current.checkpoint_requested()


def acknowledge(path: PathLike, step: Optional[int] = None) -> Optional[Acknowledgement]:
    """Tells the controller the checkpoint at `path` is written; raises when the
    controller did not hear it (see `Session.acknowledge`)."""
    return session().acknowledge(path, step)


_unusable_logged = False


def _unusable(error: SwitchyardError) -> None:
    global _unusable_logged
    if not _unusable_logged:
        _unusable_logged = True
        logging.getLogger("switchyard_train").warning(
            "switchyard is not reachable from this process, training goes on: %s", error
        )
