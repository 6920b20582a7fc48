"""The example scripts of docs/training-jobs.md, run for real with their frameworks (CPU,
tiny models) under the log transport: the test writes the annotations file mid-run,
and the script must save, acknowledge once per rank and stop; started again, it must
resume from what it saved.

A framework that is not installed skips its tests, unless
SWITCHYARD_REQUIRE_TRAINING_FRAMEWORKS is set (as in CI), where it fails them.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import ACK_LINE, EXAMPLES, REPORT_LINE, write_annotations


def require(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    message = f"not installed: {', '.join(missing)} (.ci/run installs them)"
    if os.environ.get("SWITCHYARD_REQUIRE_TRAINING_FRAMEWORKS"):
        pytest.fail(message)
    pytest.skip(message)


def run_until_asked(start_training, tmp_path: Path, args: List[str], env: Dict[str, str] = None,
                    reports_before_asking: int = 5, launcher: List[str] = ()):
    """Runs an example (under `launcher`'s interpreter arguments, e.g. torchrun's), asks
    for a checkpoint after some reports, and returns its report and acknowledgement
    lines once it has ended by itself."""
    annotations = tmp_path / "annotations"
    write_annotations(annotations, {"kubernetes.io/config.seen": "2026-01-01T00:00:00Z"})
    env = dict(env or {}, SWITCHYARD_ANNOTATIONS_FILE=str(annotations))
    training = start_training([*launcher, str(EXAMPLES / args[0]), *args[1:]], env)
    for _ in range(reports_before_asking):
        training.wait_for_line(REPORT_LINE)
    write_annotations(annotations, {"switchyard.dev/checkpoint-requested": "2026-01-01T00:01:00Z"})
    status = training.finish()
    assert status == 0, f"exit status {status}:\n{training.stderr[-4000:]}"
    reports = [m for m in map(REPORT_LINE.match, training.lines) if m]
    acks = [m for m in map(ACK_LINE.match, training.lines) if m]
    return reports, acks


def first_report(start_training, args: List[str], env: Dict[str, str] = None) -> int:
    training = start_training([str(EXAMPLES / args[0]), *args[1:]], env or {})
    step = int(training.wait_for_line(REPORT_LINE).group(1))
    training.kill()
    return step


def assert_saved_once_per_rank_and_stopped(reports, acks, ranks: int, max_steps: int):
    assert len(acks) == ranks, [a.group(0) for a in acks]
    assert len({a.group(0) for a in acks}) == 1, "every rank acknowledges the same checkpoint"
    step = int(acks[0].group(1))
    assert 0 < step < max_steps, "training stopped at the request, not at its end"
    assert reports and int(reports[-1].group(1)) <= step
    path = Path(acks[0].group(2))
    assert path.exists(), f"{path} was acknowledged but is not there"
    return step, path


def test_the_plain_pytorch_loop_saves_acknowledges_stops_and_resumes(tmp_path, start_training):
    require("torch")
    checkpoint = tmp_path / "model.pt"
    reports, acks = run_until_asked(
        start_training, tmp_path, ["pytorch_loop.py", "--checkpoint", str(checkpoint)]
    )
    step, path = assert_saved_once_per_rank_and_stopped(reports, acks, 1, 100_000)
    assert path == checkpoint and not Path(str(checkpoint) + ".partial").exists()
    assert [int(r.group(1)) for r in reports] == list(range(1, step + 1))
    resumed = first_report(start_training, ["pytorch_loop.py", "--checkpoint", str(checkpoint)])
    assert resumed == step + 1


def test_the_lightning_callback_saves_acknowledges_on_both_ddp_ranks_stops_and_resumes(
    tmp_path, start_training
):
    require("torch", "lightning")
    directory = tmp_path / "ckpt"
    args = ["lightning_train.py", "--checkpoint-dir", str(directory)]
    reports, acks = run_until_asked(start_training, tmp_path, [*args, "--devices", "2"])
    step, path = assert_saved_once_per_rank_and_stopped(reports, acks, 2, 100_000)
    assert path == directory / f"switchyard-step{step}.ckpt"
    steps = [int(r.group(1)) for r in reports]
    assert steps == sorted(set(steps)), "one series, from rank 0 only"
    assert first_report(start_training, args) == step + 1


def test_the_lightning_callback_saves_on_sigterm_too(tmp_path, start_training):
    require("torch", "lightning")
    directory = tmp_path / "ckpt"
    training = start_training(
        [str(EXAMPLES / "lightning_train.py"), "--checkpoint-dir", str(directory)]
    )
    for _ in range(5):
        training.wait_for_line(REPORT_LINE)
    training.process.terminate()
    training.finish()
    acks = [m for m in map(ACK_LINE.match, training.lines) if m]
    assert len(acks) == 1, training.stderr[-4000:]
    assert Path(acks[0].group(2)).exists()


def test_the_hugging_face_callback_saves_the_checkpoint_acknowledges_on_both_ranks_and_stops(
    tmp_path, start_training
):
    require("torch", "transformers", "accelerate")
    output = tmp_path / "out"
    args = ["huggingface_train.py", "--output-dir", str(output)]
    torchrun = ["-m", "torch.distributed.run", "--nproc-per-node", "2"]
    reports, acks = run_until_asked(
        start_training, tmp_path, args, {"HF_HUB_OFFLINE": "1"}, launcher=torchrun
    )
    step, path = assert_saved_once_per_rank_and_stopped(reports, acks, 2, 100_000)
    steps = [int(r.group(1)) for r in reports]
    assert steps == sorted(set(steps)), "one series, from the main process only"
    assert path == output / f"checkpoint-{step}"
    assert (path / "trainer_state.json").exists() and (path / "optimizer.pt").exists()
    assert first_report(start_training, args) == step + 1


def test_the_keras_callback_saves_the_model_acknowledges_stops_and_resumes(
    tmp_path, start_training
):
    require("keras", "torch")
    directory = tmp_path / "ckpt"
    env = {"KERAS_BACKEND": "torch"}
    args = ["keras_train.py", "--checkpoint-dir", str(directory)]
    reports, acks = run_until_asked(start_training, tmp_path, args, env)
    step, path = assert_saved_once_per_rank_and_stopped(reports, acks, 1, 10**9)
    assert path == directory / f"switchyard-step{step}.keras"
    steps = [int(r.group(1)) for r in reports]
    assert steps == list(range(1, step + 1)), "no report lost in Keras's progress bar"
    assert first_report(start_training, args, env) == step + 1
