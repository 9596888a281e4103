"""User templates: --templates overrides built-ins file by file; a broken one is named with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.gen import SCHEMA, run_cli


def test_user_template_overrides_file_by_file(tmp_path: Path, import_package) -> None:  # type: ignore[no-untyped-def]
    templates = tmp_path / "tpl"
    templates.mkdir()
    (templates / "__init__.py.jinja").write_text(
        "{{ header }}\nPROTOCOL_REVISION = {{ ir.revision | pyrepr }}\nCUSTOM = 'mine'\n"
        "METHODS_SEEN = {{ ir.methods | map(attribute='method') | list | pyrepr }}\n"
    )
    (templates / "extra.py.jinja").write_text("{{ header }}\nEXTRA = {{ ir.statuses | length }}\n")
    out = tmp_path / "custompkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 0, result.output
    pkg = import_package(out)
    assert pkg.CUSTOM == "mine"
    assert "tasks/get" in pkg.METHODS_SEEN
    assert (out / "extra.py").read_text().rstrip().endswith("EXTRA = 5")
    # Everything else still comes from the built-in templates.
    assert "class TaskNotFound" in (out / "errors.py").read_text()


@pytest.mark.parametrize(
    ("name", "text", "needles"),
    [
        ("errors.py.jinja", "{{ header }}\n\n\n{% if %}\n", ("errors.py.jinja", "line 4")),
        (
            "lifecycle.py.jinja",
            "{{ header }}\nX = 1\n{{ ir.no_such_thing }}\n",
            ("lifecycle.py.jinja", "line 3", "no_such_thing"),
        ),
        ("meta.py.jinja", "{{ header }}\ndef broken(:\n", ("meta.py", "not valid Python")),
    ],
    ids=["syntax-error", "undefined-name", "invalid-python"],
)
def test_broken_template_is_named(
    tmp_path: Path, name: str, text: str, needles: tuple[str, ...]
) -> None:
    """A template error names the file (and line); nothing is written."""
    templates = tmp_path / "tpl"
    templates.mkdir()
    (templates / name).write_text(text)
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 2, result.output
    for needle in needles:
        assert needle in result.output, result.output
    assert not out.exists()


def test_missing_templates_dir(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", tmp_path / "nope")
    assert result.exit_code == 2
    assert not out.exists()
