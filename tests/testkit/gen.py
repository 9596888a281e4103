"""Helpers of the generator tests: the pinned schemas, running ``mcptask-gen`` in process,
and checking what it wrote.

The official schemas live in the repository's ``schema/`` (byte for byte, with their source
and licence); generated packages are imported with :mod:`testkit.importing` (never through
``sys.path``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from mcptask_gen.cli import main
from testkit.typecheck import assert_mypy_strict

REPO = Path(__file__).resolve().parents[2]
#: The official schemas, one folder each (``schema/<name>/schema.json``).
SCHEMAS = REPO / "schema"
SCHEMA = SCHEMAS / "2025-11-25" / "schema.json"
SCHEMA_0618 = SCHEMAS / "2025-06-18" / "schema.json"
SCHEMA_0728 = SCHEMAS / "2026-07-28" / "schema.json"
SCHEMA_ORIGINAL = SCHEMAS / "2025-11-25-original" / "schema.json"
#: The tasks extension io.modelcontextprotocol/tasks of 2026-07-28 (its own schema), pinned at
#: its stable release (``ext-tasks`` ``schema/2026-07-28``).
SCHEMA_EXT = SCHEMAS / "ext-tasks-2026-07-28" / "schema.json"
#: Its draft (``ext-tasks`` ``schema/draft``): the release but for its ``$id``; still generated.
SCHEMA_EXT_DRAFT = SCHEMAS / "ext-tasks-draft" / "schema.json"
#: The schemas ``generated/mcp_tasks`` is generated from: one face each.
PINNED = (SCHEMA, SCHEMA_EXT)
#: The virtualenv's scripts (``mcptask-gen``, ``mypy``, ``ruff``).
VENV_BIN = Path(sys.executable).parent


def run_cli(*args: str | Path) -> Result:
    """``mcptask-gen ARGS...`` in this process."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def write_schema(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative POSIX path -> bytes)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def copy_pkg(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def with_prompts_get_augmentable(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of the 2025-11-25 schema where ``prompts/get`` is task-augmentable too."""
    doc = json.loads(json.dumps(doc))
    defs = doc["$defs"]
    defs["GetPromptRequestParams"]["properties"]["task"] = {
        "$ref": "#/$defs/TaskMetadata",
        "description": "task-augmented prompts/get",
    }
    requests = defs["ServerCapabilities"]["properties"]["tasks"]["properties"]["requests"][
        "properties"
    ]
    requests["prompts"] = {
        "type": "object",
        "properties": {"get": {"type": "object", "additionalProperties": True, "properties": {}}},
    }
    return doc


def assert_mypy_and_ruff_clean(pkg: Path) -> None:
    """The package directory ``pkg`` passes ``mypy --strict`` (on the suite's cache: mark the
    test ``testkit.typecheck.TYPECHECK``) and the repository's ruff."""
    assert_mypy_strict(pkg.name, cwd=pkg.parent)
    assert_ruff_clean(pkg)


def assert_ruff_clean(pkg: Path) -> None:
    """The package directory ``pkg`` passes the repository's ruff."""
    ruff = subprocess.run(
        [
            str(VENV_BIN / "ruff"),
            "check",
            "--no-cache",
            "--config",
            str(REPO / "pyproject.toml"),
            str(pkg),
        ],
        capture_output=True,
        text=True,
    )
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr
