"""The default handlers' answers as wire JSON (``HandlerBase.wire_variants``): while none of
its typed methods is overridden, a default handler on this package's own bindings answers
with the wire JSON it builds, instead of building the result model and dumping it again.
That is the same answer only because those models dump that JSON exactly as it is: held here
for every status, with and without the optional fields, on both faces. A subclass that
overrides a typed method is called through it (a ``super()`` call returns the model), as is
every handler on another package's bindings."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from mcp_tasks import protocol
from mcp_tasks._handlers import RequestContext, dump
from mcp_tasks.core import handlers as core_handlers
from mcp_tasks.core import models as core_models
from mcp_tasks.extension import handlers as ext_handlers
from mcp_tasks.runtime import TaskEngine
from mcp_tasks.runtime.engine.runs import TaskView
from mcp_tasks.runtime.faces.common import result_builders, task_json
from mcp_tasks.runtime.faces.core import CoreTasks, result_payload
from mcp_tasks.runtime.faces.extension import ExtensionTasks, detailed, extension_task_json
from mcp_tasks.store import TaskRecord

pytestmark = pytest.mark.anyio

CORE = result_builders(core_handlers.RESULTS)
EXT = result_builders(ext_handlers.RESULTS)
RESULT = {"content": [{"type": "text", "text": "done"}], "structuredContent": {"result": "done"}}


def records() -> list[TaskRecord]:
    out = []
    for status in protocol.STATUSES:
        for message in (None, "a message"):
            for ttl in (None, 60_000):
                for poll in (None, 500):
                    out.append(
                        TaskRecord(
                            task_id="t1", requestor="alice", method="tools/call",
                            status=status, created_at=1.5, last_updated_at=2.25, ttl_ms=ttl,
                            poll_interval_ms=poll, status_message=message,
                            result=dict(RESULT) if status == protocol.COMPLETED else None,
                            error={"code": -32603, "message": "boom"}
                            if status == protocol.FAILED else None,
                        )
                    )  # fmt: skip
    return out


def assert_dumps_as_is(build: Any, wire: dict[str, Any]) -> None:
    assert dump(build(wire)) == wire


@pytest.mark.parametrize("rec", records(), ids=lambda r: f"{r.status.value}")
def test_the_core_models_dump_the_wire_json_as_it_is(rec: TaskRecord) -> None:
    for method in (protocol.TASKS_GET, protocol.TASKS_CANCEL):
        assert_dumps_as_is(CORE[method], task_json(rec))
    assert_dumps_as_is(core_handlers.CREATED.model_validate, {"task": task_json(rec)})
    assert_dumps_as_is(CORE[protocol.TASKS_LIST], {"tasks": [task_json(rec)]})
    assert_dumps_as_is(CORE[protocol.TASKS_LIST], {"tasks": [task_json(rec)], "nextCursor": "c"})
    if rec.status in protocol.TERMINAL and rec.result is not None:
        assert_dumps_as_is(CORE[protocol.TASKS_RESULT], result_payload(rec))


@pytest.mark.parametrize("rec", records(), ids=lambda r: f"{r.status.value}")
def test_the_extension_models_dump_the_wire_json_as_it_is(rec: TaskRecord) -> None:
    created = extension_task_json(rec)
    created["resultType"] = "task"
    assert_dumps_as_is(ext_handlers.CREATED.model_validate, created)
    if rec.status != protocol.INPUT_REQUIRED:  # its input requests: always through the model
        assert_dumps_as_is(EXT["tasks/get"], detailed(TaskView(rec)))
    for method in ("tasks/update", "tasks/cancel"):
        assert_dumps_as_is(EXT[method], {"resultType": "complete"})


def test_a_stored_result_of_any_shape_is_answered_as_stored() -> None:
    rec = dataclasses.replace(
        records()[0], status=protocol.COMPLETED, result={"content": [{"type": "x", "n": 1}]}
    )
    assert_dumps_as_is(CORE[protocol.TASKS_RESULT], result_payload(rec))
    assert_dumps_as_is(EXT["tasks/get"], detailed(TaskView(rec)))


def test_the_default_handlers_answer_as_wire_json() -> None:
    core, ext = CoreTasks(TaskEngine()), ExtensionTasks(TaskEngine())
    for name in ("tools_call_task", "tasks_get", "tasks_cancel", "tasks_list", "tasks_result"):
        assert core._wire(name) is not None, name
    for name in ("tools_call_task", "tasks_get", "tasks_update", "tasks_cancel"):
        assert ext._wire(name) is not None, name


def test_an_overridden_method_is_called_through_its_typed_method() -> None:
    class Mine(CoreTasks):
        async def tasks_get(self, params: Any, ctx: Any) -> Any:
            return await super().tasks_get(params, ctx)

        async def start(self, request: Any, ctx: Any) -> Any:
            return await super().start(request, ctx)

    mine = Mine(TaskEngine())
    assert mine._wire("tasks_get") is None
    assert mine._wire("tools_call_task") is None  # its body (``start``) is overridden
    assert mine._wire("tasks_list") is not None
    Mine.tasks_list = Mine.tasks_get  # type: ignore[method-assign]  # set on the class later
    assert mine._wire("tasks_list") is None


def test_another_packages_models_are_always_built() -> None:
    class Other(core_models.GetTaskResult):
        pass

    class OnOtherBindings(CoreTasks):
        results = {**core_handlers.RESULTS, protocol.TASKS_GET: Other}

    assert OnOtherBindings(TaskEngine())._wire("tasks_get") is None


async def test_the_typed_methods_still_return_the_models() -> None:
    async with TaskEngine() as engine:
        handler = CoreTasks(engine)

        async def work(_: Any) -> dict[str, Any]:
            return dict(RESULT)

        ctx = RequestContext(requestor="alice", request_id=1)
        rec = await engine.start("alice", protocol.REVISION, "tools/call", work,
                                 tool_error=protocol.FAILED)  # fmt: skip
        got = await handler.tasks_get(core_models.GetTaskRequestParams(taskId=rec.task_id), ctx)
        assert isinstance(got, core_models.GetTaskResult)
        wire = await handler.dispatch(protocol.TASKS_GET, {"taskId": rec.task_id}, ctx)
        assert wire == dump(got) | {
            "status": wire["status"],
            "lastUpdatedAt": wire["lastUpdatedAt"],
        }
