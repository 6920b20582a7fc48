"""The HTTP transport: the controller's API (`SWITCHYARD_URL`), with the standard
library's `urllib` only.

It owns the wire format of the three calls (`POST /v1/jobs/{id}/loss`,
`GET /v1/jobs/{id}/checkpoint`, `POST /v1/jobs/{id}/checkpoint`), the bearer token read
from its file at every mutating call (a rotated Secret takes effect at once), and the
pacing that keeps a slow or absent controller from slowing training: checkpoint polls at
most once per `poll_interval`, and after a request that got no answer, reports and polls
wait out a growing pause before trying again. It decides nothing about what a failure
means for training; `Session` does.
"""

from __future__ import annotations

import json
import math
import os
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Optional

from ._errors import (
    ConfigurationError,
    ControllerError,
    ControllerUnreachable,
    TokenFileError,
)
from ._types import Acknowledgement, CheckpointStatus

#: The controller refuses larger token files; so does this library, with the same words.
MAX_TOKEN_FILE_BYTES = 4 << 10
# An error body is a one-line JSON message; a proxy's HTML page is cut to this.
_MAX_ERROR_BYTES = 64 << 10
_MAX_ANSWER_BYTES = 1 << 20
_MAX_BACKOFF_SECONDS = 30.0


def read_token_file(path: str) -> str:
    """The bearer token in `path`: a regular file of at most 4 KiB of text, trimmed.

    A FIFO or device is refused without opening it, so a wrong path cannot hang the
    training process.
    """
    try:
        info = os.stat(path)
    except OSError as e:
        raise TokenFileError(path, f"cannot be read: {e.strerror or e}") from e
    if not stat.S_ISREG(info.st_mode):
        raise TokenFileError(path, "is not a regular file; put the bearer token in a file")
    if info.st_size > MAX_TOKEN_FILE_BYTES:
        raise TokenFileError(
            path, f"holds {info.st_size} bytes; a token file holds at most {MAX_TOKEN_FILE_BYTES}"
        )
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as e:
        raise TokenFileError(path, f"cannot be read: {e.strerror or e}") from e
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        raise TokenFileError(path, "is not text; put the bearer token in it as plain text") from e
    if not token:
        raise TokenFileError(path, "is empty; put the bearer token in it")
    if any(c.isspace() for c in token):
        raise TokenFileError(path, "holds whitespace inside the token; put only the token in it")
    if not all("!" <= c <= "~" for c in token):
        raise TokenFileError(path, "holds characters other than visible ASCII, which no bearer "
                             "token has")
    return token


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the bearer token to wherever it points; the API never
    # redirects its /v1 calls, so one is an error to show, not to follow.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


class HttpTransport:
    """Talks to the controller at `base_url` about the job `job_id`."""

    name = "http"

    def __init__(
        self,
        base_url: str,
        job_id: str,
        *,
        token_file: Optional[str] = None,
        poll_interval: float = 1.0,
        timeout: float = 2.0,
        acknowledge_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigurationError(
                f"SWITCHYARD_URL={base_url!r} is not an http:// or https:// URL of the "
                f"controller's API (e.g. http://switchyard.switchyard-system:8080)"
            )
        if not job_id:
            raise ConfigurationError("the job id is empty; SWITCHYARD_JOB names the job")
        #: The API's base URL, without a trailing slash.
        self.base_url = base_url.rstrip("/")
        #: The job's API id (`namespace/name` in a cluster, the workload id in `sim:`).
        self.job_id = job_id
        #: The file the bearer token is read from before each mutating call.
        self.token_file = token_file
        self._job_url = f"{self.base_url}/v1/jobs/{urllib.parse.quote(job_id, safe='')}"
        self._poll_interval = poll_interval
        self._timeout = timeout
        self._acknowledge_timeout = acknowledge_timeout
        self._clock = clock
        self._opener = urllib.request.build_opener(_NoRedirects)
        self._polled_at: Optional[float] = None
        self._status: Optional[CheckpointStatus] = None
        self._quiet_until = -math.inf
        self._backoff = 0.0

    def push_loss(self, step: int, value: float) -> Dict[str, Any]:
        """Sends one sample; returns the controller's answer (`{"outcome": ...}`)."""
        return self._paced("POST", "/loss", {"step": step, "value": value}, authorised=True)

    def checkpoint_status(self) -> CheckpointStatus:
        """The job's checkpoint request, asked at most once per poll interval."""
        now = self._clock()
        if (
            self._polled_at is not None
            and now - self._polled_at < self._poll_interval
            and self._status is not None
        ):
            return self._status
        # Set before asking, so a failing controller is not asked again at every step.
        self._polled_at = now
        answer = self._paced("GET", "/checkpoint", None, authorised=False)
        self._status = CheckpointStatus.from_json(answer)
        return self._status

    def acknowledge(self, path: str, step: Optional[int], task: Optional[str]) -> Acknowledgement:
        """Tells the controller the checkpoint at `path` is written; raises on failure.

        No pause applies: the grace period is running, and the caller must hear the
        outcome of this very attempt.
        """
        body = {"path": path, "step": step, "task": task}
        answer = self._request(
            "POST", "/checkpoint", body, self._acknowledge_timeout, authorised=True
        )
        # The next poll must not show the request this acknowledgement answered.
        self._polled_at = None
        return Acknowledgement.from_json(answer)

    def _paced(
        self, method: str, suffix: str, body: Optional[Dict[str, Any]], authorised: bool
    ) -> Dict[str, Any]:
        # A report or a poll: not sent while pausing after one that got no answer.
        wait = self._quiet_until - self._clock()
        if wait > 0:
            raise ControllerUnreachable(
                method,
                self._job_url + suffix,
                f"not asked again for {wait:.1f} s after the last attempt got no answer",
            )
        try:
            answer = self._request(method, suffix, body, self._timeout, authorised)
        except ControllerUnreachable:
            self._backoff = min(max(2 * self._backoff, 1.0), _MAX_BACKOFF_SECONDS)
            self._quiet_until = self._clock() + self._backoff
            raise
        self._backoff = 0.0
        self._quiet_until = -math.inf
        return answer

    def _request(
        self,
        method: str,
        suffix: str,
        body: Optional[Dict[str, Any]],
        timeout: float,
        authorised: bool,
    ) -> Dict[str, Any]:
        url = self._job_url + suffix
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if authorised and self.token_file is not None:
            headers["Authorization"] = "Bearer " + read_token_file(self.token_file)
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                raw = response.read(_MAX_ANSWER_BYTES + 1)
                status = response.status
        except urllib.error.HTTPError as e:
            raise ControllerError(method, url, e.code, self._error_message(e)) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ControllerUnreachable(method, url, reason) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ControllerError(
                method, url, status, f"the answer is not a JSON object: {raw[:200]!r}"
            )
        return answer

    def _error_message(self, error: urllib.error.HTTPError) -> str:
        try:
            raw = error.read(_MAX_ERROR_BYTES)
        except OSError:
            raw = b""
        message: Optional[str] = None
        try:
            body = json.loads(raw)
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                message = body["error"]
        except ValueError:
            pass
        if message is None:
            text = raw.decode("utf-8", errors="replace").strip()
            message = text[:500] if text else (error.reason or "no message")
        if error.code == 401 and self.token_file is None:
            message += " (no SWITCHYARD_TOKEN_FILE is set, so no token was sent)"
        if 300 <= error.code < 400:
            message += f" (a redirect to {error.headers.get('Location')!r}, not followed)"
        return message
