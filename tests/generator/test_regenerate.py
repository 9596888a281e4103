"""Regenerating says what changed, by model and method, and changes only what changed.

The change a reviewer of a generated-code pull request meets: the tasks extension's schema
gains an optional ``resultSummary`` on a completed task. Regenerating prints the models and
the field before anything else; ``--check`` prints the same summary, and the diff only with
``--diff``; only the files whose bytes change are written (the others keep their inode and
time), and no file changes in its header alone (the schema's identity is the descriptor's).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcptask_gen.summary import Changes, read_methods, read_models, summarize
from testkit.gen import SCHEMA, SCHEMA_EXT, run_cli
from testkit.next_revision import FIELD, revised


def _stats(root: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The package of both official schemas, then regenerated from their revision with
    ``resultSummary``: the command's output, and every file's inode and time before and
    after."""
    tmp = tmp_path_factory.mktemp("regen")
    out = tmp / "acme_tasks"
    first = run_cli(SCHEMA, SCHEMA_EXT, "-o", out)
    assert first.exit_code == 0, first.output
    before = {rel: (out / rel).read_text() for rel in _stats(out)}
    stats = _stats(out)
    schemas = (revised(tmp, SCHEMA), revised(tmp, SCHEMA_EXT))
    check = run_cli(*schemas, "-o", out, "--check")
    check_diff = run_cli(*schemas, "-o", out, "--check", "--diff")
    again = run_cli(*schemas, "-o", out)
    assert again.exit_code == 0, again.output
    return {
        "out": out,
        "first": first,
        "check": check,
        "check_diff": check_diff,
        "again": again,
        "before": before,
        "stats": (stats, _stats(out)),
        "schemas": schemas,
    }


CHANGED = {"descriptor.py", "core/models.py", "extension/models.py"}


def test_regenerating_names_the_models_and_the_field(regenerated: dict[str, Any]) -> None:
    lines = regenerated["again"].stdout.splitlines()
    assert f"extension/models.py: CompletedTask: + {FIELD}: str | None" in lines
    assert f"extension/models.py: GetTaskResultCompleted: + {FIELD}: str | None" in lines
    assert f"core/models.py: Task: + {FIELD}: str | None" in lines
    assert lines[-2] == ("files: 3 changed (core/models.py, descriptor.py, extension/models.py)"), (
        lines
    )
    total = len(regenerated["stats"][0])
    assert lines[-1] == f"wrote 3 of {total} files to {regenerated['out']} ({total - 3} unchanged)"
    assert not any("methods" in line for line in lines), "no method came or went"


def test_only_the_files_whose_content_changed_are_written(regenerated: dict[str, Any]) -> None:
    before, after = regenerated["stats"]
    assert set(before) == set(after)
    touched = {rel for rel in before if before[rel] != after[rel]}
    out: Path = regenerated["out"]
    changed = {
        rel for rel, text in regenerated["before"].items() if (out / rel).read_text() != text
    }
    assert changed == CHANGED
    assert touched == CHANGED, "a file whose bytes stay keeps its inode and time"


def test_no_file_changes_in_its_header_alone(regenerated: dict[str, Any]) -> None:
    """Every changed file changes in its body, and no header changed (the schema's sha256 is
    the descriptor's alone)."""
    out: Path = regenerated["out"]
    for rel in CHANGED:
        old, new = regenerated["before"][rel].splitlines(), (out / rel).read_text().splitlines()
        assert old[:4] == new[:4], rel
        assert old[4:] != new[4:], rel


def test_check_prints_the_summary_before_any_diff(regenerated: dict[str, Any]) -> None:
    check, with_diff = regenerated["check"], regenerated["check_diff"]
    assert check.exit_code == 1 and with_diff.exit_code == 1
    summary = check.stdout.splitlines()
    assert f"extension/models.py: CompletedTask: + {FIELD}: str | None" in summary
    assert not any(line.startswith(("---", "+++", "@@")) for line in summary), "no diff"
    assert "the schema of revision 2026-07-28 changed" in check.stderr
    assert "--diff shows the diff" in check.stderr
    assert with_diff.stdout.startswith(check.stdout), "the summary first, then the diff"
    diff = with_diff.stdout[len(check.stdout) :]
    assert diff.startswith("--- a/") and f"+    {FIELD}:" in diff


