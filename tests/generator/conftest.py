from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mcptask_gen.cli import main

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
SCHEMA = SHARED / "mcp-schema" / "2025-11-25" / "schema.json"
SCHEMA_0618 = SHARED / "mcp-schema" / "2025-06-18" / "schema.json"
SCHEMA_0728 = SHARED / "mcp-schema" / "2026-07-28" / "schema.json"
SCHEMA_ORIGINAL = SHARED / "mcp-schema" / "2025-11-25-original" / "schema.json"
#: The tasks extension io.modelcontextprotocol/tasks of 2026-07-28 (its own schema), pinned at
#: its stable release (``ext-tasks`` ``schema/2026-07-28``).
SCHEMA_EXT = SHARED / "mcp-schema" / "ext-tasks-2026-07-28" / "schema.json"
#: Its draft (``ext-tasks`` ``schema/draft``): the release but for its ``$id``; still generated.
SCHEMA_EXT_DRAFT = SHARED / "mcp-schema" / "ext-tasks-draft" / "schema.json"
#: The schemas ``generated/mcp_tasks`` is generated from: one face each.
PINNED = (SCHEMA, SCHEMA_EXT)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Generator runs in tests use their own cache directory, never the user's."""
    os.environ["MCPTASK_GEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("mcptask-gen-cache"))


@pytest.fixture
def no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step runs for real (determinism tests must not be answered from the cache)."""
    monkeypatch.setenv("MCPTASK_GEN_NO_CACHE", "1")


def run_cli(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="session")
def schema_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(SCHEMA.read_text())
    return doc


@pytest.fixture(scope="session")
def generated_pkg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh generation of the pinned schemas, shared by read-only tests."""
    out = tmp_path_factory.mktemp("gen") / "mcp_tasks_fresh"
    result = run_cli(*PINNED, "-o", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def import_package() -> Iterator[Callable[[Path], Any]]:
    """Import a generated package from its directory under a unique name; unload afterwards."""
    loaded: list[str] = []

    def _import(pkg_dir: Path) -> Any:
        import importlib

        sys.path.insert(0, str(pkg_dir.parent))
        try:
            module = importlib.import_module(pkg_dir.name)
            modules = ("models", "methods", "capabilities", "handlers", "lifecycle", "errors")
            faces = sorted(p.parent.name for p in pkg_dir.glob("*/__init__.py"))
            for sub in (*modules, "meta", "store", "protocol", *faces):
                if (pkg_dir / f"{sub}.py").is_file() or sub in faces:
                    importlib.import_module(f"{pkg_dir.name}.{sub}")
            for face in faces:
                for path in sorted((pkg_dir / face).glob("*.py")):
                    importlib.import_module(f"{pkg_dir.name}.{face}.{path.stem}")
        finally:
            sys.path.remove(str(pkg_dir.parent))
        loaded.append(pkg_dir.name)
        return module

    yield _import
    for name in loaded:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]


def write_schema(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def copy_pkg(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
