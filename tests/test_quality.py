"""The repository's own code is ruff-clean and the generator passes mypy --strict."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_ruff_clean() -> None:
    result = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_generator_mypy_strict(tmp_path: Path) -> None:
    # generator/ is the import package mcptask_gen (a setuptools package-dir mapping that mypy
    # cannot follow), so give mypy a path where the directory has its import name.
    (tmp_path / "mcptask_gen").symlink_to(REPO / "generator", target_is_directory=True)
    result = subprocess.run(
        [
            str(BIN / "mypy"),
            "--strict",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            "--config-file",
            str(REPO / "pyproject.toml"),
            "-p",
            "mcptask_gen",
        ],
        cwd=tmp_path,
        env=dict(os.environ, MYPYPATH=str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
