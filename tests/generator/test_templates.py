"""User templates: --templates overrides built-ins file by file; a broken one is named with its line."""

from __future__ import annotations

from pathlib import Path

from .conftest import SCHEMA, run_cli


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


def test_broken_template_names_file_and_line(tmp_path: Path) -> None:
    templates = tmp_path / "tpl"
    templates.mkdir()
    (templates / "errors.py.jinja").write_text("{{ header }}\n\n\n{% if %}\n")
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 2
    assert "errors.py.jinja" in result.output and "line 4" in result.output
    assert not out.exists()


def test_undefined_variable_in_template_names_file_and_line(tmp_path: Path) -> None:
    templates = tmp_path / "tpl"
    templates.mkdir()
    (templates / "lifecycle.py.jinja").write_text("{{ header }}\nX = 1\n{{ ir.no_such_thing }}\n")
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 2, result.output
    assert (
        "lifecycle.py.jinja" in result.output
        and "line 3" in result.output
        and "no_such_thing" in result.output
    )
    assert not out.exists()


def test_template_rendering_invalid_python(tmp_path: Path) -> None:
    templates = tmp_path / "tpl"
    templates.mkdir()
    (templates / "meta.py.jinja").write_text("{{ header }}\ndef broken(:\n")
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 2
    assert "meta.py" in result.output and "not valid Python" in result.output
    assert not out.exists()


def test_missing_templates_dir(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", tmp_path / "nope")
    assert result.exit_code == 2
    assert not out.exists()
