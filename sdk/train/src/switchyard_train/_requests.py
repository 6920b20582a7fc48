"""The two ways a checkpoint request reaches the process without the API: SIGTERM and
the pod's annotations file (a downward-API volume).

This module only notices requests; it never writes anything and never talks to the
controller. The SIGTERM handler only counts: doing more inside a signal handler (saving,
printing) would run at an arbitrary bytecode of the training loop.
"""

from __future__ import annotations

import os
import signal
import stat
import threading
from types import FrameType
from typing import Any, Callable, Optional, Tuple, Union

#: The annotation the controller sets on every pod of a job it asks to checkpoint.
CHECKPOINT_ANNOTATION = "switchyard.dev/checkpoint-requested"

# Kubernetes caps a pod's annotations at 256 KiB together; anything larger is not a
# downward-API annotations file, and reading it whole every step would cost.
_MAX_ANNOTATIONS_BYTES = 1 << 20

_Handler = Union[Callable[[int, Optional[FrameType]], Any], int, None]

_install_lock = threading.Lock()
_installed = False
_previous: _Handler = None
_sigterm_count = 0


def _on_sigterm(signum: int, frame: Optional[FrameType]) -> None:
    # No lock here: the handler runs on the main thread between two bytecodes, possibly
    # while that thread holds any lock of ours.
    global _sigterm_count
    _sigterm_count += 1
    if callable(_previous):
        _previous(signum, frame)


def install_sigterm_handler() -> bool:
    """Make SIGTERM count as a checkpoint request instead of ending the process.

    A handler installed before (by the script or a framework) still runs after ours;
    the default action (terminate) does not, since the point is to save first. Only the
    main thread may install handlers: from another thread this returns False and leaves
    SIGTERM as it is.
    """
    global _installed, _previous
    with _install_lock:
        if _installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
        _previous = previous
        _installed = True
        return True


def sigterm_count() -> int:
    """How many SIGTERMs this process received since the handler was installed."""
    return _sigterm_count


class AnnotationsFile:
    """The pod's annotations as the downward API writes them (`key="value"` lines).

    The file is re-read only when `stat` says it changed (the kubelet replaces it
    through a symbolic link, so its inode changes), which keeps a call per step cheap.
    """

    def __init__(self, path: str) -> None:
        #: The file's path (`SWITCHYARD_ANNOTATIONS_FILE`).
        self.path = path
        self._seen: Optional[Tuple[int, int, int, int]] = None
        self._value: Optional[str] = None

    def request(self) -> Optional[str]:
        """The checkpoint annotation's value when the pod carries it, else None.

        A file that does not exist (yet) carries no request. Raises `OSError` when the
        file exists but cannot be read, and `ValueError` when it is not a regular file
        or is implausibly large.
        """
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._value = None, None
            return None
        identity = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)
        if identity == self._seen:
            return self._value
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"the annotations file {self.path} is not a regular file")
        if info.st_size > _MAX_ANNOTATIONS_BYTES:
            raise ValueError(
                f"the annotations file {self.path} holds {info.st_size} bytes; a pod's "
                f"annotations hold at most 256 KiB"
            )
        with open(self.path, "rb") as f:
            text = f.read(_MAX_ANNOTATIONS_BYTES + 1).decode("utf-8", errors="replace")
        self._value = parse_request(text)
        self._seen = identity
        return self._value


def parse_request(text: str) -> Optional[str]:
    """The value of the checkpoint annotation in downward-API text, or None."""
    prefix = CHECKPOINT_ANNOTATION + "="
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
    return None
