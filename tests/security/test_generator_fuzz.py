"""Generator fuzzing: mutated schemas never give a traceback or
partial output. Each run either exits 2 with one clear line (``mcptask-gen: error:
...``) and writes nothing, or exits 0 with a package that imports; one sample of
the successful ones is checked with ``mypy --strict`` (slow, so only one).

The CLI runs in-process (``CliRunner(catch_exceptions=False)``): any uncaught
exception fails the test with its traceback, which is exactly the defect looked for.
"""

from __future__ import annotations

import copy
import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mcptask_gen.cli import main
from testkit.json_tree import drop_at, json_paths, set_at
from testkit.typecheck import TYPECHECK, mypy_strict

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schema" / "2025-11-25" / "schema.json"
BASE: dict[str, Any] = json.loads(SCHEMA.read_text())
TASK_DEFS = sorted(k for k in BASE["$defs"] if "Task" in k)
RENDERED = [
    "core.models",
    "core.methods",
    "core.capabilities",
    "core.meta",
    "core.handlers",
    "lifecycle",
    "errors",
    "store",
    "descriptor",
]
SUCCESSES: list[Path] = []
#: The tasks extension's schema (2026-07-28, io.modelcontextprotocol/tasks): its own face.
EXT_SCHEMA = REPO / "schema" / "ext-tasks-draft" / "schema.json"
EXT_BASE: dict[str, Any] = json.loads(EXT_SCHEMA.read_text())
EXT_TASK_DEFS = sorted(k for k in EXT_BASE["$defs"] if "Task" in k)
EXT_RENDERED = [
    "protocol",
    "lifecycle",
    "errors",
    "descriptor",
    "extension.models",
    "extension.methods",
    "extension.handlers",
]

#: the ``fuzz_counter`` fixture: counts the cases each fuzzer ran (tests/security/conftest.py)
FuzzCounter = Callable[[str, int], None]


def run_gen(schema: Path, out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(schema), "-o", str(out)], catch_exceptions=False)
    return result.exit_code, result.output


