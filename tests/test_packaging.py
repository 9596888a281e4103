"""The install the README gives is typed: mypy resolves both packages from outside the repo."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from testkit.typecheck import TYPECHECK, assert_mypy_strict, mypy_strict

USER_CODE = """\
from mcptask_gen.pipeline import build
from mcp_tasks.protocol import REVISION
from mcp_tasks.runtime.serve.server import McpTasks

reveal_type(build)
reveal_type(McpTasks)
revision: str = REVISION
"""


@TYPECHECK
def test_mypy_resolves_both_packages_outside_the_repo(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(USER_CODE)
    out = assert_mypy_strict("user.py", cwd=tmp_path)
    assert (
        "mcptask_gen.ir.IR" in out.stdout
        and "mcp_tasks.runtime.serve.server.McpTasks" in out.stdout
    )


#: what a user's environment lacks when they did not install pytest
_TEST_ONLY = ("pytest", "_pytest", "pytest_timeout", "py.py", "_hypothesis_pytestplugin.py")


@TYPECHECK
def test_the_generated_package_type_checks_without_pytest(tmp_path: Path) -> None:
    """A user's ``mypy --strict`` of the package, in an environment with its dependencies
    but without pytest (only the store-conformance suite runs on it): a Python whose
    site-packages holds this one's packages, pytest left out, and a copy of the package."""
    import mcp_tasks

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    ours = Path(next(p for p in sys.path if p.endswith("site-packages")))
    (theirs,) = (env / "lib").glob("python*/site-packages")
    for entry in ours.iterdir():
        if not entry.name.startswith(_TEST_ONLY) and not entry.name.endswith(".pth"):
            (theirs / entry.name).symlink_to(entry)
    python = env / "bin" / "python"
    assert subprocess.run([python, "-c", "import pytest"], capture_output=True).returncode == 1
    work = tmp_path / "work"
    shutil.copytree(Path(mcp_tasks.__file__).parent, work / "mcp_tasks")
    # a cache of its own: that Python's site-packages are other paths
    out = mypy_strict(
        "--python-executable", python, "-p", "mcp_tasks", cwd=work, cache_dir=tmp_path / ".c"
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_license_is_the_one_pyproject_names() -> None:
    import tomllib

    repo = Path(__file__).resolve().parents[1]
    assert tomllib.loads((repo / "pyproject.toml").read_text())["project"]["license"] == (
        "Apache-2.0"
    )
    text = (repo / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
