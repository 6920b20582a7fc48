"""The HTTP transport's failures against a real HTTP server on loopback that answers
what each test scripts: what reaches the training script (a raised error naming the
status and the controller's message) and what does not (a report's failure)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Tuple

import pytest

import switchyard_train as sy

Answer = Tuple[int, object]


class ScriptedController:
    """Answers `(method, path)` with a scripted status and JSON body, and records every
    request it got."""

    def __init__(self) -> None:
        self.answers: Dict[Tuple[str, str], Answer] = {}
        self.requests: List[Dict[str, object]] = []
        self.redirect_to: str = ""
        controller = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                controller.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "authorization": self.headers.get("Authorization"),
                        "body": json.loads(body) if body else None,
                    }
                )
                if controller.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", controller.redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status, payload = controller.answers.get(
                    (self.command, self.path), (404, {"error": f"no route {self.path}"})
                )
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = _answer
            do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def controller():
    scripted = ScriptedController()
    yield scripted
    scripted.close()


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    return path


def http_session(url, token_file=None, job="ml/resnet50", task="worker-0", **transport):
    transport = sy.HttpTransport(
        url, job, token_file=None if token_file is None else str(token_file), **transport
    )
    return sy.Session(transport, task=task, handle_sigterm=False)


ACK_PATH = "/v1/jobs/ml%2Fresnet50/checkpoint"
LOSS_PATH = "/v1/jobs/ml%2Fresnet50/loss"


def test_an_acknowledgement_carries_the_token_the_path_the_step_and_the_task(
    controller, token_file, tmp_path
):
    controller.answers[("POST", ACK_PATH)] = (
        202,
        {"acknowledged": True, "after_seconds": 4.5, "waiting_for": ["worker-1"]},
    )
    ack = http_session(controller.url, token_file).acknowledge(tmp_path / "ckpt", step=12)
    assert ack == sy.Acknowledgement(after_seconds=4.5, waiting_for=("worker-1",))
    assert controller.requests == [
        {
            "method": "POST",
            "path": ACK_PATH,
            "authorization": "Bearer s3cret",
            "body": {"path": str(tmp_path / "ckpt"), "step": 12, "task": "worker-0"},
        }
    ]


@pytest.mark.parametrize(
    "status, message",
    [
        (401, "missing or wrong bearer token"),
        (409, "no checkpoint is requested of job ml/resnet50 (a late or repeated acknowledgement)"),
        (404, "no active job ml/resnet50"),
    ],
)
def test_a_refused_acknowledgement_raises_naming_the_status_and_the_controllers_message(
    controller, token_file, status, message
):
    controller.answers[("POST", ACK_PATH)] = (status, {"error": message})
    with pytest.raises(sy.ControllerError) as raised:
        http_session(controller.url, token_file).acknowledge("/ckpt")
    assert raised.value.status == status
    assert raised.value.message == message
    assert f"answered {status}: {message}" in str(raised.value)
    assert ACK_PATH in str(raised.value)


def test_a_401_without_a_token_file_says_that_no_token_was_sent(controller):
    controller.answers[("POST", ACK_PATH)] = (401, {"error": "missing bearer token"})
    with pytest.raises(sy.ControllerError, match="no SWITCHYARD_TOKEN_FILE is set"):
        http_session(controller.url).acknowledge("/ckpt")
    assert controller.requests[0]["authorization"] is None


def test_an_unreachable_controller_raises_naming_the_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on the port once the socket is closed.
    with pytest.raises(sy.ControllerUnreachable, match=f"127.0.0.1:{port}/v1/jobs/"):
        http_session(f"http://127.0.0.1:{port}").acknowledge("/ckpt")


@pytest.mark.parametrize(
    "content, problem",
    [(None, "cannot be read"), ("", "is empty"), ("  \n", "is empty"), ("a b", "whitespace"),
     ("x" * 5000, "at most 4096"), ("t\u00f6ken", "visible ASCII")],
)
def test_an_unusable_token_file_is_named_and_nothing_is_sent(
    controller, tmp_path, content, problem
):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(sy.TokenFileError) as raised:
        http_session(controller.url, path).acknowledge("/ckpt")
    assert str(path) in str(raised.value) and problem in str(raised.value)
    assert controller.requests == []


def test_the_token_file_is_read_at_every_call_so_a_rotated_secret_takes_effect(
    controller, token_file
):
    controller.answers[("POST", LOSS_PATH)] = (202, {"outcome": "accepted"})
    session = http_session(controller.url, token_file)
    assert session.report(1, 0.5)
    token_file.write_text("rotated")
    assert session.report(2, 0.4)
    assert [r["authorization"] for r in controller.requests] == ["Bearer s3cret", "Bearer rotated"]
    assert [r["body"] for r in controller.requests] == [
        {"step": 1, "value": 0.5},
        {"step": 2, "value": 0.4},
    ]


def test_a_failing_report_is_logged_once_per_kind_and_never_raises(controller, token_file, caplog):
    controller.answers[("POST", LOSS_PATH)] = (401, {"error": "wrong bearer token"})
    session = http_session(controller.url, token_file)
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.report(1, 0.5)
        assert not session.report(2, 0.5)
        controller.answers[("POST", LOSS_PATH)] = (422, {"error": "not a finite value"})
        assert not session.report(3, 0.5)
    assert session.failures == {"http-401": 2, "http-422": 1}
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "401: wrong bearer token" in messages[0]
    assert "422: not a finite value" in messages[1]


def test_a_report_the_controller_ignores_is_logged_with_its_note(controller, token_file, caplog):
    note = "TrainingJob ml/resnet50 does not take pushed samples (progress.push is false)"
    controller.answers[("POST", LOSS_PATH)] = (202, {"outcome": "ignored", "note": note})
    session = http_session(controller.url, token_file)
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.report(1, 0.5)
    assert note in caplog.records[0].getMessage()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_after_an_unanswered_report_the_next_ones_wait_out_a_growing_pause():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)  # accepts connections and never answers them
        clock = FakeClock()
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        session = http_session(url, timeout=0.2, clock=clock)
        assert not session.report(1, 0.5)
        clock.now = 0.9
        assert not session.report(2, 0.5), "within the first pause: not sent"
        clock.now = 1.0
        assert not session.report(3, 0.5)  # tried again, no answer: the pause doubles
        clock.now = 2.9
        assert not session.report(4, 0.5)
        assert session.failures == {"unreachable": 4}
        connections = 0
        s.settimeout(0.1)
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                break
            conn.close()
            connections += 1
        assert connections == 2, "only the reports at 0 s and 1 s reached the socket"


def test_the_checkpoint_request_is_asked_at_most_once_per_poll_interval(controller):
    status = {"requested": False, "requested_at": None, "deadline": None, "acknowledged": []}
    controller.answers[("GET", ACK_PATH)] = (200, status)
    clock = FakeClock()
    session = http_session(controller.url, clock=clock, poll_interval=1.0)
    for _ in range(100):
        assert not session.checkpoint_requested()
    requested = dict(status, requested=True, requested_at="2026-01-01T00:00:00Z",
                     deadline="2026-01-01T00:01:00Z")
    controller.answers[("GET", ACK_PATH)] = (200, requested)
    assert not session.checkpoint_requested(), "still the cached answer"
    clock.now = 1.0
    assert session.checkpoint_requested()
    assert [r["method"] for r in controller.requests] == ["GET", "GET"]
    assert all(r["authorization"] is None for r in controller.requests), "reads are open"


def test_a_request_this_task_already_acknowledged_is_not_asked_again(controller):
    controller.answers[("GET", ACK_PATH)] = (
        200,
        {"requested": True, "requested_at": "2026-01-01T00:00:00Z",
         "deadline": "2026-01-01T00:01:00Z", "acknowledged": ["worker-0"]},
    )
    assert not http_session(controller.url, task="worker-0").checkpoint_requested()
    assert http_session(controller.url, task="worker-1").checkpoint_requested()


def test_a_poll_that_fails_is_logged_and_counts_as_no_request(controller, caplog):
    controller.answers[("GET", ACK_PATH)] = (404, {"error": "no active job ml/resnet50"})
    session = http_session(controller.url)
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.checkpoint_requested()
    assert session.failures == {"http-404": 1}
    assert "no active job ml/resnet50" in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    "answer, field",
    [({"requested": "yes", "requested_at": None, "deadline": None, "acknowledged": []},
      "requested"),
     ({"requested": True, "requested_at": None, "deadline": None}, "acknowledged"),
     (b"<html>proxy error</html>", "not a JSON object")],
)
def test_a_malformed_answer_is_named_not_guessed(controller, answer, field, caplog):
    controller.answers[("GET", ACK_PATH)] = (200, answer)
    session = http_session(controller.url)
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.checkpoint_requested()
    assert sum(session.failures.values()) == 1
    assert field in caplog.records[0].getMessage()


def test_a_redirect_is_not_followed_so_the_token_stays_with_the_controller(controller, token_file):
    elsewhere = ScriptedController()
    try:
        controller.redirect_to = elsewhere.url
        with pytest.raises(sy.ControllerError, match="not followed"):
            http_session(controller.url, token_file).acknowledge("/ckpt")
        assert elsewhere.requests == []
    finally:
        elsewhere.close()


def test_the_environment_chooses_http_and_completes_the_job_id_with_the_namespace(token_file):
    env = {
        "SWITCHYARD_URL": "http://switchyard.switchyard-system:8080/",
        "SWITCHYARD_JOB": "resnet50",
        "SWITCHYARD_NAMESPACE": "ml",
        "SWITCHYARD_TASK": "worker-1",
        "SWITCHYARD_TOKEN_FILE": str(token_file),
    }
    session = sy.Session.from_environment(env, handle_sigterm=False)
    assert isinstance(session.transport, sy.HttpTransport)
    assert session.transport.job_id == "ml/resnet50"
    assert session.transport.base_url == "http://switchyard.switchyard-system:8080"
    assert session.task == "worker-1"
    env["SWITCHYARD_NAMESPACE"] = ""
    assert sy.Session.from_environment(env, handle_sigterm=False).transport.job_id == "resnet50"


@pytest.mark.parametrize(
    "env, named",
    [({"SWITCHYARD_URL": "http://c:8080"}, "SWITCHYARD_JOB"),
     ({"SWITCHYARD_URL": "c:8080", "SWITCHYARD_JOB": "j"}, "'c:8080'"),
     ({"SWITCHYARD_URL": "ftp://c", "SWITCHYARD_JOB": "j"}, "'ftp://c'")],
)
def test_an_unusable_environment_is_refused_naming_the_variable(env, named):
    with pytest.raises(sy.ConfigurationError, match=named):
        sy.Session.from_environment(env, handle_sigterm=False)


def test_over_http_the_other_ranks_of_a_pod_leave_the_acknowledgement_to_its_first(controller):
    requested = {"requested": True, "requested_at": "2026-01-01T00:00:00Z",
                 "deadline": "2026-01-01T00:01:00Z", "acknowledged": []}
    controller.answers[("GET", ACK_PATH)] = (200, requested)
    controller.answers[("POST", ACK_PATH)] = (
        202, {"acknowledged": True, "after_seconds": 1.0, "waiting_for": []})
    second, first = http_session(controller.url), http_session(controller.url)
    assert second.checkpoint_requested() and first.checkpoint_requested()
    assert second.acknowledge_rank("/ckpt", 7, local_rank=1) is None
    assert not second.checkpoint_requested(), "its rank has answered the request"
    assert [r["method"] for r in controller.requests] == ["GET", "GET"], "nothing sent"
    assert first.acknowledge_rank("/ckpt", 7, local_rank=0).waiting_for == ()
    assert controller.requests[-1]["body"] == {"path": "/ckpt", "step": 7, "task": "worker-0"}
