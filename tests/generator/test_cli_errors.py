"""Bad input exits 2 with one line naming the problem, no traceback, nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testkit.gen import SCHEMA, SCHEMA_0618, SCHEMA_0728, run_cli, write_schema


def _assert_clean_failure(result, out: Path, *needles: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("mcptask-gen: error: ")
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not out.exists(), "nothing may be written on error"
    assert not list(out.parent.glob(f".{out.name}.staging-*")), "staging left behind"


def test_missing_file(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(tmp_path / "nope.json", "-o", out), out, "not found", "nope.json")


def test_schema_is_directory(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(tmp_path, "-o", out), out, "directory")


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text("{}")

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied")

    # root reads everything, so simulate the denied read.
    monkeypatch.setattr(Path, "read_bytes", deny)
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(schema, "-o", out), out, "not readable", "permission denied")


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text('{\n  "$defs": {\n    "A": {,}\n  }\n}\n')
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(schema, "-o", out), out, "invalid JSON", "line 3 column 11")


def test_not_utf8(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_bytes(b'{"a": "\xff"}')
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(schema, "-o", out), out, "not UTF-8")


@pytest.mark.parametrize(
    "doc, needle",
    [
        ([1, 2, 3], "JSON list, not an object"),
        ({"hello": "world"}, "neither '$schema' nor '$defs'"),
        ({"$schema": "x", "$defs": []}, "no '$defs'"),
        ({"$schema": "x", "$defs": {"A": 3}}, "definition 'A'"),
    ],
)
def test_not_a_json_schema(tmp_path: Path, doc: object, needle: str) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(doc))
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(schema, "-o", out, "--revision", "2025-11-25"), out, needle)


@pytest.mark.parametrize(
    ("schema", "needles"),
    [
        (SCHEMA_0618, ("tasks arrived in protocol revision 2025-11-25",)),
        # the core 2026-07-28 schema: tasks moved to the extension, which has its own schema
        (
            SCHEMA_0728,
            (
                "io.modelcontextprotocol/tasks",
                "extension",
                "ext-tasks schema/2026-07-28/schema.json",  # its release, not its draft
                "--revision 2026-07-28-tasks",
            ),
        ),
    ],
    ids=["2025-06-18", "2026-07-28"],
)
def test_revision_without_tasks_says_where_they_are(
    tmp_path: Path, schema: Path, needles: tuple[str, ...]
) -> None:
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(schema, "-o", out), out, "no task definitions", *needles)


def test_schema_without_tasks_unknown_revision(tmp_path: Path) -> None:
    schema = write_schema(tmp_path / "s.json", {"$schema": "x", "$defs": {"A": {"type": "object"}}})
    out = tmp_path / "pkg"
    _assert_clean_failure(
        run_cli(schema, "-o", out, "--revision", "2025-11-25"), out, "no task definitions"
    )


def test_unknown_revision_flag(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    _assert_clean_failure(
        run_cli(SCHEMA, "-o", out, "--revision", "1999-01-01"),
        out,
        "no rules overlay",
        "1999-01-01",
    )


def test_cannot_infer_revision(tmp_path: Path, schema_doc: dict) -> None:  # type: ignore[type-arg]
    doc = json.loads(json.dumps(schema_doc).replace("/specification/2025-11-25/", "/spec/"))
    doc["$defs"].pop("CreateTaskResult")
    doc["$defs"]["Other"] = {"type": "object"}
    schema = write_schema(tmp_path / "s.json", doc)
    out = tmp_path / "pkg"
    _assert_clean_failure(
        run_cli(schema, "-o", out), out, "cannot infer the protocol revision", "--revision"
    )


def test_broken_ref(tmp_path: Path, schema_doc: dict) -> None:  # type: ignore[type-arg]
    doc = json.loads(json.dumps(schema_doc))
    doc["$defs"]["Task"]["properties"]["status"] = {"$ref": "#/$defs/NoSuchStatus"}
    schema = write_schema(tmp_path / "s.json", doc)
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(schema, "-o", out), out, "NoSuchStatus")


@pytest.mark.parametrize(
    ("definition", "keyword", "value", "needle"),
    [
        # found by tests/security/test_generator_fuzz.py: a traceback before this check
        ("RelatedTaskMetadata", "properties", True, "/RelatedTaskMetadata/properties must be"),
        ("RelatedTaskMetadata", "required", "taskId", "/RelatedTaskMetadata/required must be"),
        ("TaskMetadata", "properties", {"ttl": 5}, "/TaskMetadata/properties/ttl must be"),
    ],
)
def test_wrongly_typed_keyword_is_named(
    tmp_path: Path,
    schema_doc: dict[str, Any],
    definition: str,
    keyword: str,
    value: object,
    needle: str,
) -> None:
    doc = json.loads(json.dumps(schema_doc))
    doc["$defs"][definition][keyword] = value
    schema = write_schema(tmp_path / "s.json", doc)
    out = tmp_path / "pkg"
    _assert_clean_failure(run_cli(schema, "-o", out), out, needle)


def test_output_is_a_file(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    out.write_text("I am a file")
    result = run_cli(SCHEMA, "-o", out)
    assert result.exit_code == 2
    assert "output path exists and is not a directory" in result.output
    assert out.read_text() == "I am a file"


def test_bad_package_name_says_what_is_valid(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--package-name", "not-valid")
    # The flag was given: the message names it and says what a valid name looks like.
    _assert_clean_failure(result, out, "--package-name 'not-valid' is not valid", "identifiers")
    assert "pass --package-name" not in result.output


def test_dotted_package_name_is_accepted(tmp_path: Path) -> None:
    out = tmp_path / "tasks_gen"
    result = run_cli(SCHEMA, "-o", out, "--package-name", "myapp.tasks_gen")
    assert result.exit_code == 0, result.output


def test_bad_output_directory_name_asks_for_package_name(tmp_path: Path) -> None:
    out = tmp_path / "my-pkg"
    _assert_clean_failure(run_cli(SCHEMA, "-o", out), out, "'my-pkg'", "pass --package-name")


def test_revision_without_tasks_given_as_flag(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--revision", "2025-06-18")
    # It was passed: say why that revision cannot be generated, not "pass --revision".
    _assert_clean_failure(result, out, "--revision '2025-06-18'", "tasks arrived", "2025-11-25")
    assert "pass --revision" not in result.output


def test_foreign_file_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    out.mkdir()
    (out / "errors.py").write_text("# mine\n")
    result = run_cli(SCHEMA, "-o", out)
    assert result.exit_code == 2
    assert "refusing to overwrite" in result.output and "errors.py" in result.output
    assert (out / "errors.py").read_text() == "# mine\n"
    assert sorted(p.name for p in out.iterdir()) == ["errors.py"]


def test_version_and_help() -> None:
    from mcptask_gen import __version__

    result = run_cli("--version")
    assert result.exit_code == 0 and __version__ in result.output
    result = run_cli("--help")
    assert result.exit_code == 0
    for flag in ("--output", "--package-name", "--revision", "--templates", "--check", "--version"):
        assert flag in result.output


def test_missing_output_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(SCHEMA)
    assert result.exit_code == 2 and "missing -o/--output" in result.output
