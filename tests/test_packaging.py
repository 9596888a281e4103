"""The install the README gives is typed: mypy resolves both packages from outside the repo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USER_CODE = """\
from mcptask_gen.pipeline import build
from mcp_tasks.protocol import REVISION
from mcp_tasks.runtime.mcp_server import McpTasks

reveal_type(build)
reveal_type(McpTasks)
revision: str = REVISION
"""


def test_mypy_resolves_both_packages_outside_the_repo(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(USER_CODE)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".c"), "user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "mcptask_gen.ir.IR" in out.stdout and "mcp_tasks.runtime.mcp_server.McpTasks" in out.stdout
