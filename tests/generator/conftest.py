"""Fixtures of the generator tests; their helpers live in ``testkit.gen``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.gen import PINNED, SCHEMA, run_cli
from testkit.importing import import_package as import_from
from testkit.importing import unload


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Generator runs in tests use their own cache directory, never the user's."""
    os.environ["MCPTASK_GEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("mcptask-gen-cache"))


@pytest.fixture
def no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step runs for real (determinism tests must not be answered from the cache)."""
    monkeypatch.setenv("MCPTASK_GEN_NO_CACHE", "1")


@pytest.fixture(scope="session")
def schema_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(SCHEMA.read_text())
    return doc


@pytest.fixture(scope="session")
def generated_pkg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh generation of the pinned schemas with the runtime vendored in (as
    ``generated/``), shared by read-only tests."""
    out = tmp_path_factory.mktemp("gen") / "mcp_tasks_fresh"
    result = run_cli(*PINNED, "-o", out, "--with-runtime")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def bindings_pkg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh generation of the pinned schemas as a user gets it by default: the
    bindings, shared by read-only tests."""
    out = tmp_path_factory.mktemp("gen") / "userpkg"
    result = run_cli(*PINNED, "-o", out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def import_package() -> Iterator[Callable[[Path], Any]]:
    """Import a generated package (and every module of it) from its directory, under its
    directory's name (``testkit.importing``: no ``sys.path`` change); unload it afterwards."""
    import importlib

    loaded: list[str] = []

    def _import(pkg_dir: Path) -> Any:
        module = import_from(pkg_dir.parent, pkg_dir.name)
        loaded.append(pkg_dir.name)
        modules = ("models", "methods", "capabilities", "handlers", "lifecycle", "errors")
        faces = sorted(p.parent.name for p in pkg_dir.glob("*/__init__.py"))
        for sub in (*modules, "meta", "store", "protocol", "descriptor", *faces):
            if (pkg_dir / f"{sub}.py").is_file() or sub in faces:
                importlib.import_module(f"{pkg_dir.name}.{sub}")
        for face in faces:
            for path in sorted((pkg_dir / face).glob("*.py")):
                importlib.import_module(f"{pkg_dir.name}.{face}.{path.stem}")
        return module

    yield _import
    for name in loaded:
        unload(name)
