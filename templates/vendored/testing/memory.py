"""Test your own task tools in memory (pytest or any async code): a client session connected to
your server through in-memory streams, with no port and no process, on either face.

    from mcp_tasks.testing.memory import memory_client

    async def test_count_to() -> None:  # with anyio's pytest plugin: @pytest.mark.anyio
        async with memory_client(tasks) as session:  # tasks: your McpTasks
            result = await session.tasks.run_tool("count_to", {"n": 2})
        assert result.content[0].text == "counted to 2"

The server runs as over stdio (one connection: its tasks belong to it, R-SEC-1), its task
engine started for the block when it is not running yet. Needs the ``mcp`` extra."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from mcp.shared.memory import create_client_server_memory_streams

from ..protocol import REVISION
from ..runtime.client.requestor import TasksClientSession
from ..runtime.client.retry import one_error
from ..runtime.serve.server import McpTasks

__all__ = ["memory_client"]


@asynccontextmanager
async def memory_client(
    tasks: McpTasks, *, face: str = REVISION, **session_kwargs: Any
) -> AsyncIterator[TasksClientSession]:
    """A :class:`TasksClientSession` on ``tasks``' server in memory, opened on ``face``: the
    core revision (``initialize``) or the tasks extension's (``"2026-07-28"``,
    ``server/discover``). ``session_kwargs`` go to the session (``elicitation_callback=``,
    ``sampling_callback=``: the answers a tool's questions get). An error inside the block
    is raised as itself, not inside a task group's ``ExceptionGroup``."""
    server = tasks.server
    with one_error():
        async with AsyncExitStack() as stack:
            if tasks.engine.task_group is None:  # not running yet: for this block
                await stack.enter_async_context(tasks)
            streams = await stack.enter_async_context(create_client_server_memory_streams())
            (client_read, client_write), (server_read, server_write) = streams
            tg = await stack.enter_async_context(anyio.create_task_group())
            options = server.create_initialization_options()
            tg.start_soon(server.run, server_read, server_write, options)
            async with TasksClientSession(client_read, client_write, **session_kwargs) as session:
                await (session.initialize() if face == REVISION else session.discover())
                yield session
            tg.cancel_scope.cancel()
