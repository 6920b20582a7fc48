"""The log transport as a training process uses it: real processes, a real annotations
file written mid-run, a real SIGTERM, their stdout read line by line."""

from __future__ import annotations

import io
import logging
import os
import signal
from pathlib import Path

import pytest

import switchyard_train as sy
from conftest import ACK_LINE, REPORT_LINE, write_annotations

LOOP = str(Path(__file__).parent / "scripts" / "loop.py")


def reports_and_acknowledgements(lines):
    reports = [REPORT_LINE.match(line) for line in lines if line.startswith("switchyard: step=")]
    acks = [ACK_LINE.match(line) for line in lines if "checkpoint-complete" in line]
    assert all(reports), lines
    assert all(acks), lines
    return reports, acks


def test_an_annotation_written_mid_run_makes_the_loop_save_acknowledge_once_and_end(
    tmp_path, start_training
):
    annotations = tmp_path / "annotations"
    write_annotations(annotations, {"kubernetes.io/config.seen": "2026-01-01T00:00:00Z"})
    checkpoint = tmp_path / "ckpt"
    training = start_training(
        [LOOP, str(checkpoint)], {"SWITCHYARD_ANNOTATIONS_FILE": str(annotations)}
    )
    training.wait_for_line(REPORT_LINE)
    for _ in range(3):
        training.wait_for_line(REPORT_LINE)
    write_annotations(
        annotations,
        {
            "kubernetes.io/config.seen": "2026-01-01T00:00:00Z",
            "switchyard.dev/checkpoint-requested": "2026-01-01T00:01:00Z",
        },
    )
    assert training.finish() == 0, training.stderr
    reports, acks = reports_and_acknowledgements(training.lines)
    assert len(acks) == 1, training.lines
    assert training.lines[-1] == acks[0].group(0), "the acknowledgement is the last line"
    steps = [int(r.group(1)) for r in reports]
    assert steps == list(range(len(steps))), "one report per step, in order"
    assert [float(r.group(2)) for r in reports] == [1.0 / (s + 1) for s in steps]
    assert acks[0].group(1) == str(steps[-1]), "the step of the checkpoint is the last one"
    assert acks[0].group(2) == str(checkpoint)
    assert checkpoint.read_text() == f"{steps[-1]}\n"


def test_sigterm_asks_for_a_checkpoint_instead_of_ending_the_process_and_runs_the_previous_handler(
    tmp_path, start_training
):
    checkpoint = tmp_path / "ckpt"
    marker = tmp_path / "previous-handler-ran"
    training = start_training([LOOP, str(checkpoint), "--chain", str(marker)])
    for _ in range(3):
        training.wait_for_line(REPORT_LINE)
    training.process.send_signal(signal.SIGTERM)
    status = training.finish()
    assert status == 0, f"SIGTERM ended the process ({status}): {training.stderr}"
    _, acks = reports_and_acknowledgements(training.lines)
    assert len(acks) == 1
    assert acks[0].group(2) == str(checkpoint)
    assert checkpoint.exists()
    assert marker.read_text() == f"signal {int(signal.SIGTERM)}\n"


def test_a_missing_annotations_file_is_no_request_and_the_loop_runs_to_its_end(
    tmp_path, start_training
):
    training = start_training(
        [LOOP, str(tmp_path / "ckpt"), "--max-steps", "5", "--step-seconds", "0"],
        {"SWITCHYARD_ANNOTATIONS_FILE": str(tmp_path / "not-mounted")},
    )
    assert training.finish() == 0, training.stderr
    reports, acks = reports_and_acknowledgements(training.lines)
    assert len(reports) == 5 and acks == []
    assert training.stderr == ""


def session_on(stream, annotations=None):
    return sy.Session(sy.LogTransport(stream), annotations_file=annotations, handle_sigterm=False)


@pytest.mark.parametrize(
    "loss, printed",
    [(0.25, "0.25"), (1e-05, "1e-05"), (3, "3.0"), (12345678901234567.0, "1.2345678901234568e+16")],
)
def test_a_report_is_one_line_whose_loss_reads_back_as_the_same_float(loss, printed):
    out = io.StringIO()
    assert session_on(out).report(7, loss)
    assert out.getvalue() == f"switchyard: step=7 loss={printed}\n"
    assert float(REPORT_LINE.match(out.getvalue().rstrip("\n")).group(2)) == float(loss)


