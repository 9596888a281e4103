"""User templates: --templates overrides built-ins file by file; a broken one is named with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.gen import PINNED, SCHEMA, copy_pkg, run_cli, tree


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


SUBCLASS = (
    "a hand-written module copied verbatim: change behaviour by subclassing (the generated "
    "handlers' TasksHandlerBase, CoreTasks/ExtensionTasks, TaskStore), not by replacing the module"
)


def _templates(tmp_path: Path, *names: str) -> Path:
    templates = tmp_path / "tpl"
    for name in names:
        (templates / name).parent.mkdir(parents=True, exist_ok=True)
        (templates / name).write_text("# mine\n")
    return templates


def _one_error_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("mcptask-gen: error: "), output
    return lines[0]


def test_replacing_a_hand_written_module_is_refused(tmp_path: Path) -> None:
    templates = _templates(tmp_path, "runtime/engine/task_engine.py")
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 2
    assert _one_error_line(result.output) == (
        f"mcptask-gen: error: --templates {templates} replaces runtime/engine/task_engine.py, {SUBCLASS}"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("names", "needles"),
    [
        (("_handlers.py",), ("replaces _handlers.py, a hand-written module",)),
        (("store.py",), ("replaces store.py, a hand-written module",)),
        # a template that would render over it replaces it just the same
        (
            ("runtime/engine/task_engine.py.jinja",),
            ("replaces runtime/engine/task_engine.py (with runtime/engine/task_engine.py.jinja)",),
        ),
        (
            ("runtime/stores/redis/scripts/get.lua",),
            ("replaces runtime/stores/redis/scripts/get.lua, a hand-written file copied verbatim",),
        ),
        (("store.py", "_errors.py"), ("replaces _errors.py (and 1 more)",)),
    ],
    ids=["handlers", "store", "by-a-template", "lua-script", "two"],
)
def test_no_copied_file_may_be_replaced(
    tmp_path: Path, generated_pkg: Path, names: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    """Nothing is written, not even into an output that exists (nor under --check)."""
    out = copy_pkg(generated_pkg, tmp_path / "mcp_tasks")
    before = tree(out)
    templates = _templates(tmp_path, *names)
    for extra in ((), ("--check",)):
        result = run_cli(*PINNED, "-o", out, "--templates", templates, *extra)
        assert result.exit_code == 2
        line = _one_error_line(result.output)
        for needle in (*needles, "change behaviour by subclassing"):
            assert needle in line, line
    assert tree(out) == before


def test_a_file_that_a_template_makes_is_overridden_by_that_template_only(tmp_path: Path) -> None:
    """errors.py beside the built-in errors.py.jinja would lose in silence: refused."""
    templates = _templates(tmp_path, "errors.py")
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert "has errors.py, which makes errors.py as the built-in errors.py.jinja does" in line
    assert not out.exists()


def test_new_files_may_still_be_added(tmp_path: Path) -> None:
    templates = _templates(tmp_path, "contrib/notes.txt", "contrib/__init__.py")
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--templates", templates)
    assert result.exit_code == 0, result.output
    assert (out / "contrib" / "notes.txt").read_text() == "# mine\n"
    assert (out / "_handlers.py").is_file()  # the built-in, untouched
