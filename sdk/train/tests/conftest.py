"""Shared fixtures: training scripts run as real processes (their stdout read line by
line with a deadline, so a test fails instead of hanging), and the annotations file
written the way the kubelet writes it."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, Optional

import pytest

SDK = Path(__file__).resolve().parents[1]
SRC = SDK / "src"
EXAMPLES = SDK / "examples"
REPO = SDK.parents[1]

#: The report line of the log transport, as the controller's default pattern reads it.
REPORT_LINE = re.compile(r"^switchyard: step=(\d+) loss=([0-9.eE+-]+)$")
#: The acknowledgement line.
ACK_LINE = re.compile(r"^switchyard: checkpoint-complete step=(\d+|-) path=(.+)$")

# Generous: the framework tests import torch on a machine shared with a build.
DEADLINE_SECONDS = 300.0


def script_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment of a training process: this source tree importable, no
    switchyard variables of the test runner's own, unbuffered output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class Training:
    """A training script running in its own process."""

    def __init__(self, args: List[str], env: Dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *args],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        #: Every stdout line read so far.
        self.lines: List[str] = []
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self._stderr: List[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        """What the script wrote to stderr so far."""
        return "".join(self._stderr)

    def wait_for_line(self, pattern: "re.Pattern[str]") -> "re.Match[str]":
        """Reads stdout until a line matches; fails when the script ends first."""
        while True:
            try:
                line = self._lines.get(timeout=DEADLINE_SECONDS)
            except queue.Empty:
                self.process.kill()
                pytest.fail(f"no line matching {pattern.pattern} within {DEADLINE_SECONDS} s")
            if line is None:
                self.process.wait()
                pytest.fail(
                    f"the script ended (status {self.process.returncode}) before a line "
                    f"matching {pattern.pattern}; stdout:\n"
                    + "\n".join(self.lines)
                    + f"\nstderr:\n{self.stderr}"
                )
            self.lines.append(line)
            match = pattern.search(line)
            if match:
                return match

    def finish(self) -> int:
        """Waits for the script to end; reads the rest of its output; its exit status."""
        try:
            status = self.process.wait(timeout=DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"the script did not end within {DEADLINE_SECONDS} s:\n{self.stderr}")
        while True:
            line = self._lines.get(timeout=DEADLINE_SECONDS)
            if line is None:
                return status
            self.lines.append(line)

    def kill(self) -> None:
        """Ends the script if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def write_annotations(path: Path, annotations: Dict[str, str]) -> None:
    """Writes `path` as the downward API does: `key="value"` lines, replaced whole
    through a rename, so a reader never sees half a file."""
    text = "".join(f'{key}="{value}"\n' for key, value in sorted(annotations.items()))
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


@pytest.fixture
def start_training(tmp_path: Path):
    """Starts a script (`args` after the interpreter) with extra environment; every
    script still running at the end of the test is killed."""
    started: List[Training] = []

    def start(args: List[str], env: Optional[Dict[str, str]] = None) -> Training:
        training = Training(args, script_env(env), tmp_path)
        started.append(training)
        return training

    yield start
    for training in started:
        training.kill()
