"""Every hand-written module of ``templates/`` passes ``mypy --strict`` where it lives, not
only through its copies in ``generated/``: a package of symlinks puts the generated modules
and the hand-written files of ``templates/`` (runtime, cli, examples, the ``_*.py`` bases)
at their package paths, and mypy checks it.

This is also the suite's one type-check of the generated package: ``generated/mcp_tasks`` is
these modules (the hand-written ones with a header comment added), and a fresh generation is
byte-identical to it (``test_output.py``)."""

from __future__ import annotations

from pathlib import Path

from testkit.gen import REPO
from testkit.typecheck import TYPECHECK, assert_mypy_strict, mypy_path_env

TEMPLATES = REPO / "templates"
GENERATED = REPO / "generated" / "mcp_tasks"


def hand_written() -> dict[Path, Path]:
    """The hand-written Python files of templates/, shipped verbatim: the path each makes in a
    package -> the template (the bindings' and the vendored runtime's)."""
    from mcptask_gen.render import builtin_files

    return {Path(rel): p for rel, p in builtin_files(True).items() if rel.endswith(".py")}


@TYPECHECK
def test_hand_written_modules_pass_mypy_strict_in_place(tmp_path: Path) -> None:
    pkg = tmp_path / "mcp_tasks"
    files = hand_written()
    ours = set(files)
    assert Path("_errors.py") in ours and Path("runtime/engine/task_engine.py") in ours
    for path in sorted(GENERATED.rglob("*")):
        rel = path.relative_to(GENERATED)
        if path.is_dir() or "__pycache__" in rel.parts or rel in ours:
            continue
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).symlink_to(path)
    for rel in ours:
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).symlink_to(files[rel])
    assert_mypy_strict(
        "--python-version", "3.11", "-p", "mcp_tasks", cwd=tmp_path, env=mypy_path_env(tmp_path)
    )
    # The files mypy named are the hand-written ones themselves (through the links).
    assert all((pkg / rel).resolve() == files[rel].resolve() for rel in ours)
