"""One package, one face subpackage per schema: 2025-11-25 (tasks in the core protocol) and
the 2026-07-28 tasks extension ``io.modelcontextprotocol/tasks`` (its own schema)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from testkit.gen import (
    PINNED,
    SCHEMA,
    SCHEMA_EXT,
    SCHEMA_EXT_DRAFT,
    assert_mypy_and_ruff_clean,
    run_cli,
    tree,
)
from testkit.typecheck import TYPECHECK


@pytest.mark.parametrize("schema", [SCHEMA_EXT, SCHEMA_EXT_DRAFT], ids=["release", "draft"])
def test_the_extension_release_and_draft_are_recognised_by_their_bytes(schema: Path) -> None:
    """X-ID-4: both files of ext-tasks (schema/2026-07-28 and schema/draft) are the extension
    of revision 2026-07-28, by their sha256 alone (no marker definitions to go by)."""
    import hashlib

    from mcptask_gen.load import load, recognise

    doc = json.loads(schema.read_text())
    sha = hashlib.sha256(schema.read_bytes()).hexdigest()
    assert recognise(doc, {}, sha) == ("2026-07-28", "2026-07-28-tasks")
    loaded = load(schema, None)
    assert (loaded.revision, loaded.overlay) == ("2026-07-28", "2026-07-28-tasks")


def test_both_pinned_schemas_are_recognised() -> None:
    """X-ID-4: the extension's schema is revision 2026-07-28 with an overlay of its own."""
    from mcptask_gen.load import load

    core, ext = load(SCHEMA, None), load(SCHEMA_EXT, None)
    assert (core.revision, core.overlay) == ("2025-11-25", "2025-11-25")
    assert (ext.revision, ext.overlay) == ("2026-07-28", "2026-07-28-tasks")
    # by its markers too, when the file's bytes differ from the pinned one
    from mcptask_gen.load import recognise

    doc = json.loads(SCHEMA_EXT.read_text())
    assert recognise(doc, doc["$defs"], "not-the-pinned-sha") == ("2026-07-28", "2026-07-28-tasks")


@pytest.fixture(scope="module")
def ext_ir() -> Any:
    from mcptask_gen.pipeline import analyse

    ir, _ = analyse(SCHEMA_EXT, None, "mcp_tasks")
    return ir


def test_extension_ir_finds_the_task_types_by_structure(ext_ir: Any) -> None:
    assert ext_ir.face == "extension" and ext_ir.kind == "extension"
    assert ext_ir.extension.id == "io.modelcontextprotocol/tasks"  # X-ID-1
    assert ext_ir.extension.result_type_task == "task"  # X-RT-1
    assert [m.method for m in ext_ir.methods] == [
        "notifications/tasks",
        "tasks/cancel",
        "tasks/get",
        "tasks/update",
    ]
    assert (ext_ir.task_model, ext_ir.status_model) == ("Task", "TaskStatus")
    assert ext_ir.create_result_model == "CreateTaskResult"
    assert ext_ir.ttl_nullable  # ttlMs admits null
    unions = dict(ext_ir.variants)
    assert dict(unions["DetailedTask"]) == {
        "working": "WorkingTask",
        "input_required": "InputRequiredTask",
        "completed": "CompletedTask",
        "failed": "FailedTask",
        "cancelled": "CancelledTask",
    }
    assert dict(unions["GetTaskResult"])["input_required"] == "GetTaskResultInputRequired"
    params = {m.method: m.params_model for m in ext_ir.methods}
    assert params["tasks/get"] == "GetTaskRequestParams"


@pytest.fixture(scope="module")
def ext_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ext") / "ext_tasks"
    result = run_cli(SCHEMA_EXT, "-o", out)
    assert result.exit_code == 0, result.output
    return out


def test_the_draft_still_generates_the_same_package(ext_only: Path, tmp_path: Path) -> None:
    """The extension's draft is its release but for the ``$id``: the package generated from it
    differs only in its descriptor, and there only in the schema it names (the one file that
    names it: its source and sha256)."""
    from mcptask_gen.load import load
    from mcptask_gen.pinned import origin_of

    out = tmp_path / "ext_tasks"
    result = run_cli(SCHEMA_EXT_DRAFT, "-o", out)
    assert result.exit_code == 0, result.output
    release, draft = tree(ext_only), tree(out)
    assert sorted(draft) == sorted(release)
    assert [rel for rel in release if draft[rel] != release[rel]] == ["descriptor.py"]
    ours, theirs = load(SCHEMA_EXT_DRAFT, None), load(SCHEMA_EXT, None)
    assert ours.sha256 != theirs.sha256
    swaps = [
        (ours.sha256, theirs.sha256),
        (origin_of(ours.file_sha256, ours.sha256), origin_of(theirs.file_sha256, theirs.sha256)),
    ]
    text = draft["descriptor.py"]
    for old, new in swaps:
        assert old is not None and new is not None and old.encode() in text
        text = text.replace(old.encode(), new.encode())
    assert text == release["descriptor.py"]