def test_a_report_that_cannot_be_sent_is_logged_once_per_kind_and_training_goes_on(caplog):
    out = io.StringIO()
    session = session_on(out)
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.report(1, float("nan"))
        assert not session.report(2, float("inf"))
        assert not session.report(-3, 1.0)
        assert not session.report("three", 1.0)
        assert not session.report(4, "lots")
    assert out.getvalue() == ""
    assert session.failures == {"not-finite": 2, "argument": 3}
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "loss nan at step 1" in messages[0]
    assert "step -3 is negative" in messages[1]


def test_a_closed_standard_output_loses_the_report_but_not_the_training(caplog):
    out = io.StringIO()
    out.close()
    session = session_on(out)
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.report(1, 0.5)
    assert session.failures == {"stdout": 1}
    assert "standard output" in caplog.records[0].getMessage()


def test_the_acknowledgement_line_carries_the_absolute_path_to_the_end_of_the_line(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    session = session_on(out)
    assert session.acknowledge("runs/epoch 3.ckpt", step=30) is None
    assert session.acknowledge("s3://bucket/run/ckpt") is None
    lines = out.getvalue().splitlines()
    assert lines == [
        f"switchyard: checkpoint-complete step=30 path={tmp_path / 'runs/epoch 3.ckpt'}",
        "switchyard: checkpoint-complete step=- path=s3://bucket/run/ckpt",
    ]
    assert ACK_LINE.match(lines[0]).group(2) == str(tmp_path / "runs/epoch 3.ckpt")


@pytest.mark.parametrize("path", ["", "ckpt\nswitchyard: step=1 loss=0.0", "a\rb"])
def test_an_acknowledgement_whose_path_would_break_the_line_is_refused(path):
    out = io.StringIO()
    with pytest.raises(ValueError):
        session_on(out).acknowledge(path)
    assert out.getvalue() == ""


def test_a_request_stays_until_acknowledged_and_a_new_request_asks_again(tmp_path):
    annotations = tmp_path / "annotations"
    session = session_on(io.StringIO(), str(annotations))
    assert not session.checkpoint_requested()
    write_annotations(annotations, {"switchyard.dev/checkpoint-requested": "t1"})
    assert session.checkpoint_requested()
    assert session.checkpoint_requested(), "asking again does not consume the request"
    session.acknowledge(tmp_path / "ckpt", 1)
    assert not session.checkpoint_requested(), "the acknowledged request is answered"
    write_annotations(annotations, {"switchyard.dev/checkpoint-requested": "t2"})
    assert session.checkpoint_requested(), "a later request asks again"


def test_an_annotation_that_only_mentions_the_key_is_no_request(tmp_path):
    annotations = tmp_path / "annotations"
    write_annotations(
        annotations,
        {
            "note": "switchyard.dev/checkpoint-requested=soon",
            "xswitchyard.dev/checkpoint-requested": "1",
        },
    )
    assert not session_on(io.StringIO(), str(annotations)).checkpoint_requested()


def test_an_annotations_path_that_is_a_directory_is_logged_once_and_asks_nothing(tmp_path, caplog):
    session = session_on(io.StringIO(), str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        assert not session.checkpoint_requested()
        assert not session.checkpoint_requested()
    assert session.failures == {"annotations-file": 2}
    assert len(caplog.records) == 1
    assert str(tmp_path) in caplog.records[0].getMessage()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a POSIX thing")
def test_an_annotations_path_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    session = session_on(io.StringIO(), str(fifo))
    assert not session.checkpoint_requested()
    assert session.failures == {"annotations-file": 1}


def test_without_switchyard_url_the_environment_chooses_the_log_transport():
    session = sy.Session.from_environment({"SWITCHYARD_JOB": "j"}, handle_sigterm=False)
    assert isinstance(session.transport, sy.LogTransport)


def test_a_session_made_off_the_main_thread_says_sigterm_still_ends_the_process(caplog):
    import threading

    made = []
    with caplog.at_level(logging.WARNING, logger="switchyard_train"):
        thread = threading.Thread(target=lambda: made.append(sy.Session(sy.LogTransport())))
        thread.start()
        thread.join()
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL and made[0]._sigterm:
        pytest.skip("another test of this process installed the handler already")
    assert "SIGTERM still ends this process" in caplog.text
