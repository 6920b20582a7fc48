"""The library against the real controller: `switchyard run --cluster sim:` on loopback,
its API token in a file, Tiresias preempting a job that a training script (or this
test, as one) drives through the HTTP transport.

The binary is `SWITCHYARD_BIN`, else the workspace's `target/debug/switchyard` (built
by `cargo build --workspace` or `cargo test --workspace`). Without it the tests skip,
unless SWITCHYARD_REQUIRE_SWITCHYARD_BIN is set (as in CI), where they fail.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

import switchyard_train as sy
from conftest import REPO

LOOP = str(Path(__file__).parent / "scripts" / "loop.py")
# Virtual seconds per wall second: Tiresias's rounds and the grace periods pass quickly.
SPEED = 10.0
TOKEN = "live-test-token"
WAIT_SECONDS = 120.0


def binary() -> str:
    path = os.environ.get("SWITCHYARD_BIN") or str(REPO / "target" / "debug" / "switchyard")
    if not os.access(path, os.X_OK):
        message = f"no switchyard binary at {path} (cargo build --workspace builds it)"
        if os.environ.get("SWITCHYARD_REQUIRE_SWITCHYARD_BIN"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def workload(grace: float) -> str:
    """One one-core node; `trainer` runs from 0 and, asked to checkpoint, waits for the
    API's acknowledgement up to `grace` s; `newcomer` arrives at 40, when Tiresias
    (first queue cut at 5 core-seconds) has demoted the trainer, and preempts it."""
    return f"""seed: 1
cluster:
  nodes:
    - {{name: n, cpus: 1, memory_gib: 4}}
templates:
  trainer: {{work: 100000, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none,
             acknowledge: api, checkpoint_grace: {grace}}}
  newcomer: {{work: 100000, speed: 1.0, cpus: 1, max_cores: 1, memory_gib: 1, curve: none}}
jobs:
  - {{template: trainer, id: trainer, at: 0}}
  - {{template: newcomer, id: newcomer, at: 40}}
"""


class Controller:
    """A `switchyard run --cluster sim:` process serving on an ephemeral port."""

    def __init__(self, directory: Path, grace: float) -> None:
        self.token_file = directory / "token"
        self.token_file.write_text(TOKEN + "\n")
        workload_file = directory / "workload.yaml"
        workload_file.write_text(workload(grace))
        self.process = subprocess.Popen(
            [binary(), "run", "--cluster", f"sim:{workload_file}", "--listen", "127.0.0.1:0",
             "--speed", str(SPEED), "--policy", "tiresias", "--token-file", str(self.token_file)],
            env=dict(os.environ, SWITCHYARD_NO_CACHE="1"),
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.log: List[str] = []
        self.url = self._wait_for_address()
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_address(self) -> str:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            found = re.search(r"API on (http://\S+)", line)
            if found:
                return found.group(1)
        self.process.wait()
        pytest.fail(f"the controller exited ({self.process.returncode}):\n{''.join(self.log)}")

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)

    def call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def wait_for(self, path: str, condition: Callable[[Any], bool]) -> Any:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            answer = self.call("GET", path)
            if condition(answer):
                return answer
            if time.monotonic() > deadline:
                pytest.fail(f"{path} never met the condition; last answer {answer}\n"
                            + "".join(self.log[-30:]))
            time.sleep(0.1)

    def trainer(self) -> Optional[Dict[str, Any]]:
        jobs = self.call("GET", "/v1/jobs")["jobs"]
        return next((job for job in jobs if job["id"] == "trainer"), None)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def controller_has_trainer(jobs: Dict[str, Any]) -> bool:
    return any(job["id"] == "trainer" for job in jobs["jobs"])


@pytest.fixture
def start_controller(tmp_path):
    started: List[Controller] = []

    def start(grace: float) -> Controller:
        controller = Controller(tmp_path, grace)
        started.append(controller)
        controller.wait_for("/v1/jobs", lambda jobs: controller_has_trainer(jobs))
        controller.call("PUT", "/v1/policies/tiresias/parameters", {"queue_thresholds": "5"})
        return controller

    yield start
    for controller in started:
        controller.stop()


def environment(controller: Controller) -> Dict[str, str]:
    """What a TrainingJob's container gets for the HTTP transport."""
    return {
        "SWITCHYARD_URL": controller.url,
        "SWITCHYARD_JOB": "trainer",
        "SWITCHYARD_NAMESPACE": "",
        "SWITCHYARD_TASK": "main",
        "SWITCHYARD_TOKEN_FILE": str(controller.token_file),
    }


