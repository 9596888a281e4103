"""The next revision, the day it ships: a revision mcptask-gen does not know is generated when
its task definitions have a known shape, found by structure whatever the revision is called.

The schemas are simulated (``testkit.next_revision``): the core 2026-07-28 schema with the
extension's definitions folded in, named (or not) as revision 2027-03-31. That the installed
runtime serves such a package: ``tests/runtime/test_new_revision_served.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcptask_gen.errors import GeneratorError
from mcptask_gen.load import BY_FLAG, BY_ID, BY_LINKS, BY_MARKERS, known_revisions, rules_dir
from testkit.gen import (
    REPO,
    SCHEMA,
    SCHEMA_0618,
    SCHEMA_0728,
    SCHEMA_EXT,
    assert_mypy_and_ruff_clean,
    run_cli,
    tree,
    write_schema,
)
from testkit.importing import import_package, unload
from testkit.next_revision import NEXT, folded, write_core_next, write_folded
from testkit.typecheck import TYPECHECK

EXT_FIXTURES = REPO / "tests" / "fixtures" / "spec_examples_ext"
EXT_INDEX = json.loads((EXT_FIXTURES / "index.json").read_text())
#: how the simulated schema names itself -> how its revision is found
EXT_MODULES = ("models", "methods", "handlers", "protocol")
NAMINGS = {"id-and-link": BY_ID, "id": BY_ID, "link": BY_LINKS, "bare": BY_MARKERS}


def _analyse(schema: Path, revision: str | None = None, **kw: Any) -> tuple[Any, list[str]]:
    from mcptask_gen.pipeline import analyse

    said: list[str] = []
    ir, _ = analyse(schema, revision, "pkg", warn=said.append, **kw)
    return ir, said


def _stderr_lines(result: Any) -> list[str]:
    return [ln for ln in result.stderr.splitlines() if ln.strip()]


# -- found by shape ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "shapes"),
    [
        (SCHEMA, ("core",)),
        (SCHEMA_EXT, ("extension",)),
        (SCHEMA_0618, ()),
        (SCHEMA_0728, ()),
    ],
    ids=["2025-11-25", "ext-tasks-2026-07-28", "2025-06-18", "2026-07-28"],
)
def test_each_published_schema_has_the_shape_it_has(schema: Path, shapes: tuple[str]) -> None:
    from mcptask_gen.detect import find_tasks
    from mcptask_gen.load import load

    assert find_tasks(load(schema, None)).shapes == shapes


@pytest.mark.parametrize("naming", list(NAMINGS))
def test_the_folded_schema_has_the_extension_s_shape(tmp_path: Path, naming: str) -> None:
    """X-RT-1, X-TASK-1 (a flat create result with a resultType const), X-UPD-1
    (tasks/update), X-NOTIF-1 (notifications/tasks): found by structure, whatever the schema
    calls itself."""
    from mcptask_gen.detect import find_tasks
    from mcptask_gen.load import load

    found = find_tasks(load(write_folded(tmp_path, naming), None))
    assert found.shapes == ("extension",)
    assert found.methods == ("notifications/tasks", "tasks/cancel", "tasks/get", "tasks/update")


@pytest.mark.parametrize("naming", list(NAMINGS))
def test_the_folded_schema_is_named_as_it_names_itself(tmp_path: Path, naming: str) -> None:
    """Its dated ``$id`` first, then its documentation links; with neither, its markers say
    2026-07-28 and the one warning asks for ``--revision``."""
    ir, said = _analyse(write_folded(tmp_path, naming))
    from mcptask_gen.load import load

    assert load(write_folded(tmp_path, naming), None).named_by == NAMINGS[naming]
    assert (ir.face, ir.kind) == ("extension", "extension")
    assert ir.revision == ("2026-07-28" if naming == "bare" else NEXT)
    assert len(said) == 1 and "\n" not in said[0]
    assert ("pass --revision to name it" in said[0]) == (naming == "bare")


def test_an_unnamed_schema_is_named_by_the_revision_flag(tmp_path: Path) -> None:
    ir, said = _analyse(write_folded(tmp_path, "bare"), NEXT)
    assert ir.revision == NEXT and ir.face == "extension"
    assert len(said) == 1 and f"named by {BY_FLAG}" in said[0]
    assert "pass --revision" not in said[0]


def test_the_warning_names_what_the_overlay_supplied_and_what_it_cannot_know(
    tmp_path: Path,
) -> None:
    (said,) = _analyse(write_folded(tmp_path))[1]
    assert f"is revision {NEXT} (named by its $id)" in said
    assert "notifications/tasks, tasks/cancel, tasks/get, tasks/update" in said
    assert "the shape of the 2026-07-28 tasks extension" in said
    assert "rules overlay 2026-07-28-tasks supplied the state machine" in said  # X-STATE-1
    assert "error codes and messages" in said and "_meta keys" in said
    assert f"check them against the {NEXT} specification" in said
    assert "--rules FILE" in said
    # what no overlay can know: how the new revision negotiates tasks (X-CAP-1, X-CAP-2)
    assert f"not known: how {NEXT} negotiates tasks" in said
    assert "io.modelcontextprotocol/clientCapabilities" in said


def test_a_core_shaped_schema_of_an_unknown_revision_takes_the_2025_11_25_rules(
    tmp_path: Path,
) -> None:
    """The 2025-11-25 shape under a new name: the newest core overlay, R-STATE-2 and all."""
    ir, said = _analyse(write_core_next(tmp_path))
    assert (ir.revision, ir.face, ir.kind) == (NEXT, "core", "core")
    assert set(ir.terminal) == {"completed", "failed", "cancelled"}  # R-STATE-3
    assert len(said) == 1 and "the 2025-11-25 core protocol's tasks" in said[0]
    assert "tasks/result" in said[0]


# -- the package ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def next_pkg(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """The package of the folded schema named 2027-03-31, and the command's result."""
    root = tmp_path_factory.mktemp("next")
    schema = write_folded(root)
    out = root / "next_tasks"
    result = run_cli(schema, "-o", out)
    assert result.exit_code == 0, result.output
    return out, result


