"""Rules that live in the router alone (``runtime/serve/router.py``), checked through both front
doors: what both doors must do alike because one module decides it."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from mcp_tasks._handlers import RequestContext
from mcp_tasks.core import handlers as core_handlers
from mcp_tasks.core import models as core_models
from mcp_tasks.core.protocol import (
    TASK_SUPPORT_FORBIDDEN,
    TASK_SUPPORT_OPTIONAL,
    TASK_SUPPORT_REQUIRED,
)
from mcp_tasks.extension import handlers as ext_handlers
from mcp_tasks.runtime import CoreTasks, ExtensionTasks, TaskEngine
from mcp_tasks.runtime.serve.server import McpTasks
from mcp_tasks.runtime.stores.memory import InMemoryTaskStore
from testkit.doors import ENDPOINT
from testkit.ext_wire import ExtClient
from testkit.inproc import serving
from testkit.sec_harness import RawHttp
from testkit.wait import until

IMMEDIATE = "io.modelcontextprotocol/model-immediate-response"
SAID = "Started: it will take a while."


def _build(**kwargs: Any) -> Any:
    def build() -> tuple[MCPServer, McpTasks]:
        mcp = MCPServer("router-test")
        if "engine" not in kwargs:
            kwargs["store"] = InMemoryTaskStore()
        tasks = McpTasks(mcp, **kwargs)

        @tasks.tool()
        @mcp.tool()
        async def wait_a_bit(seconds: float = 0) -> str:
            await anyio.sleep(seconds)
            return "waited"

        return mcp, tasks

    return build


def test_immediate_response_is_stamped_once_on_each_door(front_door: str) -> None:
    """R-CREATE-3: the configured text in the core ``CreateTaskResult``'s ``_meta``, the same
    through either door; the extension's flat ``CreateTaskResult`` has no such key."""
    with serving(front_door, build=_build(immediate_response=SAID)) as srv:
        with RawHttp(srv.url) as core:
            created = core.ok(
                "tools/call", {"name": "wait_a_bit", "arguments": {}, "task": {"ttl": 60000}}
            )
        with ExtClient(srv.url) as ext:
            flat = ext.result("tools/call", {"name": "wait_a_bit", "arguments": {}})
    assert created["_meta"][IMMEDIATE] == SAID
    assert created["task"]["status"] == "working"
    assert flat["resultType"] == "task" and IMMEDIATE not in flat.get("_meta", {})


def test_without_immediate_response_nothing_is_stamped(front_door: str) -> None:
    with serving(front_door, build=_build()) as srv, RawHttp(srv.url) as core:
        created = core.ok("tools/call", {"name": "wait_a_bit", "arguments": {}, "task": {}})
    assert IMMEDIATE not in created.get("_meta", {})


class Noted(CoreTasks):
    """A core handler that keeps the ``notifications/tasks/status`` it is given."""

    seen: list[core_models.TaskStatusNotificationParams]

    def __init__(self, engine: TaskEngine) -> None:
        super().__init__(engine)
        self.seen = []

    async def notifications_tasks_status(
        self, params: core_models.TaskStatusNotificationParams, ctx: RequestContext
    ) -> None:
        self.seen.append(params)


