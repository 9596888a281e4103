"""The repository's own code is ruff-clean and the generator passes mypy --strict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit.typecheck import TYPECHECK, assert_mypy_strict, mypy_path_env

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_ruff_clean() -> None:
    result = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@TYPECHECK
def test_generator_mypy_strict(tmp_path: Path) -> None:
    # generator/ is the import package mcptask_gen (a setuptools package-dir mapping that mypy
    # cannot follow), so give mypy a path where the directory has its import name.
    (tmp_path / "mcptask_gen").symlink_to(REPO / "generator", target_is_directory=True)
    assert_mypy_strict(
        "--config-file",
        REPO / "pyproject.toml",
        "-p",
        "mcptask_gen",
        cwd=tmp_path,
        env=mypy_path_env(tmp_path),
    )