#: The extension's own definitions (spec/tasks-extension.md section 21): the schema's other
#: 56 are the core types they refer to, copied in.
EXTENSION_OWN = [
    "CancelTaskRequest",
    "CancelTaskResult",
    "CancelledTask",
    "CompletedTask",
    "CreateTaskResult",
    "DetailedTask",
    "FailedTask",
    "GetTaskRequest",
    "GetTaskResult",
    "InputRequiredTask",
    "Task",
    "TaskStatus",
    "TaskStatusNotification",
    "TaskStatusNotificationParams",
    "TaskSubscriptionAcknowledgedNotifications",
    "TaskSubscriptionNotifications",
    "TasksExtensionCapability",
    "UpdateTaskRequest",
    "UpdateTaskResult",
    "WorkingTask",
]


@pytest.mark.parametrize("schema", [SCHEMA_EXT, SCHEMA_EXT_DRAFT], ids=["release", "draft"])
def test_the_extension_s_own_definitions_are_those_nothing_refers_to(schema: Path) -> None:
    from mcptask_gen.extselect import own_definitions

    assert list(own_definitions(json.loads(schema.read_text()))) == EXTENSION_OWN


def test_the_acknowledged_filter_is_generated(generated_pkg: Path, import_package: Any) -> None:
    """X-NOTIF-3: the filter notifications/subscriptions/acknowledged echoes is the
    extension's own definition, though no task type refers to it."""
    models = import_package(generated_pkg).extension.models
    ack = models.TaskSubscriptionAcknowledgedNotifications.model_validate({"taskIds": ["t1"]})
    assert ack.taskIds == ["t1"]


def test_every_definition_of_the_extension_s_own_is_generated(tmp_path: Path) -> None:
    """Nothing the extension defines is left out: a definition no task type refers to is
    generated, with what it refers to; a core type the extension merely copies in is not
    (``JSONRPCRequest``: only the requests refer to it, and they are flattened)."""
    doc = json.loads(SCHEMA_EXT.read_text())
    doc["$defs"]["FooBar"] = {
        "type": "object",
        "properties": {"fooId": {"type": "string"}, "baz": {"$ref": "#/$defs/FooBaz"}},
        "required": ["fooId"],
    }
    doc["$defs"]["FooBaz"] = {"type": "object", "properties": {"level": {"type": "integer"}}}
    schema = tmp_path / "ext" / "schema.json"
    schema.parent.mkdir()
    schema.write_text(json.dumps(doc, indent=2))
    out = tmp_path / "ext_tasks"
    result = run_cli(schema, "-o", out)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"wrote {len(tree(out))} files to {out}"]
    code = (out / "extension" / "models.py").read_text()
    assert "class FooBar(BaseModel)" in code and "class FooBaz(BaseModel)" in code
    assert "class JSONRPCRequest(" not in code
    check = run_cli(schema, "-o", out, "--check")
    assert check.exit_code == 0 and check.output.splitlines() == [f"{out}: up to date"]


def test_no_numbered_class_names_in_the_extension_face(ext_only: Path) -> None:
    """Plain datamodel-code-generator numbers 42 of 133 classes of this schema."""
    code = (ext_only / "extension" / "models.py").read_text()
    names = re.findall(r"^(?:class (\w+)|(\w+) = TypeAliasType)", code, re.M)
    flat = [a or b for a, b in names]
    assert len(flat) > 90
    assert [n for n in flat if re.search(r"\d$", n)] == []


def test_extension_only_package_has_no_runtime_and_imports(
    ext_only: Path, import_package: Any
) -> None:
    """templates/needs.toml: the runtime needs a core face; the package still imports."""
    files = set(tree(ext_only))
    assert "extension/models.py" in files and "protocol.py" in files
    assert not any(f.startswith(("runtime/", "core/")) for f in files)
    assert "models.py" not in files and "store.py" not in files
    pkg = import_package(ext_only)
    assert pkg.protocol.FACES == {"2026-07-28": "extension"}
    assert pkg.protocol.EXTENSIONS == {"extension": "io.modelcontextprotocol/tasks"}


@TYPECHECK
def test_extension_only_output_passes_mypy_strict_and_ruff(ext_only: Path) -> None:
    assert_mypy_and_ruff_clean(ext_only)