def test_it_generates_with_one_warning_line(next_pkg: tuple[Path, Any]) -> None:
    out, result = next_pkg
    lines = _stderr_lines(result)
    assert len(lines) == 1 and lines[0].startswith("mcptask-gen: warning: "), lines
    assert result.stdout.splitlines() == [f"wrote {len(tree(out))} files to {out}"]


def test_the_face_is_named_after_the_new_revision(next_pkg: tuple[Path, Any]) -> None:
    out, _ = next_pkg
    files = tree(out)
    assert "extension/models.py" in files and "protocol.py" in files
    descriptor = files["descriptor.py"].decode()
    assert f'revision="{NEXT}",' in descriptor
    assert 'extension="io.modelcontextprotocol/tasks",' in descriptor
    assert f'"{NEXT}": "extension"' in files["protocol.py"].decode()  # FACES
    assert f'REVISION: Final = "{NEXT}"' in files["extension/protocol.py"].decode()


def test_it_is_generated_like_the_extension_s_own_schema(next_pkg: tuple[Path, Any]) -> None:
    """The same wire, the same models: the core's own roots (ClientRequest, JSONRPCMessage),
    which nothing refers to, are not taken for the extension's definitions."""
    out, _ = next_pkg
    code = (out / "extension" / "models.py").read_text()
    assert "class ClientRequest" not in code and "JSONRPCMessage" not in code
    assert "class TaskSubscriptionAcknowledgedNotifications(BaseModel)" in code  # X-NOTIF-3


@pytest.fixture(scope="module")
def next_modules(next_pkg: tuple[Path, Any]) -> Iterator[Any]:
    out, _ = next_pkg
    import importlib

    pkg = import_package(out.parent, out.name)
    try:
        for sub in ("protocol", "errors", *(f"extension.{m}" for m in EXT_MODULES)):
            importlib.import_module(f"{out.name}.{sub}")
        yield pkg
    finally:
        unload(out.name)


def test_the_package_imports(next_modules: Any) -> None:
    assert next_modules.protocol.FACES == {NEXT: "extension"}
    assert next_modules.extension.protocol.EXTENSION_ID == "io.modelcontextprotocol/tasks"


def _same(model: Any, original: Any) -> None:
    wire = model.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert wire == original


@pytest.mark.parametrize("entry", EXT_INDEX, ids=[e["file"] for e in EXT_INDEX])
def test_its_models_round_trip_the_extension_s_examples(
    entry: dict[str, Any], next_modules: Any
) -> None:
    """Every valid message example of the extension's digest (§23) parses into the new
    revision's models and serialises back to the same JSON (X-RT-1, X-GET-1..3, X-NOTIF-3,
    X-CAP-8, X-GET-8, X-TTL-5)."""
    data = json.loads((EXT_FIXTURES / entry["file"]).read_text())
    ext, kind, method = next_modules.extension, entry["kind"], entry["method"]
    if kind == "request":
        parsed = ext.methods.parse_request(data)
        assert type(parsed).__name__ == entry["model"]
        _same(parsed, data)
    elif kind == "notification":
        parsed = ext.methods.parse_notifications_tasks(data)
        _same(parsed, data)
        variant = ext.methods.VARIANTS["TaskStatusNotificationParams"][data["params"]["status"]]
        assert type(parsed.params) is variant
    elif kind == "response" and method == "tools/call":
        _same(ext.methods.parse_create_task_result(data["result"]), data["result"])
    elif kind == "response":
        parsed = ext.methods.RESULTS[method](data["result"])
        if "status" in data["result"]:
            assert type(parsed) is ext.methods.VARIANTS[entry["model"]][data["result"]["status"]]
        _same(parsed, data["result"])
    elif kind == "error":
        error = getattr(next_modules.errors, entry["model"])()
        assert error.to_error() == data["error"]
    else:  # pragma: no cover - a new fixture kind must be handled above
        pytest.fail(f"unhandled example kind {kind}")


