"""The WIT and the bindings the SDK carries are those of the repository's contract:
componentize-py builds a policy against the copy in the package, so a copy that
drifted from `wit/policy.wit` would build components the host describes differently."""

import filecmp
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "switchyard_policy"
REPOSITORY_WIT = Path(__file__).resolve().parents[3] / "wit" / "policy.wit"
WORLD = "switchyard:policy/incremental-policy@0.3.0"


def test_the_shipped_wit_is_the_repositorys_contract():
    assert (PACKAGE / "wit" / "policy.wit").read_text() == REPOSITORY_WIT.read_text(), (
        "sdk/python/src/switchyard_policy/wit/policy.wit differs from wit/policy.wit: "
        "copy it and regenerate the bindings (sdk/python/README.md)"
    )


def componentize_py():
    return os.environ.get("COMPONENTIZE_PY") or shutil.which("componentize-py")


@pytest.mark.skipif(
    componentize_py() is None and not os.environ.get("SWITCHYARD_REQUIRE_COMPONENTIZE_PY"),
    reason="componentize-py is not installed",
)
def test_the_committed_bindings_are_what_componentize_py_generates(tmp_path):
    tool = componentize_py()
    assert tool, "componentize-py is required here but was not found (set COMPONENTIZE_PY)"
    subprocess.run(
        [tool, "-d", str(REPOSITORY_WIT.parent), "-w", WORLD, "--world-module", "switchyard_policy.wit", "bindings", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    generated = tmp_path / "switchyard_policy" / "wit"
    for path in sorted(generated.rglob("*.py")):
        relative = path.relative_to(generated)
        shipped = PACKAGE / "wit" / relative
        assert shipped.exists() and filecmp.cmp(path, shipped, shallow=False), (
            f"switchyard_policy/wit/{relative} is not what componentize-py generates now; "
            "regenerate the bindings (sdk/python/README.md)"
        )
    assert filecmp.cmp(tmp_path / "componentize_py_types.py", PACKAGE / "_native_types.py", shallow=False)
