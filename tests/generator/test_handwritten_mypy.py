"""Every hand-written module of ``templates/`` passes ``mypy --strict`` where it lives, not
only through its copies in ``generated/``: a package of symlinks puts the generated modules
and the hand-written files of ``templates/`` (runtime, cli, examples, the ``_*.py`` bases)
at their package paths, and mypy checks it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testkit.gen import REPO

BIN = Path(sys.executable).parent
TEMPLATES = REPO / "templates"
GENERATED = REPO / "generated" / "mcp_tasks"


def hand_written() -> list[Path]:
    """The hand-written Python files of templates/ (relative), shipped verbatim."""
    return sorted(
        p.relative_to(TEMPLATES)
        for p in TEMPLATES.rglob("*.py")
        if "__pycache__" not in p.parts and p.relative_to(TEMPLATES) != Path("__init__.py")
    )


def test_hand_written_modules_pass_mypy_strict_in_place(tmp_path: Path) -> None:
    pkg = tmp_path / "mcp_tasks"
    ours = set(hand_written())
    assert Path("_errors.py") in ours and Path("runtime/engine.py") in ours
    for path in sorted(GENERATED.rglob("*")):
        rel = path.relative_to(GENERATED)
        if path.is_dir() or "__pycache__" in rel.parts or rel in ours:
            continue
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).symlink_to(path)
    for rel in ours:
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).symlink_to(TEMPLATES / rel)
    result = subprocess.run(
        [str(BIN / "mypy"), "--strict", "--no-incremental", "--cache-dir", os.devnull]
        + ["--python-version", "3.11", "-p", "mcp_tasks"],
        cwd=tmp_path,
        env=dict(os.environ, MYPYPATH=str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The files mypy named are the hand-written ones themselves (through the links).
    assert all((pkg / rel).resolve() == (TEMPLATES / rel).resolve() for rel in ours)