@TYPECHECK
def test_2025_only_output_passes_mypy_strict_and_ruff(tmp_path: Path) -> None:
    out = tmp_path / "core_tasks"
    assert run_cli(SCHEMA, "-o", out).exit_code == 0
    assert not (out / "extension").exists()
    assert_mypy_and_ruff_clean(out)


def test_argument_order_does_not_matter(generated_pkg: Path, tmp_path: Path) -> None:
    """Faces are ordered by revision."""
    out = tmp_path / "mcp_tasks_fresh"
    assert run_cli(*reversed(PINNED), "-o", out, "--with-runtime").exit_code == 0
    assert tree(out) == tree(generated_pkg)


def test_same_schema_twice_is_refused(tmp_path: Path) -> None:
    result = run_cli(SCHEMA, SCHEMA, "-o", tmp_path / "pkg")
    assert result.exit_code == 2
    assert "same face 'core'" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_faces_must_agree_on_the_state_machine(ext_ir: Any) -> None:
    """X-STATE-1 and R-STATE-2 must be one machine: one engine serves both faces."""
    from mcptask_gen.errors import GeneratorError
    from mcptask_gen.ir import merge_faces
    from mcptask_gen.pipeline import analyse

    core, _ = analyse(SCHEMA, None, "mcp_tasks")
    assert merge_faces([ext_ir, core]).ir.face == "core"
    odd = dataclasses.replace(ext_ir, terminal=("completed",))
    with pytest.raises(GeneratorError, match="one package has one state machine"):
        merge_faces([core, odd])
    renamed = dataclasses.replace(
        ext_ir,
        errors=tuple(
            dataclasses.replace(e, code=-1) if e.name == "TaskNotFound" else e
            for e in ext_ir.errors
        ),
    )
    with pytest.raises(GeneratorError, match="error 'TaskNotFound' differs between faces"):
        merge_faces([core, renamed])


def test_errors_of_every_face_are_merged(generated_pkg: Path, import_package: Any) -> None:
    pkg = import_package(generated_pkg)
    errors = pkg.errors
    assert errors.TaskNotFound().to_error() == {  # R-ERR-2 and X-GET-8 agree
        "code": -32602,
        "message": "Failed to retrieve task: Task not found",
    }
    assert errors.HeaderMismatch(detail="Mcp-Name").to_error()["code"] == -32020  # X-HTTP-4
    missing = errors.MissingRequiredClientCapability().to_error()  # X-CAP-8
    assert missing["code"] == -32021
    assert missing["data"] == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }
    assert isinstance(errors.error_from_payload(missing), errors.MissingRequiredClientCapability)


def test_extension_face_facts(generated_pkg: Path, import_package: Any) -> None:
    pkg = import_package(generated_pkg)
    facts = pkg.extension.protocol
    assert facts.EXTENSION_ID == "io.modelcontextprotocol/tasks"  # X-ID-1
    assert (facts.RESULT_TYPE_TASK, facts.RESULT_TYPE_COMPLETE) == ("task", "complete")
    assert (
        facts.TASKS_UPDATE == "tasks/update" and facts.NOTIFICATIONS_TASKS == "notifications/tasks"
    )
    assert facts.REMOVED_METHODS == {"tasks/result", "tasks/list"}  # X-COMPAT-4
    assert facts.GATE_METHODS == {"tasks/get", "tasks/update", "tasks/cancel"}  # X-CAP-9
    assert facts.AUGMENTABLE["server"] == {"tools/call"} and not facts.AUGMENTABLE["client"]
    assert (facts.ROUTING_NAME_HEADER, facts.ROUTING_NAME_PARAM) == ("Mcp-Name", "taskId")
    assert facts.TOOL_ERROR_STATUS == "completed"  # X-ERR-4
    assert facts.PROTOCOL_VERSION_KEY == "io.modelcontextprotocol/protocolVersion"  # X-HTTP-5
    assert facts.SUBSCRIPTION_ID_KEY == "io.modelcontextprotocol/subscriptionId"  # X-NOTIF-8
    assert facts.TERMINAL == pkg.protocol.TERMINAL  # one state machine
    assert facts.GetTaskParams is pkg.extension.models.GetTaskRequestParams
    assert facts.DetailedTask is pkg.extension.models.DetailedTask  # X-GET-1..3
    assert facts.ExtensionCapability is pkg.extension.models.TasksExtensionCapability  # X-CAP-3
    # the subscriptions/listen filter (X-NOTIF-2)
    assert facts.TaskSubscriptionFilter is pkg.extension.models.TaskSubscriptionNotifications
    assert facts.NOTIFICATION_CHANNEL == "subscriptions/listen"
    assert facts.NOTIFICATION_FILTER == "taskIds"
    listen = pkg.extension.models.TaskSubscriptionNotifications(taskIds=["t1"])
    assert listen.model_dump(by_alias=True, exclude_unset=True) == {"taskIds": ["t1"]}
    # the per-request capability envelope survives in params._meta (X-CAP-1)
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tasks/get",
        "params": {"taskId": "t1", "_meta": envelope},
    }
    parsed = pkg.extension.methods.parse_request(message)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == message


