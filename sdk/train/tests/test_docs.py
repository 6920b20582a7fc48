"""docs/training-jobs.md shows the example scripts the framework tests run, whole and
unchanged, and the package's public names are documented."""

from __future__ import annotations

import inspect
import re

import pytest

import switchyard_train as sy
from conftest import EXAMPLES, REPO

DOC = REPO / "docs" / "training-jobs.md"


@pytest.mark.parametrize(
    "script", ["pytorch_loop.py", "lightning_train.py", "huggingface_train.py", "keras_train.py"]
)
def test_the_guide_shows_each_tested_example_script_whole(script):
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^`sdk/train/examples/([\w.]+)`:\n\n```python\n(.*?)^```$", text,
                        flags=re.MULTILINE | re.DOTALL)
    shown = dict(blocks)
    assert script in shown, f"{DOC.name} does not show {script}"
    assert shown[script] == (EXAMPLES / script).read_text(encoding="utf-8"), (
        f"{DOC.name} shows another {script} than the one the tests run"
    )


def test_every_public_name_says_what_it_is_for():
    for name in sy.__all__:
        value = getattr(sy, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"switchyard_train.{name} has no docstring"


def test_the_core_imports_no_framework():
    import subprocess
    import sys

    code = ("import sys, switchyard_train; "
            "frameworks = ('torch', 'lightning', 'transformers', 'keras'); "
            "print(sorted(m for m in frameworks if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(EXAMPLES.parent / "src")})
    assert out.stdout.strip() == "[]"
