"""The templates and the rules overlay ship inside the wheel (pip install mcptask-gen works)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from testkit.gen import REPO


def test_wheel_ships_templates_and_rules(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("mcptask_gen-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = REPO / "templates"
    for path in templates.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert f"mcptask_gen/templates/{path.relative_to(templates).as_posix()}" in names, path
    for path in (REPO / "schema").glob("*.toml"):
        assert f"mcptask_gen/rules/{path.name}" in names
    assert "mcptask_gen/cli.py" in names
    # the generated package ships with both faces (a package list entry each)
    generated = REPO / "generated"
    for path in (generated / "mcp_tasks").rglob("*.py"):
        if "__pycache__" not in path.parts:
            assert path.relative_to(generated).as_posix() in names, path
    assert any(n.endswith("entry_points.txt") for n in names)
