"""An MCP server of ours served in the test's own process (its own thread and event loop), so
that a test can read its objects (the task endpoint's counters, the engine) while real HTTP
clients talk to it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn

from mcp_tasks.examples.server import build_server
from mcp_tasks.runtime.engine.task_engine import EngineConfig
from mcp_tasks.runtime.serve.server import McpTasks, tidy_http_errors
from mcp_tasks.runtime.stores.memory import InMemoryTaskStore
from testkit.doors import task_endpoint
from testkit.wait import until


@dataclass
class InProc:
    url: str
    tasks: McpTasks

    @property
    def answered(self) -> int:
        endpoint = self.tasks.task_endpoint
        return 0 if endpoint is None else int(endpoint.replied)


@contextmanager
def serving(
    front_door: str,
    *,
    tokens: dict[str, str] | None = None,
    build: Any = None,
    prepare: Any = None,
    **app_kwargs: Any,
) -> Iterator[InProc]:
    """The example server (or ``build()``'s) in this process (its own thread and event
    loop), its task requests through ``front_door``; ``prepare(app)`` may change the app
    first."""
    if build is not None:
        mcp, tasks = build()
    else:
        # tests stop it with tasks still running: no shutdown grace to wait out
        config = EngineConfig(shutdown_grace_s=0)
        mcp, tasks = build_server(store=InMemoryTaskStore(), tokens=tokens, config=config)
    app = tasks.streamable_http_app(task_endpoint=task_endpoint(front_door), **app_kwargs)
    if prepare is not None:
        prepare(app)
    app = tidy_http_errors(app)
    # Bound here and handed to uvicorn: no other test process can take the port between
    # choosing it and listening on it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))

    async def serve() -> None:
        async with tasks:
            await server.serve(sockets=[sock])

    thread = threading.Thread(target=anyio.run, args=(serve,), daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive(), "the server's thread ended before it started"
        return bool(server.started)

    until(started, interval=0.02, what="the in-process server starts")
    try:
        yield InProc(f"http://127.0.0.1:{port}/mcp", tasks)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