@TYPECHECK
def test_the_package_passes_mypy_strict_and_ruff(next_pkg: tuple[Path, Any]) -> None:
    assert_mypy_and_ruff_clean(next_pkg[0])


def test_beside_2025_11_25_it_is_the_extension_face_the_runtime_serves(tmp_path: Path) -> None:
    """With the core face and the runtime vendored, its extension face is the new revision's."""
    out = tmp_path / "both_tasks"
    result = run_cli(SCHEMA, write_folded(tmp_path), "-o", out, "--with-runtime")
    assert result.exit_code == 0, result.output
    protocol = (out / "protocol.py").read_text()
    assert f'"2025-11-25": "core",\n        "{NEXT}": "extension",' in protocol
    assert (out / "runtime" / "faces" / "extension.py").is_file()
    assert len(_stderr_lines(result)) == 1


def test_the_unnamed_schema_generates_too(tmp_path: Path) -> None:
    out = tmp_path / "bare_tasks"
    result = run_cli(write_folded(tmp_path, "bare"), "-o", out, "--revision", NEXT)
    assert result.exit_code == 0, result.output
    assert f'"{NEXT}": "extension"' in (out / "protocol.py").read_text()
    assert len(_stderr_lines(result)) == 1


# -- the user's rules overlay -----------------------------------------------------------------

EXT_RULES = rules_dir().joinpath("2026-07-28-tasks.toml").read_text(encoding="utf-8")


def user_rules(tmp: Path, text: str | None = None, revision: str = NEXT) -> Path:
    path = tmp / "rules" / f"{revision}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = EXT_RULES if text is None else text
    path.write_text(text.replace('revision = "2026-07-28"', f'revision = "{revision}"', 1))
    return path


def test_a_user_overlay_names_an_unnamed_revision_and_no_warning_is_said(tmp_path: Path) -> None:
    from mcptask_gen.choose import read_rules

    rules = read_rules(user_rules(tmp_path))
    ir, said = _analyse(write_folded(tmp_path, "bare"), rules=rules)
    assert (ir.revision, ir.face) == (NEXT, "extension") and said == []
    assert rules.used


