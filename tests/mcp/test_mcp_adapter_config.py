"""``McpTasks`` configuration and error answers, in process (no subprocess).

- ``task_support`` is checked when given (a value that is not a ``taskSupport`` value)
  and when the server starts (a tool the server does not declare): R-TOOL-2.
- ``tasks.tool(...)`` declares a tool's task support beside ``@mcp.tool()``.
- A ``TaskError`` goes out with its own code and message; any other exception answers
  a plain ``-32603 Internal error`` and is logged with its traceback (R-ERR-1).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams

from mcp_tasks import protocol
from mcp_tasks.errors import ConcurrencyLimitExceeded
from mcp_tasks.runtime.client.requestor import TasksClientSession
from mcp_tasks.runtime.sdk import lowlevel_server
from mcp_tasks.runtime.serve.server import McpTasks

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _server() -> MCPServer:
    mcp = MCPServer("config-test")

    @mcp.tool()
    async def count_words(text: str) -> int:
        return len(text.split())

    return mcp


@asynccontextmanager
async def _connected(mcp: MCPServer, tasks: McpTasks) -> AsyncIterator[TasksClientSession]:
    low = lowlevel_server(mcp)
    async with create_client_server_memory_streams() as (client, server):

        async def serve() -> None:
            await low.run(server[0], server[1], low.create_initialization_options())

        async with tasks, anyio.create_task_group() as tg:
            tg.start_soon(serve)
            async with TasksClientSession(client[0], client[1]) as session:
                await session.initialize()
                yield session
            tg.cancel_scope.cancel()


def test_a_bad_task_support_value_is_refused_naming_tool_and_values() -> None:
    with pytest.raises(ValueError) as err:
        McpTasks(_server(), task_support={"count_words": "sometimes"})  # type: ignore[dict-item]
    text = str(err.value)
    assert "count_words" in text and "sometimes" in text
    assert all(repr(v) in text for v in protocol.TASK_SUPPORT_VALUES)


async def test_an_unknown_tool_is_refused_when_the_server_starts() -> None:
    tasks = McpTasks(_server(), task_support={"cout_words": protocol.TASK_SUPPORT_OPTIONAL})
    with pytest.raises(ValueError, match="cout_words.*count_words"):
        async with tasks:
            pass


async def test_task_support_declared_beside_the_tool() -> None:
    mcp = MCPServer("decorated")
    tasks = McpTasks(mcp)

    @tasks.tool(task_support=protocol.TASK_SUPPORT_REQUIRED)
    @mcp.tool()
    async def slow() -> str:
        return "ok"

    async with _connected(mcp, tasks) as session:
        assert await session.tasks.task_support("slow") == protocol.TASK_SUPPORT_REQUIRED
        result = await session.tasks.run_tool("slow")
        assert result.content[0].text == "ok"  # type: ignore[union-attr]


async def test_tools_declared_before_the_store_is_chosen(tmp_path: Any) -> None:
    """``TaskTools`` takes the declarations at import time, with no ``McpTasks`` (nor a
    store) yet; the store comes from a URL later (``store_from_url``), as from a flag."""
    from mcp_tasks.runtime import store_from_url
    from mcp_tasks.runtime.serve.server import TaskTools

    mcp = MCPServer("declared-early")
    tools = TaskTools()

    @tools.tool(task_support=protocol.TASK_SUPPORT_REQUIRED)
    @mcp.tool()
    async def slow() -> str:
        return "ok"

    store = store_from_url(f"sqlite:{tmp_path / 'tasks.db'}")  # say, from --store
    tasks = McpTasks(mcp, store=store, tools=tools)
    try:
        async with _connected(mcp, tasks) as session:
            assert await session.tasks.task_support("slow") == protocol.TASK_SUPPORT_REQUIRED
            ids: list[str] = []
            result = await session.tasks.run_tool("slow", on_status=lambda t: ids.append(t.taskId))
            assert result.content[0].text == "ok"  # type: ignore[union-attr]
            assert await store.get(ids[0]) is not None  # the task went to the chosen store
    finally:
        await store.close()


async def test_unexpected_exception_answers_plain_internal_error(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    mcp = _server()
    tasks = McpTasks(mcp, task_support={"count_words": protocol.TASK_SUPPORT_OPTIONAL})

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store at 10.1.2.3:6379 refused the connection")

    async with _connected(mcp, tasks) as session:
        monkeypatch.setattr(tasks.engine, "start", broken)
        with caplog.at_level(logging.ERROR), pytest.raises(MCPError) as err:
            await session.tasks.call_tool_as_task("count_words", {"text": "a b"})
    assert (err.value.error.code, err.value.error.message) == (-32603, "Internal error")
    assert err.value.error.data is None
    assert any("10.1.2.3" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


async def test_task_error_goes_out_with_its_own_code(monkeypatch: pytest.MonkeyPatch) -> None:
    mcp = _server()
    tasks = McpTasks(mcp, task_support={"count_words": protocol.TASK_SUPPORT_OPTIONAL})

    async def limited(*args: Any, **kwargs: Any) -> Any:
        raise ConcurrencyLimitExceeded(3)

    async with _connected(mcp, tasks) as session:
        monkeypatch.setattr(tasks.engine, "start", limited)
        with pytest.raises(MCPError) as err:
            await session.tasks.call_tool_as_task("count_words", {"text": "a b"})
    expected = ConcurrencyLimitExceeded(3)
    assert (err.value.error.code, err.value.error.message) == (expected.code, expected.message)
