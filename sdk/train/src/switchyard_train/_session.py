"""`Session`: the three calls of a training script, over whichever transport the
environment names.

It owns what the calls mean to training: `report` never raises (a lost sample costs
a point on a curve; a raised error would cost the run), `checkpoint_requested` never
raises and stays true until the request it saw is acknowledged, `acknowledge` raises
(the caller must know the controller did not hear it). It does not know the wire
formats; the transports do.
"""

from __future__ import annotations

import logging
import math
import operator
import os
import threading
from typing import Any, Dict, Mapping, Optional, Protocol, Set, TextIO, Union

from ._errors import ConfigurationError, SwitchyardError
from ._http import HttpTransport
from ._log import LogTransport
from ._requests import AnnotationsFile, install_sigterm_handler, sigterm_count
from ._types import Acknowledgement, CheckpointStatus

_logger = logging.getLogger("switchyard_train")

# Where Kubernetes mounts the pod's service-account namespace; it completes a job name
# into the API id `namespace/name` when the environment gives no namespace.
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


class Transport(Protocol):
    """What a session needs of a transport (`LogTransport`, `HttpTransport`)."""

    name: str

    def push_loss(self, step: int, value: float) -> Dict[str, Any]:
        """Delivers one sample; returns the controller's answer."""

    def checkpoint_status(self) -> Optional[CheckpointStatus]:
        """The controller's request, when the transport can ask for it."""

    def acknowledge(
        self, path: str, step: Optional[int], task: Optional[str]
    ) -> Optional[Acknowledgement]:
        """Delivers an acknowledgement; raises when it did not arrive."""