def test_regenerating_again_changes_nothing(regenerated: dict[str, Any]) -> None:
    out: Path = regenerated["out"]
    stats = _stats(out)
    result = run_cli(*regenerated["schemas"], "-o", out)
    assert result.exit_code == 0
    total = len(stats)
    assert result.stdout.splitlines() == [
        "no file changes",
        f"wrote 0 of {total} files to {out} ({total} unchanged)",
    ]
    assert _stats(out) == stats
    assert run_cli(*regenerated["schemas"], "-o", out, "--check").exit_code == 0


def test_the_first_generation_prints_no_summary(regenerated: dict[str, Any]) -> None:
    out: Path = regenerated["out"]
    assert regenerated["first"].stdout.splitlines() == [
        f"wrote {len(regenerated['stats'][0])} files to {out}"
    ]


# -- the summary, line by line --------------------------------------------------------------

#: the imports of both generations of the models module
MODELS_HEADER = """
from enum import StrEnum
from typing import Annotated, Literal
from pydantic import BaseModel, Field
from typing_extensions import TypeAliasType

"""
OLD_MODELS = (
    MODELS_HEADER
    + """
class Status(StrEnum):
    working = "working"
    done = "done"


class Task(BaseModel):
    model_config = ConfigDict(extra="allow")
    taskId: str
    ttl: Annotated[int, Field(description="old")]
    note: str | None = None


class Gone(BaseModel):
    x: int


Union_ = TypeAliasType("Union_", Task | Gone)
"""
)
NEW_MODELS = (
    MODELS_HEADER
    + """
class Status(StrEnum):
    working = "working"
    paused = "paused"


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")
    taskId: str
    ttl: Annotated[int | None, Field(description="new")]
    note: str | None = "-"
    size: int


class Fresh(BaseModel):
    y: int


Union_ = TypeAliasType("Union_", Task | Fresh)
"""
)
OLD_METHODS = 'METHODS: Final = MappingProxyType({"tasks/get": 1, "tasks/result": 2})\n'
NEW_METHODS = 'METHODS: Final = MappingProxyType({"tasks/get": 1, "tasks/update": 3})\n'


def test_the_summary_says_fields_types_enum_values_aliases_and_methods() -> None:
    assert set(read_models(NEW_MODELS)) == {"Status", "Task", "Fresh", "Union_"}
    assert read_methods(NEW_METHODS) == {"tasks/get", "tasks/update"}
    found = Changes(
        changed=["face/methods.py", "face/models.py"],
        new=["face/extra.py"],
        gone=["old.py"],
        old={"face/models.py": OLD_MODELS, "face/methods.py": OLD_METHODS, "old.py": ""},
    )
    files = {"face/models.py": NEW_MODELS, "face/methods.py": NEW_METHODS, "face/extra.py": ""}
    assert summarize(found, files) == [
        "face/models.py: + Fresh",
        "face/models.py: - Gone",
        "face/models.py: Status: + value paused: 'paused'; - value done",
        "face/models.py: Task: + size: int; ~ note: its default, alias or description;"
        " ~ ttl: int -> int | None",
        "face/models.py: Union_: ~ Task | Gone -> Task | Fresh",
        "face/methods: + tasks/update",
        "face/methods: - tasks/result (gone)",
        "files: 2 changed (face/methods.py, face/models.py), 1 new (face/extra.py),"
        " 1 gone (old.py)",
    ]


def test_a_summary_of_models_that_do_not_parse_is_said_without_them() -> None:
    found = Changes(changed=["f/models.py"], new=[], gone=[], old={"f/models.py": "class ("})
    assert summarize(found, {"f/models.py": "class A(BaseModel):\n    x: int\n"}) == [
        "f/models.py: + A",
        "files: 1 changed (f/models.py)",
    ]


def test_an_edited_package_is_said_as_files(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    assert run_cli(SCHEMA, "-o", out).exit_code == 0
    (out / "lifecycle.py").write_text("# mine\n")
    result = run_cli(SCHEMA, "-o", out)
    assert result.stdout.splitlines()[0] == "files: 1 changed (lifecycle.py)"
    assert os.path.getsize(out / "lifecycle.py") > len("# mine\n")