def import_generated(pkg: Path, modules: list[str] = RENDERED) -> None:
    """Import every rendered module of a generated package (in a subprocess: clean state)."""
    code = "import importlib, sys; [importlib.import_module(f'{sys.argv[1]}.{m}') for m in sys.argv[2:]]"
    proc = subprocess.run(
        [sys.executable, "-c", code, pkg.name, *modules],
        cwd=pkg.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def check_outcome(schema: Path, out: Path, modules: list[str] = RENDERED) -> int:
    code, output = run_gen(schema, out)
    lines = [line for line in output.splitlines() if line.strip()]
    if code == 2:
        assert len(lines) == 1, output[-2000:]
        assert lines[0].startswith("mcptask-gen: error: "), lines[0]
        assert "Traceback" not in output
        assert not out.exists(), f"partial output left in {out}: {list(out.rglob('*'))[:5]}"
    else:
        assert code == 0, (code, output[-2000:])
        assert lines[-1].startswith("wrote "), output
        import_generated(out, modules)
        SUCCESSES.append(out)
    return code


def _write(tmp: Path, name: str, doc: Any) -> Path:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def _refs(node: Any) -> list[dict[str, Any]]:
    out = []
    if isinstance(node, dict):
        if "$ref" in node:
            out.append(node)
        for v in node.values():
            out += _refs(v)
    elif isinstance(node, list):
        for v in node:
            out += _refs(v)
    return out


def _rename(doc: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    doc["$defs"][new] = doc["$defs"].pop(old)
    for ref in _refs(doc):
        if ref["$ref"] == f"#/$defs/{old}":
            ref["$ref"] = f"#/$defs/{new}"
    return doc


def _put(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], Any]:
    """A mutation that puts ``value`` at ``$defs`` -> ``path``."""

    def mutate(d: dict[str, Any]) -> Any:
        return set_at(d, ("$defs", *path), copy.deepcopy(value))

    return mutate


def _named(mutations: dict[str, Any]) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """The mutations a ``_mutations`` function defined, by name (its helpers start with _)."""
    return {name: fn for name, fn in mutations.items() if callable(fn) and not name.startswith("_")}


def _run_mutation(
    doc: Any, name: str, modules: list[str], tmp: Path, fuzz_counter: FuzzCounter
) -> None:
    """Generate from the mutated schema ``doc``: a clean package or a clean refusal, and
    nothing of the schema's text ever runs."""
    schema = _write(tmp, name, doc)
    check_outcome(schema, tmp / "out" / "pkg_fuzz", modules)
    fuzz_counter("generator", 1)
    assert not Path("/tmp/pwned").exists()


def _deep_nesting(d: dict[str, Any]) -> Any:
    """The schema's text with 100,000 nested arrays among its definitions."""
    text = json.dumps(d)
    return text.replace(
        '"$defs": {', '"$defs": {"Deep": ' + "[" * 100_000 + "]" * 100_000 + ", ", 1
    )


def _mutations() -> dict[str, Callable[[dict[str, Any]], Any]]:
    def drop_defs(d: dict[str, Any]) -> Any:
        del d["$defs"]
        return d

    def drop_task(d: dict[str, Any]) -> Any:
        del d["$defs"]["Task"]
        return d

    broken_ref = _put(("Task", "properties", "status"), {"$ref": "#/$defs/DoesNotExist"})
    external_ref = _put(("Task", "properties", "status"), {"$ref": "http://127.0.0.1:9/x.json#/a"})
    file_ref = _put(("TaskMetadata", "properties", "ttl"), {"$ref": "/etc/passwd#/x"})

    def ref_cycle(d: dict[str, Any]) -> Any:
        d["$defs"]["LoopA"] = {"$ref": "#/$defs/LoopB"}
        d["$defs"]["LoopB"] = {"$ref": "#/$defs/LoopA"}
        d["$defs"]["Task"]["properties"]["loop"] = {"$ref": "#/$defs/LoopA"}
        return d

    self_cycle = _put(("Task", "properties", "parent"), {"$ref": "#/$defs/Task"})

    def renamed_task(d: dict[str, Any]) -> Any:
        return _rename(d, "Task", "Job")

    def renamed_all(d: dict[str, Any]) -> Any:
        for name in TASK_DEFS:
            _rename(d, name, name.replace("Task", "Job"))
        return d

    properties_list = _put(("Task", "properties"), [])
    required_string = _put(("Task", "required"), "taskId")
    type_number = _put(("Task", "type"), 5)
    enum_wrong = _put(("TaskStatus", "enum"), [1, None, {"a": 1}])
    enum_empty = _put(("TaskStatus", "enum"), [])

    def defs_list(d: dict[str, Any]) -> Any:
        d["$defs"] = list(d["$defs"].values())
        return d

    def_not_object = _put(("TaskMetadata",), "ttl")

    def docstring_injection(d: dict[str, Any]) -> Any:
        evil = 'x""" + __import__("os").system("touch /tmp/pwned") + """\\\\ \'\'\' \u202e'
        d["$defs"]["Task"]["description"] = evil
        d["$defs"]["Task"]["properties"]["taskId"]["description"] = evil
        return d

    def keyword_properties(d: dict[str, Any]) -> Any:
        props = d["$defs"]["TaskMetadata"]["properties"]
        props["class"] = {"type": "string"}
        props["a-b c"] = {"type": "integer"}
        props["\u00e9t\u00e9"] = {"type": "boolean"}
        return d

    def unicode_def_names(d: dict[str, Any]) -> Any:
        d["$defs"]["T\u00e2che"] = {"type": "object", "properties": {"x": {"type": "string"}}}
        d["$defs"]["Task"]["properties"]["extra"] = {"$ref": "#/$defs/T\u00e2che"}
        return d

    deep_nesting = _deep_nesting

    def enormous(d: dict[str, Any]) -> Any:
        for i in range(3000):
            d["$defs"][f"Filler{i}"] = {"type": "object", "description": "x" * 2000}
        return d

    def too_large(d: dict[str, Any]) -> Any:
        return json.dumps(d) + " " * (65 * 1024 * 1024)

    return _named(locals())


MUTATIONS = _mutations()


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_schema(name: str, tmp_path: Path, fuzz_counter: FuzzCounter) -> None:
    _run_mutation(MUTATIONS[name](copy.deepcopy(BASE)), name, RENDERED, tmp_path, fuzz_counter)


def _mutate(draw: st.DrawFn, base: dict[str, Any], targets: list[str]) -> tuple[str, Any]:
    doc = copy.deepcopy(base)
    target = draw(st.sampled_from(targets))
    paths = [p for p in json_paths(doc["$defs"][target]) if p]
    ops = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["delete", "replace"]))
        try:
            if op == "delete":
                drop_at(doc["$defs"][target], path)
            else:
                value: Any = draw(
                    st.sampled_from([None, 0, -1, "x", [], {}, True, {"$ref": "#/$defs/Nope"}])
                )
                set_at(doc["$defs"][target], path, value)
        except (KeyError, IndexError, TypeError):
            continue
        ops.append(f"{op} {target}{list(path)}")
    return "; ".join(ops), doc