class Session:
    """A training process's link to the controller.

    Most scripts use the module functions (`switchyard_train.report`, ...), which share
    one session made from the environment by `Session.from_environment`. Make one
    yourself to choose the transport, e.g. in a test.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        task: Optional[str] = None,
        annotations_file: Optional[str] = None,
        handle_sigterm: bool = True,
    ) -> None:
        #: Where reports and acknowledgements go.
        self.transport = transport
        #: This process's task (`SWITCHYARD_TASK`), named in HTTP acknowledgements.
        self.task = task
        #: Failures of `report` and `checkpoint_requested` so far, by kind.
        self.failures: Dict[str, int] = {}
        self._annotations = AnnotationsFile(annotations_file) if annotations_file else None
        self._sigterm = install_sigterm_handler() if handle_sigterm else False
        if handle_sigterm and not self._sigterm:
            _logger.warning(
                "SIGTERM still ends this process: a session made off the main thread cannot "
                "install a signal handler; call switchyard_train.session() on the main thread "
                "first"
            )
        # A SIGTERM before this session existed was another session's request.
        self._sigterm_base = sigterm_count()
        self._answered: Set[str] = set()
        self._api_request: Optional[str] = None
        self._lock = threading.Lock()

    @classmethod
    def from_environment(
        cls,
        environ: Optional[Mapping[str, str]] = None,
        *,
        stream: Optional[TextIO] = None,
        handle_sigterm: bool = True,
        poll_interval: float = 1.0,
    ) -> "Session":
        """The session the controller set this container up for.

        HTTP when `SWITCHYARD_URL` is set (with `SWITCHYARD_JOB` and, for reports and
        acknowledgements, `SWITCHYARD_TOKEN_FILE`), else log lines on `stream` (standard
        output by default). `SWITCHYARD_ANNOTATIONS_FILE` and SIGTERM count as checkpoint
        requests under both.
        """
        env = os.environ if environ is None else environ
        url = env.get("SWITCHYARD_URL", "")
        transport: Transport
        if url:
            transport = HttpTransport(
                url,
                job_id(env),
                token_file=env.get("SWITCHYARD_TOKEN_FILE") or None,
                poll_interval=poll_interval,
            )
        else:
            transport = LogTransport(stream)
        return cls(
            transport,
            task=env.get("SWITCHYARD_TASK") or None,
            annotations_file=env.get("SWITCHYARD_ANNOTATIONS_FILE") or None,
            handle_sigterm=handle_sigterm,
        )

    def report(self, step: Any, loss: Any) -> bool:
        """Sends the training loss at `step`; True when the controller has it.

        Never raises: a failure is logged once per kind (`failures` counts them all) and
        training goes on. A non-finite loss is not sent (the controller refuses it).
        """
        try:
            step_value = _step(step)
            loss_value = float(loss)
        except (TypeError, ValueError) as e:
            self._failed("argument", f"report({step!r}, {loss!r}) was not sent: {e}")
            return False
        if not math.isfinite(loss_value):
            self._failed("not-finite", f"loss {loss_value} at step {step_value} was not sent: "
                         f"the controller keeps finite values only")
            return False
        try:
            answer = self.transport.push_loss(step_value, loss_value)
        except SwitchyardError as e:
            self._failed(e.kind, f"a loss report did not reach the controller: {e}")
            return False
        except Exception as e:  # noqa: BLE001 - nothing in a report may stop training
            self._failed("unexpected", f"a loss report failed: {type(e).__name__}: {e}")
            return False
        if answer.get("outcome") == "ignored":
            self._failed("ignored", f"the controller ignores this job's loss reports: "
                         f"{answer.get('note', 'no reason given')}")
            return False
        return True

    def checkpoint_requested(self) -> bool:
        """True once the controller asks for a checkpoint, until `acknowledge` answers it.

        Cheap enough for every step: the annotations file is re-read only when it
        changed, and the API is asked at most once per poll interval. Never raises.
        """
        return bool(self._pending())

    def acknowledge(
        self, path: PathLike, step: Optional[int] = None
    ) -> Optional[Acknowledgement]:
        """Tells the controller the checkpoint at `path` is completely written.

        Call it after the save has returned, on every rank that was asked (each task
        acknowledges for itself; the job's checkpoint is complete when all have). Over
        HTTP it returns the controller's answer; over the log there is none to return.
        Raises `SwitchyardError` when the acknowledgement did not arrive.
        """
        text = checkpoint_path(path)
        step_value = None if step is None else _step(step)
        # What this answers: the requests seen locally now and the API's request as
        # last polled (asking the API again here would only delay the acknowledgement).
        answered = self._pending(ask_api=False)
        result = self.transport.acknowledge(text, step_value, self.task)
        with self._lock:
            self._answered |= answered
        return result

    def acknowledge_rank(
        self, path: PathLike, step: Optional[int] = None, *, local_rank: int = 0
    ) -> Optional[Acknowledgement]:
        """`acknowledge` from one rank of a data-parallel job, after a collective save.

        The ranks of one pod share its task. Over the log each rank writes its line (the
        controller counts the task once); over HTTP the pod's first rank acknowledges for
        all of them, since a second acknowledgement of a task that completed the job's
        checkpoint comes late and is refused (409).
        """
        if local_rank != 0 and isinstance(self.transport, HttpTransport):
            checkpoint_path(path)
            answered = self._pending(ask_api=False)
            with self._lock:
                self._answered |= answered
            return None
        return self.acknowledge(path, step)

    def _pending(self, ask_api: bool = True) -> Set[str]:
        requests: Set[str] = set()
        if self._sigterm:
            count = sigterm_count()
            if count > self._sigterm_base:
                requests.add(f"signal:{count}")
        if self._annotations is not None:
            try:
                value = self._annotations.request()
            except (OSError, ValueError) as e:
                self._failed("annotations-file", f"cannot read the annotations file: {e}")
            else:
                if value is not None:
                    requests.add(f"annotation:{value}")
        if not ask_api:
            if self._api_request is not None:
                requests.add(self._api_request)
            with self._lock:
                return requests - self._answered
        try:
            status = self.transport.checkpoint_status()
        except SwitchyardError as e:
            self._failed(e.kind, f"cannot ask the controller for a checkpoint request: {e}")
        except Exception as e:  # noqa: BLE001 - a poll may not stop training either
            self._failed("unexpected", f"asking for a checkpoint request failed: "
                         f"{type(e).__name__}: {e}")
        else:
            self._api_request = None
            if status is not None and status.requested and not self._answered_by(status):
                self._api_request = f"api:{status.requested_at}"
                requests.add(self._api_request)
        with self._lock:
            return requests - self._answered

    def _answered_by(self, status: CheckpointStatus) -> bool:
        if self.task is None:
            # Without a task name the acknowledgement covered every task.
            return bool(status.acknowledged)
        return self.task in status.acknowledged

    def _failed(self, kind: str, message: str) -> None:
        with self._lock:
            first = kind not in self.failures
            self.failures[kind] = self.failures.get(kind, 0) + 1
        if first:
            _logger.warning("%s (training goes on; later failures of this kind are "
                            "counted in Session.failures, not logged)", message)
        else:
            _logger.debug("%s", message)


def job_id(env: Mapping[str, str]) -> str:
    """The job's API id: `SWITCHYARD_JOB`, prefixed `namespace/` in a cluster.

    The namespace is `SWITCHYARD_NAMESPACE` when set (empty for none, as under
    `run --cluster sim:`), else the pod's service-account namespace when mounted.
    """
    job = env.get("SWITCHYARD_JOB", "")
    if not job:
        raise ConfigurationError(
            "SWITCHYARD_URL is set but SWITCHYARD_JOB is not: the HTTP transport needs the "
            "job's name (the controller sets it in every container of a TrainingJob)"
        )
    if "/" in job:
        return job
    if "SWITCHYARD_NAMESPACE" in env:
        namespace = env["SWITCHYARD_NAMESPACE"]
    else:
        try:
            with open(SERVICE_ACCOUNT_NAMESPACE_FILE, encoding="utf-8") as f:
                namespace = f.read(256).strip()
        except OSError:
            namespace = ""
    return f"{namespace}/{job}" if namespace else job


def checkpoint_path(path: PathLike) -> str:
    """`path` as text the controller can show: absolute unless it is a URL
    (`s3://...`), and on one line (the log transport's line ends at a newline)."""
    text = os.fsdecode(os.fspath(path))
    if not text:
        raise ValueError("the checkpoint path is empty")
    if "\n" in text or "\r" in text:
        raise ValueError(f"the checkpoint path {text!r} holds a line break")
    return text if "://" in text else os.path.abspath(text)


def _step(step: Any) -> int:
    if isinstance(step, bool):
        raise TypeError(f"step {step!r} is not a step number")
    try:
        value = operator.index(step)
    except TypeError:
        number = float(step)
        if not number.is_integer():
            raise ValueError(f"step {step!r} is not a whole number") from None
        value = int(number)
    if value < 0:
        raise ValueError(f"step {value} is negative")
    if value >= 1 << 64:
        raise ValueError(f"step {value} is past the controller's largest step, 2^64 - 1")
    return value