def test_a_task_notification_from_the_client_reaches_the_handlers_hook(front_door: str) -> None:
    """R-NOTIFY-2: ``notifications/tasks/status`` a client sends (about a task it runs for the
    server) reaches the core handler's ``notifications_tasks_status``, validated; one that
    does not validate is dropped (a notification has no answer)."""
    engine = TaskEngine(InMemoryTaskStore())
    noted = Noted(engine)
    status = {
        "taskId": "client-task-1",
        "status": "working",
        "createdAt": "2026-12-01T00:00:00Z",
        "lastUpdatedAt": "2026-12-01T00:00:00Z",
        "ttl": 60000,
    }
    with serving(front_door, build=_build(engine=engine, handlers=[noted])) as srv:
        with RawHttp(srv.url) as core:
            for params in ({"taskId": 7}, status):  # the bad one first
                body = {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": params}
                reply = core.post_raw(json.dumps(body))
                assert reply.status == 202, reply
            until(lambda: noted.seen, what="the handler's hook is called")
    (params,) = noted.seen
    assert params.taskId == "client-task-1" and params.status.value == "working"


def test_handlers_must_be_a_faces_generated_base() -> None:
    """``McpTasks(handlers=...)`` names what is wrong: not a face's handler (``TypeError``,
    naming the generated bases to subclass), or two for one face (``ValueError``)."""
    engine = TaskEngine(InMemoryTaskStore())
    with pytest.raises(TypeError) as wrong:
        McpTasks(MCPServer("x"), engine=engine, handlers=[object()])  # type: ignore[list-item]
    assert "object is not a subclass" in str(wrong.value)
    assert core_handlers.__name__ + ".TasksHandlerBase" in str(wrong.value)
    assert ext_handlers.__name__ + ".TasksHandlerBase" in str(wrong.value)
    with pytest.raises(ValueError, match="two handlers for the face"):
        McpTasks(MCPServer("x"), engine=engine, handlers=[CoreTasks(engine), Noted(engine)])
    served = McpTasks(MCPServer("x"), engine=engine, handlers=[ExtensionTasks(engine)])
    assert isinstance(served.handlers[core_handlers.TasksHandlerBase.face], CoreTasks)


def test_a_result_is_answered_at_once_only_for_a_task_that_just_ended_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """R-RESULT-2: ``tasks/result`` blocks until its task ends; the router tells a front door
    which ones cannot block (their task ended in this process a moment ago), so that door
    need not watch for a client that leaves meanwhile; a running task, an unknown one and
    any other method still may."""
    from mcp_tasks.runtime.serve.router import TaskRequest

    monkeypatch.setattr(
        "mcp_tasks.runtime.engine.supervisor.RECENT_S", 600.0
    )  # "a moment", on any machine
    built: list[McpTasks] = []

    def build() -> tuple[MCPServer, McpTasks]:
        mcp, tasks = _build()()
        built.append(tasks)
        return mcp, tasks

    with serving(ENDPOINT, build=build) as srv, RawHttp(srv.url) as c:
        router = built[0].router
        ended = c.create("wait_a_bit", {"seconds": 0})
        c.ok("tasks/result", {"taskId": ended})
        running = c.create("wait_a_bit", {"seconds": 30})

        def asks(method: str, task_id: str) -> bool:
            params = {"taskId": task_id}
            return router.answers_at_once(TaskRequest("2025-11-25", method, params, 1, "x"))

        assert asks("tasks/result", ended)
        assert not asks("tasks/result", running)
        assert not asks("tasks/result", "no-such-task")
        assert not asks("tasks/get", ended)
        c.call("tasks/cancel", {"taskId": running})


def test_a_tool_declared_forbidden_never_becomes_a_task_on_either_face(front_door: str) -> None:
    """A tool the server declares ``forbidden`` (explicitly, not merely left out) is called
    with task augmentation on each face. The 2025-11-25 face refuses it with ``-32601``
    (R-TOOL-2); the extension's runs it as the plain call it is, ``resultType: "complete"``
    and no task (X-CAP-4: only a tool whose mode allows it may become a task; X-CAP-12: the
    server reverts to core behaviour), while an ``optional`` tool on the same request shape
    does become one (X-RT-1); without the extension declared on the request, the optional
    tool runs plainly (X-CAP-5) and a ``required`` one is refused (X-CAP-8)."""
    store = InMemoryTaskStore()
    ran: list[str] = []

    def build() -> tuple[MCPServer, McpTasks]:
        mcp = MCPServer("router-forbidden-test")
        tasks = McpTasks(mcp, store=store)

        @tasks.tool(task_support=TASK_SUPPORT_FORBIDDEN)
        @mcp.tool()
        async def never_a_task(word: str) -> str:
            ran.append(word)
            return f"plain {word}"

        @tasks.tool(task_support=TASK_SUPPORT_OPTIONAL)
        @mcp.tool()
        async def maybe_a_task() -> str:
            return "maybe"

        @tasks.tool(task_support=TASK_SUPPORT_REQUIRED)
        @mcp.tool()
        async def always_a_task() -> str:
            return "always"

        return mcp, tasks

    with serving(front_door, build=build) as srv:
        assert srv.tasks.task_support["never_a_task"] == TASK_SUPPORT_FORBIDDEN
        with ExtClient(srv.url) as ext:
            plain = ext.result("tools/call", {"name": "never_a_task", "arguments": {"word": "x"}})
            assert plain["resultType"] == "complete", plain
            assert "taskId" not in plain and "status" not in plain, plain
            assert plain["content"] == [{"type": "text", "text": "plain x"}]
            assert ran == ["x"] and len(store) == 0  # it ran once, as itself, and no task
            task = ext.result("tools/call", {"name": "maybe_a_task", "arguments": {}})
            assert task["resultType"] == "task" and len(store) == 1
            # a request that does not declare the extension: an optional tool runs plainly
            # (X-CAP-5), a required one is refused with -32021 (X-CAP-8)
            undeclared = {"name": "maybe_a_task", "arguments": {}}
            plain = ext.result("tools/call", undeclared, tasks=False)
            assert plain["resultType"] == "complete" and "taskId" not in plain, plain
            required = {"name": "always_a_task", "arguments": {}}
            refused_ext = ext.send("tools/call", required, tasks=False)
            assert refused_ext["error"]["code"] == -32021, refused_ext
            assert len(store) == 1
        with RawHttp(srv.url) as core:
            refused = core.call(
                "tools/call", {"name": "never_a_task", "arguments": {"word": "y"}, "task": {}}
            )
            plain_call = core.ok("tools/call", {"name": "maybe_a_task", "arguments": {}})
        assert refused["error"]["code"] == -32601, refused
        assert ran == ["x"] and len(store) == 1
        # R-TOOL-3: an optional tool called without augmentation is the plain call
        assert plain_call["content"] == [{"type": "text", "text": "maybe"}], plain_call


def test_a_tool_on_workers_may_run_once_plus_its_retries() -> None:
    """``TaskTools.declare``: a tool on workers is allowed ``1 + retries`` runs (a worker
    that dies takes one); declared again without workers, it runs here."""
    from mcp_tasks.runtime.serve.router import TaskTools

    tools = TaskTools()
    tools.declare("twice_more", TASK_SUPPORT_OPTIONAL, on_workers=True, retries=2)
    tools.declare("once", TASK_SUPPORT_OPTIONAL, on_workers=True)
    tools.declare("here", TASK_SUPPORT_OPTIONAL)
    assert tools.on_workers == {"twice_more": 3, "once": 1}
    tools.declare("twice_more", TASK_SUPPORT_OPTIONAL)
    assert tools.on_workers == {"once": 1}