def test_a_user_overlay_generates_the_package(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    result = run_cli(write_folded(tmp_path), "-o", out, "--rules", user_rules(tmp_path))
    assert result.exit_code == 0, result.output
    assert _stderr_lines(result) == []
    assert f'"{NEXT}": "extension"' in (out / "protocol.py").read_text()


def test_a_user_overlay_of_a_known_revision_s_schema_is_not_used_and_says_so(
    tmp_path: Path,
) -> None:
    out = tmp_path / "ext_tasks"
    result = run_cli(SCHEMA_EXT, "-o", out, "--rules", user_rules(tmp_path))
    assert result.exit_code == 0, result.output
    (line,) = _stderr_lines(result)
    assert "was not used" in line and "2026-07-28" in line


def _assert_refused(result: Any, out: Path, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("mcptask-gen: error: "), lines
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not out.exists(), "nothing may be written on error"


BAD_RULES = [
    ("[lifecycle]", "[lifecycle", "invalid TOML"),
    ('initial = "working"', "initial = 3", "[lifecycle].initial must be a string"),
    ('kind = "extension"', 'kind = "plugin"', "kind 'plugin'"),
    ('face = "extension"', 'face = "my-face"', "face must be a Python identifier"),
    ("[extension]\n", "[extension]\nsurprise = 1\n", "unknown key 'surprise'"),
    # a status the schema's TaskStatus lacks (X-STATE-1)
    ("working = [", "paused = []\nworking = [", "statuses the schema's TaskStatus lacks"),
]


@pytest.mark.parametrize(("old", "new", "needle"), BAD_RULES)
def test_a_bad_user_overlay_is_one_line_and_writes_nothing(
    tmp_path: Path, old: str, new: str, needle: str
) -> None:
    assert old in EXT_RULES
    rules = user_rules(tmp_path, EXT_RULES.replace(old, new, 1))
    out = tmp_path / "pkg"
    result = run_cli(write_folded(tmp_path), "-o", out, "--rules", rules)
    _assert_refused(result, out, needle)


def test_a_missing_user_overlay_is_named(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    missing = tmp_path / "nope.toml"
    result = run_cli(write_folded(tmp_path), "-o", out, "--rules", missing)
    _assert_refused(result, out, f"--rules {missing}", "not found")


def test_a_user_overlay_of_another_revision_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    rules = user_rules(tmp_path, revision="2027-09-30")
    result = run_cli(write_folded(tmp_path), "-o", out, "--rules", rules)
    _assert_refused(result, out, "is for revision '2027-09-30'", f"is revision '{NEXT}'")


def test_a_user_overlay_of_the_other_shape_is_refused(tmp_path: Path) -> None:
    core_rules = rules_dir().joinpath("2025-11-25.toml").read_text(encoding="utf-8")
    text = core_rules.replace('revision = "2025-11-25"', f'revision = "{NEXT}"', 1)
    out = tmp_path / "pkg"
    result = run_cli(write_folded(tmp_path), "-o", out, "--rules", user_rules(tmp_path, text))
    _assert_refused(result, out, "its kind is 'core'", "extension shape")


# -- refusals that stay -----------------------------------------------------------------------


@pytest.mark.parametrize("schema", [SCHEMA_0618, SCHEMA_0728], ids=["2025-06-18", "2026-07-28"])
def test_schemas_with_really_no_tasks_are_refused_as_before(tmp_path: Path, schema: Path) -> None:
    """The refusal is the revision's own line of revisions.toml, word for word; a user overlay
    does not change it (there is nothing to generate)."""
    revision = schema.parent.name
    (why,) = [r["no_tasks"] for r in known_revisions() if r["id"] == revision and "no_tasks" in r]
    out = tmp_path / "pkg"
    for extra in ((), ("--rules", user_rules(tmp_path))):
        result = run_cli(schema, "-o", out, *extra)
        assert result.exit_code == 2
        assert result.output == f"mcptask-gen: error: {schema}: {why}\n"
        assert not out.exists()


def test_an_unknown_revision_flag_for_a_schema_named_otherwise_is_refused(tmp_path: Path) -> None:
    """A typo in --revision is not taken for a new revision of a schema that names itself."""
    out = tmp_path / "pkg"
    result = run_cli(SCHEMA, "-o", out, "--revision", "2025-11-52")
    _assert_refused(result, out, "no rules overlay", "names itself revision 2025-11-25")


def test_a_schema_with_task_methods_in_no_known_shape_is_not_said_to_have_none(
    tmp_path: Path,
) -> None:
    doc = folded()
    doc["$defs"].pop("CreateTaskResult")  # the flat create result (X-RT-1) is the shape's
    schema = write_schema(tmp_path / "odd" / "schema.json", doc)
    with pytest.raises(GeneratorError) as info:
        _analyse(schema)
    assert "holds task methods" in str(info.value) and "no task definitions" not in str(info.value)


def test_the_user_overlay_may_live_in_pyproject(tmp_path: Path) -> None:
    """``rules`` in ``[tool.mcptask-gen]``, relative to the pyproject.toml: a build that
    regenerates the day a revision ships keeps it there."""
    user_rules(tmp_path)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f'[tool.mcptask-gen]\nrules = "rules/{NEXT}.toml"\n')
    out = tmp_path / "pkg"
    result = run_cli(write_folded(tmp_path, "bare"), "-o", out, "--config", pyproject)
    assert result.exit_code == 0, result.output
    assert _stderr_lines(result) == []
    assert f'"{NEXT}": "extension"' in (out / "protocol.py").read_text()


def test_help_documents_the_overlay_option_and_its_format() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--rules FILE" in text and "[lifecycle]" in text and "[[errors]]" in text
    assert "docs/generator.md, 'Rules overlays'" in text
    doc = (REPO / "docs" / "generator.md").read_text()
    assert "## Rules overlays" in doc and "`--rules FILE`" in doc


def test_a_known_revision_without_tasks_given_for_a_schema_with_them_says_it_has_them(
    tmp_path: Path,
) -> None:
    out = tmp_path / "pkg"
    result = run_cli(write_folded(tmp_path, "bare"), "-o", out, "--revision", "2026-07-28")
    _assert_refused(result, out, "--revision '2026-07-28'", "yet", "holds task definitions")


def test_a_schema_of_both_shapes_asks_for_the_overlay_to_use(tmp_path: Path) -> None:
    doc = json.loads(
        SCHEMA.read_text().replace("/specification/2025-11-25/", f"/specification/{NEXT}/")
    )
    ext = json.loads(SCHEMA_EXT.read_text())["$defs"]
    doc["$defs"]["UpdateTaskRequest"] = ext["UpdateTaskRequest"]  # X-UPD-1
    doc["$defs"]["FlatCreateTaskResult"] = ext["CreateTaskResult"]  # X-RT-1
    schema = write_schema(tmp_path / "both" / "schema.json", doc)
    with pytest.raises(GeneratorError) as info:
        _analyse(schema)
    assert "both known shapes" in str(info.value) and "--rules FILE" in str(info.value)