@st.composite
def random_mutation(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    return _mutate(draw, BASE, TASK_DEFS)


@st.composite
def random_ext_mutation(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """The tasks extension's schema (X-ID-1): its task definitions, mutated."""
    return _mutate(draw, EXT_BASE, EXT_TASK_DEFS)


def _run_random(
    strategy: Any,
    modules: list[str],
    examples: int,
    tmp_path_factory: pytest.TempPathFactory,
    fuzz_counter: FuzzCounter,
) -> None:
    outcomes: dict[int, int] = {}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(strategy)
    def run(case: tuple[str, dict[str, Any]]) -> None:
        tmp = tmp_path_factory.mktemp("genfuzz")
        schema = _write(tmp, "mutated", case[1])
        code = check_outcome(schema, tmp / "out" / "pkg_rand", modules)
        outcomes[code] = outcomes.get(code, 0) + 1
        fuzz_counter("generator", 1)

    run()
    assert outcomes


def test_random_schema_mutations(
    tmp_path_factory: pytest.TempPathFactory, fuzz_counter: FuzzCounter
) -> None:
    _run_random(random_mutation(), RENDERED, 8, tmp_path_factory, fuzz_counter)


@TYPECHECK
def test_a_successful_mutation_passes_mypy_strict(tmp_path: Path) -> None:
    """The sample: the docstring-injection schema (hostile text in every description)."""
    doc = MUTATIONS["docstring_injection"](copy.deepcopy(BASE))
    MUTATIONS["keyword_properties"](doc)
    out = tmp_path / "pkg_mypy"
    assert check_outcome(_write(tmp_path, "sample", doc), out) == 0
    proc = mypy_strict("-p", out.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    importlib.invalidate_caches()


def test_ref_alias_cycle_is_named_G1(tmp_path: Path) -> None:
    """G-1 regression: the error named an unrelated model; it now names the cycle."""
    doc = MUTATIONS["ref_cycle"](copy.deepcopy(BASE))
    code, output = run_gen(_write(tmp_path, "cycle", doc), tmp_path / "out" / "pkg_cycle")
    assert code == 2
    assert output.strip() == (
        "mcptask-gen: error: $ref cycle: LoopA -> LoopB -> LoopA "
        "(definitions that only refer to each other)"
    )


@pytest.mark.parametrize("name", ["required_string", "type_number"])
def test_wrong_types_message_has_no_urls_G2(name: str, tmp_path: Path) -> None:
    """G-2 regression: pydantic's 'For further information visit URL' noise is gone."""
    doc = MUTATIONS[name](copy.deepcopy(BASE))
    code, output = run_gen(_write(tmp_path, name, doc), tmp_path / "out" / "pkg_types")
    assert code == 2 and "#/$defs/Task" in output  # the definition is named
    assert "http" not in output and len(output.strip().splitlines()) == 1, output


def _ext_mutations() -> dict[str, Callable[[dict[str, Any]], Any]]:
    """Mutations of the extension's schema, aimed at what its reshape pre-pass and its
    selection by structure rely on (inlined copies, the status union, the envelope)."""

    def drop_task(d: dict[str, Any]) -> Any:
        del d["$defs"]["Task"]
        return d

    def drop_envelope(d: dict[str, Any]) -> Any:
        del d["$defs"]["JSONRPCRequest"]
        return d

    def broken_status_ref(d: dict[str, Any]) -> Any:
        d["$defs"]["Task"]["properties"]["status"] = {"$ref": "#/$defs/DoesNotExist"}
        return d

    def wrong_result_type(d: dict[str, Any]) -> Any:  # X-RT-1: the overlay's cross-check
        d["$defs"]["CreateTaskResult"]["allOf"][2]["properties"]["resultType"]["const"] = "job"
        return d

    def no_extension_id(d: dict[str, Any]) -> Any:  # X-ID-1: the overlay's cross-check
        d["description"] = "some other extension"
        return d

    def duplicate_status_const(d: dict[str, Any]) -> Any:
        d["$defs"]["FailedTask"]["properties"]["status"]["const"] = "completed"
        return d

    def variants_empty(d: dict[str, Any]) -> Any:
        d["$defs"]["DetailedTask"]["anyOf"] = []
        return d

    def status_union_not_list(d: dict[str, Any]) -> Any:
        d["$defs"]["GetTaskResult"]["allOf"][1] = {"anyOf": "working"}
        return d

    def params_not_object(d: dict[str, Any]) -> Any:
        d["$defs"]["GetTaskRequest"]["allOf"][1]["properties"]["params"] = 5
        return d

    def params_missing(d: dict[str, Any]) -> Any:  # a request with no params: NoParams
        del d["$defs"]["GetTaskRequest"]["allOf"][1]["properties"]["params"]
        return d

    def method_not_string(d: dict[str, Any]) -> Any:
        d["$defs"]["UpdateTaskRequest"]["allOf"][1]["properties"]["method"]["const"] = 7
        return d

    def drop_filter(d: dict[str, Any]) -> Any:  # X-NOTIF-2: the overlay names it
        del d["$defs"]["TaskSubscriptionNotifications"]
        return d

    def properties_list(d: dict[str, Any]) -> Any:
        d["$defs"]["WorkingTask"]["properties"] = []
        return d

    def defs_list(d: dict[str, Any]) -> Any:
        d["$defs"] = list(d["$defs"].values())
        return d

    def docstring_injection(d: dict[str, Any]) -> Any:
        evil = 'x""" + __import__("os").system("touch /tmp/pwned") + """\\\\ \'\'\' \u202e'
        d["$defs"]["WorkingTask"]["description"] = evil
        d["$defs"]["Task"]["properties"]["taskId"]["description"] = evil
        return d

    deep_nesting = _deep_nesting

    def renamed_all(d: dict[str, Any]) -> Any:
        for name in EXT_TASK_DEFS:
            _rename(d, name, name.replace("Task", "Job"))
        return d

    return _named(locals())


EXT_MUTATIONS = _ext_mutations()


@pytest.mark.parametrize("name", sorted(EXT_MUTATIONS))
def test_mutated_extension_schema(name: str, tmp_path: Path, fuzz_counter: FuzzCounter) -> None:
    doc = EXT_MUTATIONS[name](copy.deepcopy(EXT_BASE))
    _run_mutation(doc, name, EXT_RENDERED, tmp_path, fuzz_counter)


def test_random_extension_schema_mutations(
    tmp_path_factory: pytest.TempPathFactory, fuzz_counter: FuzzCounter
) -> None:
    _run_random(random_ext_mutation(), EXT_RENDERED, 6, tmp_path_factory, fuzz_counter)
