"""Two wheels from one repository: the generator's (``mcptask-gen``: its templates, its rules
overlays and the official schemas it generates from by revision) and the runtime's
(``mcptask-runtime``, from ``generated/``: the package ``mcp_tasks`` and the ``mcptask``
command), neither carrying a compiled file, nor the other's package. ``.ci/release`` builds
them (and their sdists) from a clean clone and installs them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testkit.gen import REPO


def _wheel(project: Path, out: Path) -> set[str]:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(project)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    return set(zipfile.ZipFile(wheel).namelist())


def _no_compiled(names: set[str]) -> None:
    compiled = sorted(n for n in names if n.endswith((".pyc", ".pyo")) or "__pycache__" in n)
    assert not compiled, compiled


def test_the_generators_wheel_ships_templates_rules_and_schemas(tmp_path: Path) -> None:
    names = _wheel(REPO, tmp_path)
    templates = REPO / "templates"
    for path in templates.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert f"mcptask_gen/templates/{path.relative_to(templates).as_posix()}" in names, path
    schema = REPO / "schema"
    for path in [*schema.glob("*.toml"), *schema.glob("*/*")]:
        assert f"mcptask_gen/rules/{path.relative_to(schema).as_posix()}" in names, path
    assert "mcptask_gen/cli.py" in names and "mcptask_gen/pinned.py" in names
    assert not any(n.startswith("mcp_tasks/") for n in names), "the runtime is its own wheel"
    _no_compiled(names)


def test_the_runtimes_wheel_ships_the_generated_package(tmp_path: Path) -> None:
    names = _wheel(REPO / "generated", tmp_path)
    package = REPO / "generated" / "mcp_tasks"
    for path in package.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and not path.name.startswith("."):
            assert path.relative_to(package.parent).as_posix() in names, path
    assert not any(n.startswith("mcptask_gen/") for n in names), "the generator is its own"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert entry_points.startswith("mcptask_runtime-")
    _no_compiled(names)


@pytest.mark.parametrize("project", ["generator", "runtime"])
def test_one_version_for_both(project: str) -> None:
    """Both distributions carry the generator's version: the runtime's is the version of the
    mcptask-gen that wrote its package (its descriptor)."""
    from importlib import metadata

    import mcptask_gen
    from mcp_tasks import descriptor

    name = {"generator": "mcptask-gen", "runtime": "mcptask-runtime"}[project]
    assert metadata.version(name) == mcptask_gen.__version__ == descriptor.GENERATOR_VERSION