def test_a_script_asked_to_checkpoint_acknowledges_and_its_job_is_stopped_at_once(
    tmp_path, start_controller, start_training
):
    grace = 600.0
    controller = start_controller(grace)
    checkpoint = tmp_path / "ckpt"
    training = start_training(
        [LOOP, str(checkpoint), "--step-seconds", "0.05"], environment(controller)
    )
    assert training.finish() == 0, training.stderr
    assert checkpoint.exists()
    assert training.stderr == "", "no report or poll failed"
    trainer = controller.wait_for(
        "/v1/jobs", lambda jobs: any(j["id"] == "trainer" and j.get("last_checkpoint")
                                     for j in jobs["jobs"])
    )
    trainer = next(j for j in trainer["jobs"] if j["id"] == "trainer")
    last = trainer["last_checkpoint"]
    assert last["outcome"] == "acknowledged", trainer
    assert last["path"] == str(checkpoint)
    assert last["seconds"] < grace / 2, "stopped at the acknowledgement, not at the grace period"
    assert trainer["phase"] != "running", trainer
    status = controller.call("GET", "/v1/jobs/trainer/checkpoint")
    assert status["requested"] is False, status


def test_a_job_that_never_acknowledges_is_stopped_at_its_grace_period_and_reported_timed_out(
    tmp_path, start_controller, caplog
):
    grace = 30.0
    controller = start_controller(grace)
    session = sy.Session.from_environment(environment(controller), handle_sigterm=False,
                                          poll_interval=0.2)
    deadline = time.monotonic() + WAIT_SECONDS
    while not session.checkpoint_requested():
        assert time.monotonic() < deadline, "never asked to checkpoint"
        time.sleep(0.1)
    assert session.failures == {}
    trainer = controller.wait_for(
        "/v1/jobs", lambda jobs: any(j["id"] == "trainer" and j.get("last_checkpoint")
                                     for j in jobs["jobs"])
    )
    last = next(j for j in trainer["jobs"] if j["id"] == "trainer")["last_checkpoint"]
    assert last["outcome"] == "timed_out", last
    assert last["seconds"] == pytest.approx(grace, abs=SPEED), "stopped at the grace period"
    with pytest.raises(sy.ControllerError) as late:
        session.acknowledge(tmp_path / "too-late")
    assert late.value.status == 409, late.value


def test_a_report_reaches_the_jobs_loss_series(start_controller, caplog):
    controller = start_controller(600.0)
    session = sy.Session.from_environment(environment(controller), handle_sigterm=False)
    assert session.report(3, 0.75), session.failures
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.report(3, 0.5), "step 3 is in the series already"
    assert session.failures == {"ignored": 1}
    assert "step 3 is already in job `trainer`'s loss series" in caplog.records[0].getMessage()


def test_without_the_token_file_a_report_is_refused_and_an_acknowledgement_raises_401(
    start_controller, tmp_path
):
    controller = start_controller(600.0)
    env = environment(controller)
    del env["SWITCHYARD_TOKEN_FILE"]
    session = sy.Session.from_environment(env, handle_sigterm=False)
    assert not session.report(1, 0.5)
    assert session.failures == {"http-401": 1}
    with pytest.raises(sy.ControllerError, match="no SWITCHYARD_TOKEN_FILE is set") as refused:
        session.acknowledge(tmp_path / "ckpt")
    assert refused.value.status == 401


def test_an_unknown_job_is_a_404_naming_it(start_controller, tmp_path):
    controller = start_controller(600.0)
    env = dict(environment(controller), SWITCHYARD_JOB="no/such job")
    session = sy.Session.from_environment(env, handle_sigterm=False)
    assert not session.checkpoint_requested()
    assert session.failures == {"http-404": 1}
    with pytest.raises(sy.ControllerError) as unknown:
        session.acknowledge(tmp_path / "ckpt")
    assert unknown.value.status == 404 and "no/such job" in unknown.value.message
