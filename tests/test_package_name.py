"""A package generated under another name names itself in its help texts, not ``mcp_tasks``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schema" / "2025-11-25" / "schema.json"


def test_help_texts_name_the_generated_package(tmp_path: Path) -> None:
    gen = Path(sys.executable).parent / "mcptask-gen"
    subprocess.run(
        [str(gen), str(SCHEMA), "-o", str(tmp_path / "myapp_tasks"), "--with-runtime"],
        check=True,
        capture_output=True,
    )
    for module in ("myapp_tasks.cli", "myapp_tasks.examples.server"):
        out = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "python -m myapp_tasks.examples.server" in out, out
        assert "mcp_tasks" not in out, out
