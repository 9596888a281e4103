"""Task definitions, augmentable requests and capability paths are found by structure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testkit.gen import run_cli, with_prompts_get_augmentable, write_schema


def test_pinned_schema_structure(generated_pkg: Path, import_package: Any) -> None:
    pkg = import_package(generated_pkg)
    methods = pkg.core.methods
    assert set(methods.METHODS) == {
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "notifications/tasks/status",
    }
    get = methods.METHODS["tasks/get"]
    assert (
        get.params is pkg.core.models.GetTaskRequestParams
        and get.result is pkg.core.models.GetTaskResult
    )
    assert get.sent_by == {"client", "server"}
    assert set(methods.AUGMENTABLE) == {
        "tools/call",
        "sampling/createMessage",
        "elicitation/create",
    }
    assert methods.AUGMENTABLE["tools/call"].receiver == "server"
    assert methods.AUGMENTABLE["elicitation/create"].receiver == "client"
    assert methods.AUGMENTABLE["tools/call"].answer is pkg.core.models.CreateTaskResult
    caps = pkg.core.capabilities
    assert caps.TASK_REQUESTS["server"] == {"tools/call"}
    assert caps.TASK_REQUESTS["client"] == {"sampling/createMessage", "elicitation/create"}
    handlers = pkg.core.handlers
    assert dict(handlers.HOOKS) == {
        "elicitation/create": "elicitation_create_task",
        "sampling/createMessage": "sampling_create_message_task",
        "tools/call": "tools_call_task",
    }
    assert set(handlers.DISPATCH) == {"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"}


def test_new_augmentable_request_appears_without_code_change(
    tmp_path: Path, schema_doc: dict[str, Any], import_package: Any
) -> None:
    """A schema where prompts/get gains `task` and tasks.requests.prompts.get: hook, dispatch, negotiator."""
    schema = write_schema(tmp_path / "schema.json", with_prompts_get_augmentable(schema_doc))
    out = tmp_path / "prompts_tasks"
    result = run_cli(schema, "-o", out)
    assert result.exit_code == 0, result.output
    pkg = import_package(out)
    assert pkg.core.handlers.HOOKS["prompts/get"] == "prompts_get_task"
    assert hasattr(pkg.core.handlers.TasksHandlerBase, "prompts_get_task")
    spec = pkg.core.methods.AUGMENTABLE["prompts/get"]
    assert spec.receiver == "server" and spec.capability_path == ("prompts", "get")
    assert "prompts/get" in pkg.core.capabilities.TASK_REQUESTS["server"]
    ours = pkg.core.capabilities.build_tasks_capability("server")
    assert ours["requests"]["prompts"] == {"get": {}}
    assert pkg.core.capabilities.peer_supports({"tasks": ours}, "prompts/get")
    assert not pkg.core.capabilities.peer_supports(
        {"tasks": {"requests": {"tools": {"call": {}}}}}, "prompts/get"
    )


def test_augmentable_request_without_capability_is_not_augmentable(
    tmp_path: Path, schema_doc: dict[str, Any], import_package: Any
) -> None:
    """R-CAP-4: the capability set is exhaustive; a `task` param alone does not make a hook."""
    doc = json.loads(json.dumps(schema_doc))
    doc["$defs"]["GetPromptRequestParams"]["properties"]["task"] = {"$ref": "#/$defs/TaskMetadata"}
    out = tmp_path / "nocap_tasks"
    assert run_cli(write_schema(tmp_path / "s.json", doc), "-o", out).exit_code == 0
    pkg = import_package(out)
    assert "prompts/get" not in pkg.core.handlers.HOOKS


def test_inline_objects_get_stable_names(generated_pkg: Path, import_package: Any) -> None:
    pkg = import_package(generated_pkg)
    m = pkg.core.models
    for name in (
        "GetTaskRequestParams",
        "GetTaskPayloadRequestParams",
        "CancelTaskRequestParams",
        "ServerCapabilitiesTasks",
        "ClientCapabilitiesTasks",
        "TaskSupport",
        "TaskStatus",
    ):
        assert hasattr(m, name), name
    assert [s.value for s in m.TaskStatus] == [
        "cancelled",
        "completed",
        "failed",
        "input_required",
        "working",
    ]
    assert [s.value for s in m.TaskSupport] == ["forbidden", "optional", "required"]
    # Task.ttl is required and nullable.
    field = m.Task.model_fields["ttl"]
    assert field.is_required()
    assert (
        m.Task.model_validate(
            {
                "taskId": "t",
                "status": "working",
                "createdAt": "x",
                "lastUpdatedAt": "x",
                "ttl": None,
            }
        ).ttl
        is None
    )
    # _meta as meta, population by name allowed.
    r = m.CreateTaskResult(
        meta={"k": 1},
        task=m.Task(taskId="t", status="working", createdAt="a", lastUpdatedAt="a", ttl=None),
    )
    assert r.model_dump(by_alias=True, exclude_unset=True)["_meta"] == {"k": 1}
    assert (
        pkg.core.meta.TaskMeta.model_validate(
            {"io.modelcontextprotocol/related-task": {"taskId": "abc"}}
        ).related_task.taskId
        == "abc"
    )


def test_methods_without_params_get_a_generic_params_model(
    tmp_path: Path, schema_doc: dict[str, Any], import_package: Any
) -> None:
    """A tasks/* request or notification whose schema defines no ``params`` (found by
    tests/security/test_generator_fuzz.py: the package named a model that did not exist)."""
    import asyncio

    doc = json.loads(json.dumps(schema_doc))
    for name in ("ListTasksRequest", "TaskStatusNotification"):
        del doc["$defs"][name]["properties"]["params"]
        doc["$defs"][name]["required"] = [
            r for r in doc["$defs"][name].get("required", []) if r != "params"
        ]
    out = tmp_path / "noparams_tasks"
    result = run_cli(write_schema(tmp_path / "s.json", doc), "-o", out)
    assert result.exit_code == 0, result.output
    pkg = import_package(out)
    assert pkg.core.handlers.DISPATCH["tasks/list"][0] is pkg.core.handlers.NoParams
    assert pkg.core.handlers.NOTIFICATION_DISPATCH["notifications/tasks/status"][0] is (
        pkg.core.handlers.NoParams
    )
    assert pkg.core.methods.METHODS["tasks/list"].params is None

    class Lister(pkg.core.handlers.TasksHandlerBase):  # type: ignore[name-defined,misc]
        async def tasks_list(self, params: Any, ctx: Any) -> Any:
            assert params.model_extra == {"cursor": "c1"}
            return pkg.core.models.ListTasksResult(tasks=[])

    ctx = pkg.core.handlers.RequestContext(requestor="alice")
    answer = asyncio.run(Lister().dispatch("tasks/list", {"cursor": "c1"}, ctx))
    assert answer == {"tasks": []}