def test_the_package_describes_itself_and_carries_no_re_exports(
    bindings_pkg: Path, import_package: Any
) -> None:
    """The bindings by default: one face subpackage per schema, the neutral modules and the
    descriptor a runtime reads; no top-level re-export of a face, no runtime."""
    generated_pkg = bindings_pkg
    pkg = import_package(generated_pkg)
    assert pkg.protocol.TASKS_RESULT == "tasks/result"
    assert pkg.protocol.Task is pkg.core.models.Task
    assert pkg.protocol.FACES == {"2025-11-25": "core", "2026-07-28": "extension"}
    for gone in ("models", "handlers", "methods", "capabilities", "meta", "runtime", "cli"):
        assert not (generated_pkg / f"{gone}.py").exists() and not (generated_pkg / gone).exists()
    d = pkg.descriptor
    assert d.GENERATOR == "mcptask-gen" and d.RUNTIME_VENDORED is False
    assert {f.module: (f.kind, f.revision) for f in d.FACES.values()} == {
        "core": ("core", "2025-11-25"),
        "extension": ("extension", "2026-07-28"),
    }
    assert list(d.PARTS) == ["bindings"]
    assert sorted(r.split("<")[0].split(">")[0] for r in d.PARTS["bindings"].requires) == [
        "anyio",
        "pydantic",
    ]
    assert pkg.core.handlers.TasksHandlerBase.results["tasks/get"] is pkg.core.models.GetTaskResult
    assert pkg.extension.handlers.TasksHandlerBase.created is pkg.extension.models.CreateTaskResult


def test_extension_handler_base_gates_before_params(ext_only: Path, import_package: Any) -> None:
    """X-CAP-9, X-ERR-5: -32021 (with data, X-CAP-8) before the params or the task are read;
    X-COMPAT-4: tasks/result and tasks/list are -32601; declared requests reach the handler."""
    import asyncio

    pkg = import_package(ext_only)
    handlers = importlib.import_module(f"{pkg.__name__}.extension.handlers")
    models = importlib.import_module(f"{pkg.__name__}.extension.models")
    errors = pkg.errors

    class Mine(handlers.TasksHandlerBase):  # type: ignore[misc,name-defined]
        async def tasks_get(self, params: Any, ctx: Any) -> Any:
            return models.GetTaskResultWorking(
                resultType="complete",
                taskId=params.taskId,
                status="working",
                createdAt="2026-07-28T00:00:00Z",
                lastUpdatedAt="2026-07-28T00:00:00Z",
                ttlMs=None,
            )

    declared: dict[str, Any] = {
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        }
    }
    plain = handlers.RequestContext(requestor="a", meta={})
    opted = handlers.RequestContext(requestor="a", meta=declared)
    run = asyncio.run
    with pytest.raises(errors.MissingRequiredClientCapability) as gate:
        run(Mine().dispatch("tasks/get", {"wrong": 1}, plain))
    assert gate.value.to_error()["data"] == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }
    for removed in ("tasks/result", "tasks/list"):
        with pytest.raises(errors.MethodNotFound):
            run(Mine().dispatch(removed, {"taskId": "t"}, opted))
    with pytest.raises(errors.InvalidParams):
        run(Mine().dispatch("tasks/get", {}, opted))
    answer = run(Mine().dispatch("tasks/get", {"taskId": "t1"}, opted))
    assert answer["taskId"] == "t1" and answer["ttlMs"] is None
    with pytest.raises(errors.MethodNotFound):  # not overridden: -32601
        run(Mine().dispatch("tasks/cancel", {"taskId": "t1"}, opted))


def test_pyproject_schema_may_be_a_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.mcptask-gen]\n"
        f'schema = ["{SCHEMA_EXT.as_posix()}", "{SCHEMA.as_posix()}"]\n'
        'output = "out/both_tasks"\n'
    )
    monkeypatch.chdir(tmp_path)
    result = run_cli()
    assert result.exit_code == 0, result.output
    out = tmp_path / "out" / "both_tasks"
    assert (out / "extension" / "protocol.py").is_file()
    assert (out / "core" / "protocol.py").is_file()
    (tmp_path / "pyproject.toml").write_text('[tool.mcptask-gen]\nschema = ["a.json", 3]\n')
    bad = run_cli()
    assert bad.exit_code == 2 and "a string or an array of strings" in bad.output
