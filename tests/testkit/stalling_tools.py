"""Task tools on worker processes that stall their worker, for the tests of workers' leases
(``tests/security/test_worker_leases.py``).

- ``block`` {seconds}: holds its worker's event loop for ``seconds`` (a blocking call inside
  an ``async`` tool: nothing else of that worker's loop runs meanwhile); not retried;
- ``ticks`` {path, seconds}: for ``seconds``, every 0.05 s, appends ``PID TIME`` to the file
  ``path``: the trace of where and when it ran; retried twice when its worker dies.

:func:`build` is the app of both sides: the front end builds it on the shared
``RedisTaskStore`` (in the test's process), a worker imports :func:`worker_app`
(``python -m mcp_tasks.worker --store URL testkit.stalling_tools:worker_app``).
"""

from __future__ import annotations

import os
import time

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_tasks.runtime.serve.server import McpTasks
from mcp_tasks.store import TaskStore

#: the worker's app, as ``python -m mcp_tasks.worker`` takes it
WORKER_APP = "testkit.stalling_tools:worker_app"
#: runs of ``ticks`` allowed: one, and two more when its worker dies
TICKS_RETRIES = 2


def build(store: TaskStore | None = None) -> McpTasks:
    mcp = MCPServer("stalling-tools")
    tasks = McpTasks(mcp, store=store)

    @tasks.tool(task_support="optional", on_workers=True)
    @mcp.tool()
    async def block(seconds: float) -> str:
        """Hold the worker's event loop for `seconds`."""
        time.sleep(seconds)  # no await: the loop is held
        return f"blocked {seconds:g}s in {os.getpid()}"

    @tasks.tool(task_support="optional", on_workers=True, retries=TICKS_RETRIES)
    @mcp.tool()
    async def ticks(path: str, seconds: float) -> str:
        """Append `PID TIME` to `path` every 0.05 s for `seconds`."""
        end = anyio.current_time() + seconds
        while anyio.current_time() < end:
            with open(path, "a", encoding="ascii") as trace:
                trace.write(f"{os.getpid()} {time.time()}\n")
            await anyio.sleep(0.05)
        return f"ticked {seconds:g}s in {os.getpid()}"

    return tasks


def worker_app() -> McpTasks:
    """The app of ``python -m mcp_tasks.worker``: the tools (the front end's store is the
    worker's own)."""
    return build()
